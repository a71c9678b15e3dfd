"""Run and export directories as language models: what `elmo perplexity` says when one cannot be read."""

from __future__ import annotations

import pytest

from elmo.cli import main
from elmo.errors import WeightFileError
from elmo.formats.published import demo_model_dir
from elmo.presets import preset_path
from elmo.training.run_files import RUN_CONFIG_FILE, load_language_model


def test_perplexity_of_the_demo_model_names_the_missing_softmax(tmp_path, capsys):
    """The demo directory holds a train_config.json, which once made it read as a run 'with no checkpoint yet'."""
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat .\n", encoding="utf-8")
    assert main(["perplexity", "--model", str(demo_model_dir()), "--data", str(text)]) == 1
    error = capsys.readouterr().err
    assert "demo has no softmax (softmax.hdf5 + vocab.txt): perplexity needs a language model" in error
    assert "elmo finetune --model" in error and "checkpoint" not in error


def test_a_run_without_a_checkpoint_says_so(tmp_path):
    (tmp_path / RUN_CONFIG_FILE).write_text(preset_path("tiny").read_text())
    with pytest.raises(WeightFileError, match="the run has no checkpoint yet"):
        load_language_model(tmp_path)
