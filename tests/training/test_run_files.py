"""Run and export directories as language models: what `elmo perplexity` says when one cannot be read."""

from __future__ import annotations

import pytest

from elmo.errors import WeightFileError
from elmo.presets import preset_path
from elmo.training.run_files import RUN_CONFIG_FILE, load_language_model


def test_a_run_without_a_checkpoint_says_so(tmp_path):
    (tmp_path / RUN_CONFIG_FILE).write_text(preset_path("tiny").read_text())
    with pytest.raises(WeightFileError, match="the run has no checkpoint yet"):
        load_language_model(tmp_path)
