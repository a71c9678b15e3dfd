"""The configs shipped inside the package, found by name after ``pip install`` from any directory: training presets
(``<name>.json``, in the options.json shape; read by :mod:`elmo.training.presets`) and task configs
(``tasks/<name>.json``; read by :mod:`elmo.tasks.task_config`)."""

from __future__ import annotations

from pathlib import Path

from elmo.errors import ConfigError

PRESET_DIR = Path(__file__).resolve().parent
"""Training presets."""
TASK_PRESET_DIR = PRESET_DIR / "tasks"
"""Task-model configs."""


def preset_names(directory: Path = PRESET_DIR) -> list[str]:
    """The configs shipped in ``directory``, by name."""
    return sorted(p.stem for p in directory.glob("*.json"))


def preset_path(name_or_path: str, directory: Path = PRESET_DIR) -> Path:
    """A JSON file given by path, or the shipped config of that name in ``directory``."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise ConfigError(f"--config {name_or_path}: no such file")
        return path
    candidate = directory / f"{name_or_path}.json"
    if not candidate.is_file():
        known = ", ".join(preset_names(directory))
        raise ConfigError(f"--config {name_or_path}: no such preset (known: {known}) and no such file")
    return candidate
