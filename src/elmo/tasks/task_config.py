"""Task-model configs: JSON files (the shipped ones in ``elmo/presets/tasks/``) map onto these dataclasses (unknown
keys are errors)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.errors import ConfigError
from elmo.modules.initial_state import INITIAL_STATES
from elmo.precision import Precision, parse_precision
from elmo.presets import TASK_PRESET_DIR, preset_path

TASKS = ("ner", "sst")


@dataclass
class ElmoUseConfig:
    """How the task model uses ELMo (paper section 3.3, Tables 2 and 3)."""

    enabled: bool = True
    """False gives the baseline: the same task model without ELMo."""
    layers: str = "all"
    """``all``: a learned softmax mix of the L + 1 layers; ``top``: the top layer only (fixed weights)."""
    l2_coef: float = 0.001
    """lambda in lambda * ||w||^2 on the pre-softmax mix weights (ignored for ``top``)."""
    dropout: float = 0.5
    """Dropout on each ELMo representation."""
    do_layer_norm: bool = False
    at_output: bool = False
    """Also concatenate ELMo (its own mix) to the task encoder's output."""
    cached: bool = True
    """Precompute the frozen biLM's activations once; False runs the biLM inside the model every batch."""
    embed_batch_size: int = 64
    precision: Precision = Precision.AUTO
    """Of the biLM pass that fills the activation cache (``elmo embed --precision``); on the fly it runs in fp32."""
    initial_state: str = "zero"
    """Where the frozen biLM's LSTM state starts for each sentence (``elmo embed --initial-state``): ``zero``,
    ``warm`` or ``carry`` (the cache is filled in data order, each sentence starting where the previous one
    ended). Cached activations only; on the fly the biLM starts from zeros."""

    def __post_init__(self) -> None:
        self.precision = parse_precision(self.precision, "elmo.precision")
        if self.initial_state not in INITIAL_STATES:
            raise ConfigError(f"elmo.initial_state: expected one of {INITIAL_STATES}, got {self.initial_state!r}")
        if self.layers not in ("all", "top"):
            raise ConfigError(f"elmo.layers: expected 'all' or 'top', got {self.layers!r}")
        if self.l2_coef < 0 or not 0 <= self.dropout < 1:
            raise ConfigError(f"elmo: need l2_coef >= 0 and 0 <= dropout < 1, got {self.l2_coef}, {self.dropout}")


@dataclass
class ModelConfig:
    """The task encoder. The tagger uses a char-CNN; the classifier usually does not (char_filters = 0)."""

    # the context-independent token input x_k: word vectors and the task's own char CNN
    word_dim: int = 100  # word-vector size when no pretrained vectors are given (otherwise theirs)
    freeze_word_vectors: bool = False
    char_embedding_dim: int = 16
    char_filters: int = 128
    char_width: int = 3
    max_characters_per_token: int = 20  # the biLM always sees 50; the task CNN's cost grows with this
    # the BiLSTM encoder
    hidden_dim: int = 200  # per direction, for every BiLSTM layer
    num_layers: int = 2  # per BiLSTM (the BCN has two: encoder and integrator)
    dropout: float = 0.5  # on the BiLSTM's input, between its layers and before the output layers
    # the heads
    classifier: str = "maxpool"  # sst: maxpool (BiLSTM + max-pooling) or bcn (the paper's biattentive network)
    classifier_hidden_dim: int = 200  # classifiers: the feed-forward layer after pooling
    bio_constraints: bool = True  # tagger: forbid invalid BIO transitions (used only when all tags are O/B-X/I-X)

    def __post_init__(self) -> None:
        if self.classifier not in ("maxpool", "bcn"):
            raise ConfigError(f"model.classifier: expected 'maxpool' or 'bcn', got {self.classifier!r}")


@dataclass
class TaskTrainConfig:
    """A task model's ``train`` section; a biLM trains by :class:`elmo.training.train_config.TrainConfig`."""

    epochs: int = 20
    batch_size: int = 32
    learning_rate: float = 0.001
    grad_clip: float = 5.0
    patience: int = 5
    """Stop after this many epochs without a better dev score, once it has left 0 (a tagger tagging everything
    ``O`` on a few hundred sentences can sit at F1 0 for several epochs before it starts to learn)."""
    seed: int = 0
    max_vocab: int = 50000
    """Most frequent pretrained words kept."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "patience"):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name}: expected >= 1, got {getattr(self, name)}")


@dataclass
class TaskConfig:
    task: str
    """``ner``: CoNLL tagging with a CRF tagger (seqeval F1); ``sst``: label TAB sentence classification (accuracy)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    elmo: ElmoUseConfig = field(default_factory=ElmoUseConfig)
    train: TaskTrainConfig = field(default_factory=TaskTrainConfig)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"task: expected one of {TASKS}, got {self.task!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> TaskConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object")
        _check_keys(data, {f.name for f in dataclasses.fields(cls)}, source, "")
        parts = {}
        for name, kind in (("model", ModelConfig), ("elmo", ElmoUseConfig), ("train", TaskTrainConfig)):
            section = data.get(name, {})
            if not isinstance(section, dict):
                raise ConfigError(f"{source}: '{name}' must be an object")
            _check_keys(section, {f.name for f in dataclasses.fields(kind)}, source, f"{name}.")
            parts[name] = kind(**section)
        if "task" not in data:
            raise ConfigError(f"{source}: missing 'task' (one of {TASKS})")
        return cls(task=data["task"], **parts)

    def replace(self, **overrides: Any) -> TaskConfig:
        """Copy with dotted overrides, e.g. ``replace(**{"elmo.enabled": False, "train.seed": 2})``."""
        data = self.to_dict()
        for dotted, value in overrides.items():
            section, _, key = dotted.rpartition(".")
            target = data[section] if section else data
            if key not in target:
                raise ConfigError(f"unknown config key {dotted!r}")
            target[key] = value
        return TaskConfig.from_dict(data)


def _check_keys(data: dict[str, Any], allowed: set[str], source: str, prefix: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{source}: unknown key '{prefix}{unknown[0]}' (allowed: {', '.join(sorted(allowed))})")


def read_task_config(name_or_path: str | Path) -> TaskConfig:
    """Load a task config: a shipped one by name (``ner``, ``sst``, ...: :data:`TASK_PRESET_DIR`) or a JSON file;
    errors name the file and the key."""
    from elmo.formats.checked_reads import read_json

    path = preset_path(str(name_or_path), TASK_PRESET_DIR)
    return TaskConfig.from_dict(read_json(path), source=str(path))
