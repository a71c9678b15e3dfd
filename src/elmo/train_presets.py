"""Find and read training presets: a name (``configs/<name>.json`` of the source tree) or a JSON file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from elmo.config import BiLMConfig
from elmo.errors import ConfigError
from elmo.model_files import read_json
from elmo.train_config import TrainConfig, split_preset

PRESET_DIR = Path(__file__).resolve().parents[2] / "configs"


def preset_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise ConfigError(f"--config {name_or_path}: no such file")
        return path
    candidate = PRESET_DIR / f"{name_or_path}.json"
    if not candidate.is_file():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.json")) if PRESET_DIR.is_dir() else []
        raise ConfigError(f"--config {name_or_path}: no such preset (known: {', '.join(known) or 'none'})")
    return candidate


def load_preset(name_or_path: str, overrides: dict[str, Any] | None = None) -> tuple[BiLMConfig, TrainConfig]:
    """(architecture, training config) of a preset, with command-line overrides applied to the training keys."""
    path = preset_path(name_or_path)
    data = read_json(path)
    source = str(path)
    if isinstance(data, dict) and overrides:
        data = {**data, **overrides}
        source += " with the command-line options"  # a bad value may come from either
    return split_preset(data, source)


def training_only(overrides: dict[str, Any]) -> TrainConfig:
    """Default training keys plus overrides (fine-tuning: the architecture comes from the model)."""
    try:
        return dataclasses.replace(TrainConfig(), **overrides)
    except (TypeError, ConfigError) as e:
        raise ConfigError(f"training options: {e}") from e
