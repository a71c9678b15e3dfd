"""SIGKILL at seeded random moments, SIGTERM and SIGINT: a resumed job equals an uninterrupted one."""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from elmo.formats.checkpoints import latest_checkpoint
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm, tiny_config
from tests.faults.conftest import elmo, start_elmo, train_args

pytestmark = pytest.mark.slow

TRAIN_STEPS = ["--max-steps", "40", "--checkpoint-every", "4", "--log-every", "10", "--optimizer", "adam",
               "--learning-rate", "0.01", "--lr-schedule", "cosine", "--state-reset", "0.2"]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(latest_checkpoint(run_dir) / "model.safetensors")


def _assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


def _hdf5_contents(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {key: f[key][()] for key in f}


def _wait_for(predicate, proc, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert proc.poll() is None, f"the job ended before the fault was injected: {proc.stderr.read()}"
        assert time.time() < deadline, "timed out waiting for the job"
        time.sleep(0.01)


def test_training_killed_at_random_moments_resumes_bit_identically(corpus, tmp_path):
    reference = tmp_path / "reference"
    elmo(*train_args(corpus, reference, *TRAIN_STEPS), check=True)
    run = tmp_path / "killed"
    rng = random.Random(1234)
    kills = 0
    proc = start_elmo(*train_args(corpus, run, *TRAIN_STEPS))
    while kills < 3:  # three kills at seeded random moments after the first checkpoint, each followed by --resume
        _wait_for(lambda: latest_checkpoint(run) is not None, proc)
        time.sleep(rng.uniform(0.0, 0.6))
        if proc.poll() is not None:
            break
        proc.kill()
        proc.wait()
        kills += 1
        proc = start_elmo(*train_args(corpus, run, *TRAIN_STEPS, "--resume"))
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert kills >= 2, "the run finished before it could be killed twice"
    _assert_same_weights(reference, run)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_saves_a_checkpoint_and_resume_is_bit_identical(corpus, tmp_path, signum):
    run = tmp_path / "terminated"
    endless = ["--max-steps", "1000000", "--checkpoint-every", "1000000", "--log-every", "10"]
    proc = start_elmo(*train_args(corpus, run, *endless))
    _wait_for(lambda: (run / "tensorboard").is_dir(), proc)  # the loop has started
    time.sleep(0.5)
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 128 + signum
    message = proc.stderr.read()
    assert "Traceback" not in message and f"stopped by {signum.name} at step" in message and "--resume" in message
    stopped_at = latest_checkpoint(run)
    assert stopped_at is not None, "SIGTERM must leave a checkpoint of the step it stopped at"
    step = int(stopped_at.name.split("-")[1])
    assert f"at step {step};" in message
    # the same run, uninterrupted, to 10 steps past the stop (constant learning rate: the schedule ignores the end)
    finish = ["--max-steps", str(step + 10), "--checkpoint-every", "1000000", "--log-every", "10"]
    elmo(*train_args(corpus, run, *finish, "--resume"), check=True)
    reference = tmp_path / "reference"
    elmo(*train_args(corpus, reference, *finish), check=True)
    _assert_same_weights(reference, run)


@pytest.fixture(scope="module")
def model_with_training_keys(tmp_path_factory) -> Path:
    """A tiny original-format model whose options.json holds bilm-tf's batch keys (fine-tuning starts from them)."""
    config = dataclasses.replace(tiny_config(), training={"batch_size": 4, "unroll_steps": 5,
                                                          "n_negative_samples_batch": 16, "n_train_tokens": 999})
    return save_bilm(random_bilm(config), tmp_path_factory.mktemp("finetune-model"))


def _finetune_args(model: Path, corpus: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["-q", "finetune", "--model", str(model), "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
            "--valid", str(corpus["valid"]), "--out", str(out), "--no-progress", *extra]


def test_sigint_checkpoints_a_finetune_and_resume_is_bit_identical(model_with_training_keys, corpus, tmp_path):
    model, run = model_with_training_keys, tmp_path / "interrupted"
    endless = ["--max-steps", "1000000", "--checkpoint-every", "1000000", "--log-every", "10"]
    proc = start_elmo(*_finetune_args(model, corpus, run, *endless))
    _wait_for(lambda: (run / "tensorboard").is_dir(), proc)  # the loop has started
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 128 + signal.SIGINT
    message = proc.stderr.read()
    assert "Traceback" not in message and "stopped by SIGINT at step" in message and "--resume" in message
    stopped_at = latest_checkpoint(run)
    assert stopped_at is not None, "Ctrl-C must leave a checkpoint of the step it stopped at"
    step = int(stopped_at.name.split("-")[1])
    recorded = json.loads((run / "finetune.json").read_text())
    assert recorded["before"] is not None and recorded["after"] is None
    # the same fine-tuning, uninterrupted, to 10 steps past the stop (constant learning rate)
    finish = ["--max-steps", str(step + 10), "--checkpoint-every", "1000000", "--log-every", "10"]
    elmo(*_finetune_args(model, corpus, run, *finish, "--resume"), check=True)
    reference = tmp_path / "reference"
    elmo(*_finetune_args(model, corpus, reference, *finish), check=True)
    _assert_same_weights(reference, run)
    finished = json.loads((run / "finetune.json").read_text())
    assert finished == json.loads((reference / "finetune.json").read_text()) and finished["after"] is not None
    assert json.loads((run / "train_config.json").read_text())["n_negative_samples_batch"] == 16  # the model's


def _embed_args(model: Path, text: Path, out: Path, *extra: str) -> list[str]:
    return ["-q", "embed", "--all", "--model", str(model), str(text), str(out), "--chunk-size", "16",
            "--batch-size", "8", "--no-progress", *extra]


def _long_input(tmp_path: Path) -> Path:
    rng = random.Random(5)
    words = "the a cat dog sat ran on under mat tree big small , . and then it was".split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(2000)]
    path = tmp_path / "input.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _parts_done(out: Path) -> int:
    return len(list(out.parent.glob(f"{out.name}.parts/part-*.hdf5")))


def test_embedding_killed_at_random_moments_resumes_to_identical_contents(tiny_model, tmp_path):
    text = _long_input(tmp_path)
    reference, out = tmp_path / "reference.hdf5", tmp_path / "killed.hdf5"
    elmo(*_embed_args(tiny_model, text, reference), check=True)
    rng = random.Random(99)
    proc = start_elmo(*_embed_args(tiny_model, text, out))
    for _ in range(3):
        _wait_for(lambda: _parts_done(out) > 0, proc)
        time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is not None:
            break
        proc.kill()
        proc.wait()
        proc = start_elmo(*_embed_args(tiny_model, text, out, "--resume"))
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    expected, got = _hdf5_contents(reference), _hdf5_contents(out)
    assert sorted(got) == sorted(expected)  # no missing or duplicated keys
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_sigint_leaves_a_resumable_partial_output(tiny_model, tmp_path):
    text = _long_input(tmp_path)
    reference, out = tmp_path / "reference.hdf5", tmp_path / "interrupted.hdf5"
    elmo(*_embed_args(tiny_model, text, reference), check=True)
    proc = start_elmo(*_embed_args(tiny_model, text, out))
    _wait_for(lambda: _parts_done(out) > 0, proc)
    proc.send_signal(signal.SIGINT)
    code, message = proc.wait(timeout=60), proc.stderr.read()
    assert code == 128 + signal.SIGINT, message
    assert "Traceback" not in message and "stopped by SIGINT" in message and "--resume" in message
    assert not out.exists() and _parts_done(out) > 0
    assert not list(out.parent.glob(f"{out.name}.parts/*.tmp")), "the part being written must be dropped"
    elmo(*_embed_args(tiny_model, text, out, "--resume"), check=True)
    expected, got = _hdf5_contents(reference), _hdf5_contents(out)
    assert sorted(got) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
