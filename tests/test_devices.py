"""A device this machine lacks is one ``elmo: error:`` line and exit status 1 on every command that takes
``--device``, and a :class:`SettingError` from the Python API, before any work starts."""

from __future__ import annotations

import pytest
import torch

from elmo.cli import main
from elmo.devices import checked_device
from elmo.embedding.embedder import Embedder
from elmo.settings import SettingError
from elmo.training.perplexity import model_perplexity
from tests.cli_commands import commands_with
from tests.conftest import random_bilm

MISSING = [("nonsense", "nonsense: not a device name (cpu, cuda, cuda:N or mps)"),
           ("xpu", "xpu: xpu devices are not supported")]
if not torch.cuda.is_available():
    MISSING += [("cuda", "cuda: this machine has no CUDA device (torch.cuda.is_available() is False); use cpu"),
                ("cuda:3", "cuda:3: this machine has no CUDA device")]
elif torch.cuda.device_count() < 4:
    MISSING.append(("cuda:3", f"cuda:3: this machine has {torch.cuda.device_count()} CUDA device(s)"))
if not torch.backends.mps.is_available():
    MISSING.append(("mps", "mps: this machine has no MPS device"))


def commands_with_device() -> dict[str, list[str]]:
    """Every (sub)command that has --device, with placeholder values for its required arguments."""
    return {name: argv for name, (_, argv) in commands_with(lambda action: "--device" in action.option_strings).items()}


COMMANDS = commands_with_device()


def test_the_commands_with_device_are_found():
    assert set(COMMANDS) == {"embed", "train", "finetune", "perplexity", "substitutes", "serve", "task train",
                             "task evaluate", "probe pos", "probe wsd", "neighbours"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("device, message", MISSING)
def test_a_missing_device_is_one_line(command, device, message, capsys):
    assert main([*COMMANDS[command], "--device", device]) == 1
    err = capsys.readouterr().err
    assert err == f"elmo: error: --device {message}" + err.split(message, 1)[1]
    assert err.count("\n") == 1


@pytest.mark.parametrize("device, message", MISSING)
def test_the_python_api_checks_the_device(device, message):
    with pytest.raises(SettingError, match=f"^device {message[: message.index(':')]}"):
        Embedder(random_bilm(), device=device)
    with pytest.raises(SettingError, match="^device"):
        model_perplexity("no-such-model", "no-such-file", device=device)


def test_available_devices_pass():
    assert checked_device("cpu") == torch.device("cpu")
    assert checked_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
