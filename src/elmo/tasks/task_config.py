"""Task-model configs: JSON files (the shipped ones in ``elmo/presets/tasks/``) map onto these dataclasses.

Every key of the ``elmo``, ``model`` and ``train`` sections is a :func:`~elmo.settings.setting`: its default, help
line and check are declared once, beside it; unknown keys and refused values are one-line errors naming the file
and the key (``ner.json: train.learning_rate must be a finite number, got inf``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.errors import ConfigError
from elmo.precision import Precision
from elmo.presets import TASK_PRESET_DIR, preset_path
from elmo.settings import at_least, check_keys, check_settings, fraction, greater_than, setting
from elmo.shared_settings import INITIAL_STATE, PRECISION, SEED
from elmo.tasks.kinds import TASK_KINDS, TaskKind, task_kind
from elmo.tasks.model_config import ModelConfig

ELMO_LAYERS = ("all", "top")


@dataclass
class ElmoUseConfig:
    """How the task model uses ELMo (paper section 3.3, Tables 2 and 3)."""

    enabled: bool = setting(True, "use ELMo; false gives the baseline: the same task model without ELMo")
    layers: str = setting(
        "all", "all: a learned softmax mix of the L + 1 layers; top: the top layer only (fixed weights)",
        choices=ELMO_LAYERS,
    )
    l2_coef: float = setting(
        0.001, "lambda in lambda * ||w||^2 on the pre-softmax mix weights (ignored for top)", check=at_least(0)
    )
    dropout: float = setting(0.5, "dropout on each ELMo representation", check=fraction())
    do_layer_norm: bool = setting(False, "the original's masked-batch layer norm of each biLM layer before mixing")
    at_output: bool = setting(False, "also concatenate ELMo (its own mix) to the task encoder's output")
    cached: bool = setting(
        True, "precompute the frozen biLM's activations once; false runs the biLM inside the model every batch"
    )
    embed_batch_size: int = setting(64, "sentences per biLM batch when the activation cache is filled",
                                    check=at_least(1))
    precision: Precision = PRECISION.field(Precision.AUTO)
    """Of the biLM pass that fills the activation cache (``elmo embed --precision``); on the fly it runs in fp32.
    ``auto`` by default, as in training: a task model trains."""
    initial_state: str = INITIAL_STATE.field()
    """Where the frozen biLM's LSTM state starts for each sentence (``elmo embed --initial-state``): ``zero``,
    ``warm`` or ``carry`` (the cache is filled in data order, each sentence starting where the previous one
    ended). Cached activations only; on the fly the biLM starts from zeros."""

    def __post_init__(self) -> None:
        check_settings(self, prefix="elmo.")


@dataclass
class TaskTrainConfig:
    """A task model's ``train`` section; a biLM trains by :class:`elmo.training.train_config.TrainConfig`."""

    epochs: int = setting(20, "most training epochs (early stopping may end the run sooner)", check=at_least(1))
    batch_size: int = setting(32, "sentences per training batch", check=at_least(1))
    learning_rate: float = setting(0.001, "Adam's learning rate", check=greater_than(0))
    grad_clip: float = setting(5.0, "gradient-norm clip", check=greater_than(0))
    patience: int = setting(5, "epochs without a better dev score before stopping, once the score has left 0",
                            check=at_least(1))
    """Counted once the dev score has left 0 (a tagger tagging everything ``O`` on a few hundred sentences can sit at
    F1 0 for several epochs before it starts to learn)."""
    seed: int = SEED.field()
    max_vocab: int = setting(50000, "most frequent pretrained words kept", check=at_least(1))

    def __post_init__(self) -> None:
        check_settings(self, prefix="train.")


SECTIONS: dict[str, type] = {"model": ModelConfig, "elmo": ElmoUseConfig, "train": TaskTrainConfig}
"""A task config's sections: its JSON objects, by key."""


@dataclass
class TaskConfig:
    task: str
    """The task kind: a name in :data:`elmo.tasks.kinds.TASK_KINDS`."""
    model: ModelConfig = field(default_factory=ModelConfig)
    elmo: ElmoUseConfig = field(default_factory=ElmoUseConfig)
    train: TaskTrainConfig = field(default_factory=TaskTrainConfig)

    def __post_init__(self) -> None:
        task_kind(self.task)

    @property
    def kind(self) -> TaskKind:
        """What the task name decides: the data format, targets, metric and model."""
        return task_kind(self.task)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> TaskConfig:
        """``data`` as parsed from a JSON file; every error is one line starting with ``source``."""
        check_keys(data, {f.name for f in dataclasses.fields(cls)}, source)
        if "task" not in data:
            raise ConfigError(f"{source}: missing 'task' (one of {', '.join(TASK_KINDS)})")
        for name, section in SECTIONS.items():
            check_keys(data.get(name, {}), {f.name for f in dataclasses.fields(section)}, source, f"{name}.")
        try:
            return cls._from_checked_keys(data)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def _from_checked_keys(cls, data: dict[str, Any]) -> TaskConfig:
        return cls(task=data["task"], **{name: section(**data.get(name, {})) for name, section in SECTIONS.items()})

    def replace(self, **overrides: Any) -> TaskConfig:
        """Copy with dotted overrides, e.g. ``replace(**{"elmo.enabled": False, "train.seed": 2})``.

        A refused value raises the setting's own :class:`~elmo.settings.SettingError` (``train.seed must be >= 0,
        got -1``), which the CLI spells as the flag that gave it (``--seed``)."""
        data = self.to_dict()
        for dotted, value in overrides.items():
            section, _, key = dotted.rpartition(".")
            target = data[section] if section else data
            if key not in target:
                raise ConfigError(f"unknown config key {dotted!r}")
            target[key] = value
        return TaskConfig._from_checked_keys(data)


def read_task_config(name_or_path: str | Path) -> TaskConfig:
    """Load a task config: a shipped one by name (:data:`TASK_PRESET_DIR`) or a JSON file; errors name the file and
    the key."""
    from elmo.formats.checked_reads import read_json

    path = preset_path(str(name_or_path), TASK_PRESET_DIR)
    return TaskConfig.from_dict(read_json(path), source=str(path))
