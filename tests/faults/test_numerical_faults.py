"""A non-finite loss or gradient is skipped and logged; a run that keeps diverging stops without writing NaN."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from elmo.cli import main
from elmo.formats.checkpoints import checkpoint_dirs
from elmo.modules import language_model
from tests.faults.conftest import train_args

STEPS = ["--max-steps", "12", "--checkpoint-every", "3", "--log-every", "1"]


def _poison(monkeypatch, bad_steps: set[int], kind: str) -> None:
    """Make the loss (kind="loss") or only the gradient (kind="gradient") non-finite at the given 1-based steps."""
    real_losses = language_model.head_losses
    calls = {"n": 0}

    def losses(softmax, sampler, hiddens, targets, samples=None):
        value, parts = real_losses(softmax, sampler, hiddens, targets, samples)
        calls["n"] += 1  # one call (both directions) per step
        if calls["n"] in bad_steps:
            if kind == "loss":
                return value * float("nan"), parts
            # finite value, NaN gradient: d sqrt(x)/dx at 0 is inf, times 0
            return value + 0.0 * torch.sqrt(0.0 * hiddens[0].abs().sum()), parts
        return value, parts

    monkeypatch.setattr(language_model, "head_losses", losses)


def _all_checkpoints_finite(run: Path) -> None:
    for checkpoint in checkpoint_dirs(run):
        for name, value in load_file(checkpoint / "model.safetensors").items():
            assert torch.isfinite(value).all(), f"{checkpoint}: {name} is not finite"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["loss", "gradient"])
def test_a_non_finite_step_is_skipped_and_logged(corpus, tmp_path, monkeypatch, caplog, kind):
    _poison(monkeypatch, {4, 5}, kind)
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        assert main(train_args(corpus, run, *STEPS)) == 0
    warnings = [r.getMessage() for r in caplog.records if "skipped this update" in r.getMessage()]
    assert len(warnings) == 2 and warnings[0].startswith("step 4: non-finite")
    trainer = json.loads((checkpoint_dirs(run)[-1] / "trainer.json").read_text())
    assert trainer["skipped_steps"] == 2 and trainer["bad_steps"] == 0 and trainer["step"] == 12
    _all_checkpoints_finite(run)
    logged = [h["train_loss"] for h in json.loads((run / "history.json").read_text()) if "train_loss" in h]
    assert len(logged) == 12 and sum(map(lambda x: x != x, logged)) == (2 if kind == "loss" else 0)


@pytest.mark.slow
def test_a_run_that_keeps_diverging_stops_with_a_clear_message(corpus, tmp_path, monkeypatch, capsys):
    _poison(monkeypatch, set(range(5, 100)), "loss")
    run = tmp_path / "run"
    assert main(train_args(corpus, run, *STEPS, "--max-steps", "40")) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("elmo: error: training diverged: 10 steps in a row with a non-finite loss")
    # steps 5-14 are skipped (the weights stay those of step 4); the run stops at step 14, before checkpoint 15
    assert checkpoint_dirs(run)[-1].name == "step-00000012" and "step-00000012" in error and "--resume" in error
    _all_checkpoints_finite(run)
