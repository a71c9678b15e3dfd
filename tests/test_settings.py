"""Settings declared once: the check, the flag and the config key come from one declaration."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest

from elmo.cli.setting_flags import add_flag, add_setting_flags, settings_from_args
from elmo.embedding.embed_options import EmbedOptions
from elmo.errors import ConfigError
from elmo.precision import Precision
from elmo.serving.serve_options import ServeOptions
from elmo.settings import SettingError, at_least, check_keys, check_settings, fraction, setting
from elmo.shared_settings import MAX_BATCH_TOKENS, PRECISION, PROGRESS
from elmo.tasks.task_config import ElmoUseConfig
from elmo.training.train_config import TrainConfig


@dataclasses.dataclass(frozen=True)
class Knobs:
    count: int = setting(2, "how many", check=at_least(1))
    rate: float = setting(0.5, "a fraction", check=fraction(), flag="--the-rate")
    mode: str = setting("a", "which", choices=("a", "b"))
    on: bool = setting(False, "a switch")

    def __post_init__(self) -> None:
        check_settings(self, prefix="knobs.")


@pytest.mark.parametrize("given, config_message, flag_message", [
    ({"count": 0}, "knobs.count must be >= 1, got 0", "--count must be >= 1, got 0"),
    ({"count": True}, "knobs.count must be a whole number, got True", "--count must be a whole number, got True"),
    ({"rate": float("inf")}, "knobs.rate must be a finite number, got inf", "--the-rate must be a finite number"),
    ({"rate": 1.0}, "knobs.rate must be in [0, 1), got 1.0", "--the-rate must be in [0, 1), got 1.0"),
    ({"mode": "c"}, "knobs.mode must be one of a, b; got 'c'", "--mode must be one of a, b; got 'c'"),
    ({"on": "yes"}, "knobs.on must be true or false, got 'yes'", "--on must be true or false, got 'yes'"),
])
def test_one_check_gives_the_config_key_and_the_flag(given, config_message, flag_message):
    with pytest.raises(SettingError) as raised:
        Knobs(**given)
    assert str(raised.value) == config_message
    assert raised.value.command_line.startswith(flag_message)


def test_flags_come_from_the_declaration_and_feed_it_back():
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, Knobs)
    args = parser.parse_args(["--count", "3", "--the-rate", "0.25", "--mode", "b", "--on"])
    assert Knobs(**settings_from_args(Knobs, args)) == Knobs(count=3, rate=0.25, mode="b", on=True)
    assert "a fraction (default: 0.5)" in parser.format_help()


def test_a_shared_setting_is_one_object_used_by_every_part():
    """Precision, the padded-token budget: one declaration each, with a part's own default where it differs."""
    fields = {cls: {f.name: f for f in dataclasses.fields(cls)} for cls in (EmbedOptions, ServeOptions, TrainConfig,
                                                                             ElmoUseConfig)}
    for cls in fields:
        assert fields[cls]["precision"].metadata["setting"].help == PRECISION.help
    assert EmbedOptions().precision is ServeOptions().precision is Precision.FP32  # faithful by default
    assert TrainConfig().precision is ElmoUseConfig().precision is Precision.AUTO  # training keeps auto
    budget = [fields[cls]["max_batch_tokens"].metadata["setting"] for cls in (EmbedOptions, ServeOptions)]
    assert all(b.help == MAX_BATCH_TOKENS.help and b.check is MAX_BATCH_TOKENS.check for b in budget)
    assert ServeOptions().embed_options().max_batch_tokens == ServeOptions().max_batch_tokens


def test_progress_is_on_off_or_decided_by_the_terminal():
    parser = argparse.ArgumentParser()
    add_flag(parser, "progress", PROGRESS, bool)
    assert [parser.parse_args(a).progress for a in ([], ["--progress"], ["--no-progress"])] == [None, True, False]


def test_one_key_check_for_every_config_file():
    with pytest.raises(ConfigError, match=r"^f.json: unknown key 'train.lr' \(known: epochs, seed\)$"):
        check_keys({"lr": 1}, {"epochs", "seed"}, "f.json", "train.")
    with pytest.raises(ConfigError, match=r"^f.json: 'train' must be a JSON object$"):
        check_keys([], {"epochs"}, "f.json", "train.")
    check_keys({"seed": 1}, {"epochs", "seed"}, "f.json")


def test_the_settings_and_their_checks_import_and_run_without_torch():
    """The settings are declarations: the spaCy entry point builds its config from them whenever spaCy builds any
    pipeline, and must not load torch for that. Checking values needs no torch either."""
    script = ("import sys\n"
              "import elmo.settings, elmo.shared_settings, elmo.embedding.embed_options, elmo.embedding.selection\n"
              "from elmo.embedding.embed_options import EmbedOptions, OutputOptions\n"
              "from elmo.embedding.selection import VectorSelection\n"
              "EmbedOptions(precision='bf16', batch_size=3), OutputOptions(), VectorSelection(layer='mix', "
              "mix_weights='0,0,0')\n"
              "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
