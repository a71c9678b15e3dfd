"""Read training presets: a shipped one by name (:mod:`elmo.presets`) or a JSON file, with command-line overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from elmo.config import BiLMConfig
from elmo.errors import ConfigError
from elmo.formats.checked_reads import read_json
from elmo.presets import preset_path
from elmo.training.run_files import RUN_CONFIG_FILE
from elmo.training.train_config import TrainConfig, split_preset, upgrade_keys


def load_preset(name_or_path: str, overrides: dict[str, Any] | None = None) -> tuple[BiLMConfig, TrainConfig]:
    """(architecture, training config) of a preset, with command-line overrides applied to the training keys."""
    path = preset_path(name_or_path)
    data = read_json(path)
    source = str(path)
    if isinstance(data, dict) and overrides:
        # each side under the current key names first, so that an override replaces an old spelling in the file
        data = {**upgrade_keys(data, source), **upgrade_keys(overrides, "the command-line options")}
        source += " with the command-line options"  # a bad value may come from either
    return split_preset(data, source)


def training_only(overrides: dict[str, Any]) -> TrainConfig:
    """Default training keys plus overrides (fine-tuning: the architecture comes from the model)."""
    overrides = upgrade_keys(overrides, "training options")
    try:
        return dataclasses.replace(TrainConfig(), **overrides)
    except (TypeError, ConfigError) as e:
        raise ConfigError(f"training options: {e}") from e


def run_preset(
    name_or_path: str | None, overrides: dict[str, Any], run_dir: str | Path, resume: bool, fine_tuning: bool = False,
) -> tuple[BiLMConfig | None, TrainConfig]:
    """The preset a run trains with, command-line overrides applied.

    ``name_or_path``, or when resuming without one, the run directory's own ``train_config.json``; fine-tuning may
    go without a preset (architecture None: it comes from the model).
    """
    saved = Path(run_dir) / RUN_CONFIG_FILE
    if name_or_path is None and resume and saved.is_file():
        name_or_path = str(saved)
    if name_or_path is not None:
        return load_preset(name_or_path, overrides)
    if fine_tuning:
        return None, training_only(overrides)
    raise ConfigError("--config is required (a preset name such as 'small', or a JSON file)")
