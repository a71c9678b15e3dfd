"""`elmo finetune`: the settings it starts from, its help, and the run directory it leaves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from elmo.cli import build_parser, main
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm, tiny_config, write_lm_corpus

MODEL_KEYS = {"batch_size": 3, "unroll_steps": 4, "n_negative_samples_batch": 16, "dropout": 0.05,
              "n_train_tokens": 768648884, "n_tokens_vocab": 793471}
"""A bilm-tf options.json's training keys; the last two describe the corpus it was trained on."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    config = dataclasses.replace(tiny_config(), training=dict(MODEL_KEYS))
    return save_bilm(random_bilm(config), tmp_path_factory.mktemp("model"))


def _finetune(model: Path, corpus: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["-q", "finetune", "--model", str(model), "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
            "--out", str(out), "--no-progress", "--max-steps", "1", *extra]


@pytest.mark.slow
def test_without_a_preset_the_models_own_batch_settings_apply(model, corpus, tmp_path):
    assert main(_finetune(model, corpus, tmp_path / "ft", "--unroll-steps", "6")) == 0
    used = json.loads((tmp_path / "ft" / "train_config.json").read_text())
    assert (used["batch_size"], used["n_negative_samples_batch"], used["dropout"]) == (3, 16, 0.05)  # the model's
    assert used["unroll_steps"] == 6  # a flag replaces the model's value
    assert used["n_train_tokens"] is None and used["n_tokens_vocab"] is None  # the new text's, not the model's
    assert used["learning_rate"] == 0.2  # not in the model's options: the default the help shows
    assert main(_finetune(model, corpus, tmp_path / "preset", "--config", "tiny")) == 0
    assert json.loads((tmp_path / "preset" / "train_config.json").read_text())["batch_size"] == 4  # tiny's


def test_help_says_which_defaults_apply():
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    text = commands.choices["finetune"].format_help()
    assert "without it the model's own training keys" in " ".join(text.split())
    assert "--resume" in text


def test_train_resume_of_a_finetuning_run_points_to_finetune(model, corpus, tmp_path, capsys):
    """`elmo train --resume` would continue it but never write the perplexity after into finetune.json."""
    run = tmp_path / "ft"
    assert main(_finetune(model, corpus, run)) == 0
    args = ["train", "--resume", "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]), "--out", str(run)]
    assert main(args) == 1
    assert f"a fine-tuning run (finetune.json); continue it with `elmo finetune --model {model} --resume`" in \
        capsys.readouterr().err
