"""Training presets: one JSON file in the options.json shape, plus trainer keys.

    {"lstm": {...}, "char_cnn": {...}, "bidirectional": true,          <- the architecture (options.json)
     "batch_size": 128, "unroll_steps": 20, "n_negative_samples_batch": 8192, ...   <- original trainer keys
     "seed": 0, "checkpoint_every": 1250, "keep_checkpoints": 2, ...}               <- our trainer keys

Original keys keep their meaning: ``batch_size`` is rows per process (per GPU in bilm-tf), the gradient is taken of
``loss * unroll_steps``, the optimizer is Adagrad(``learning_rate``, initial accumulator 1.0) with global-norm clip
``all_clip_norm_val``. This module imports no torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from elmo.config import TRAINING_KEYS, BiLMConfig
from elmo.errors import ConfigError

OPTIMIZERS = ("adagrad", "adam")
LR_SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(schedule: str, step: int, total_steps: int, warmup_steps: int = 0) -> float:
    """Multiplier of the base learning rate for optimizer step ``step`` (0-based) of ``total_steps``.

    A pure function of the step, so a resumed run continues the schedule exactly.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


@dataclass
class TrainConfig:
    """How to train (the architecture is the :class:`BiLMConfig` of the same file)."""

    batch_size: int = 128
    """Rows per process and micro-batch (each row is an independent stream)."""
    unroll_steps: int = 20
    """T, the truncated-BPTT window."""
    n_negative_samples_batch: int = 8192
    """Negatives shared by the whole batch in the sampled softmax."""
    sample_softmax: bool = True
    """False trains with the full softmax (fine for vocabularies of a few 10k words)."""
    optimizer: str = "adagrad"
    """``adagrad`` (the original, with ``initial_accumulator_value``) or ``adam`` (faster on small corpora)."""
    learning_rate: float = 0.2
    initial_accumulator_value: float = 1.0
    lr_schedule: str = "constant"
    """``constant`` (the original), or ``linear``/``cosine`` decay to 0 at the last step after ``warmup_steps``."""
    warmup_steps: int = 0
    all_clip_norm_val: float = 10.0
    dropout: float = 0.1
    """On every LSTM layer input and on the LSTM output before the softmax."""
    variational_dropout: bool = False
    """One dropout mask per row and window, shared by its time steps (Gal & Ghahramani 2016), instead of one per
    position (the original)."""
    weight_dropout: float = 0.0
    """DropConnect on each LSTM layer's recurrent matrix, one mask per window (AWD-LSTM's WeightDrop); not in the
    original, 0 = off."""
    n_epochs: int = 10
    n_train_tokens: int | None = None
    """Corpus size, for the number of steps (n_epochs * n_train_tokens / tokens per step); counted when absent."""
    n_tokens_vocab: int | None = None
    share_embedding_softmax: bool = False
    seed: int = 0
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step (more rows per step without more memory)."""
    bf16: bool = False
    """bfloat16 autocast for the matrix products (pays on GPUs and CPUs with bf16 units)."""
    compile: bool = False
    """``torch.compile`` the training step's elementwise hot loops (:mod:`elmo.modules.compiled`): the LSTM
    windows' step loops, the softmax loss's blocks, the char CNN's max-pool and the highway layers, each fused into
    a few kernels (their
    many small passes are a large share of a CPU step). The same arithmetic; a minute or two of compiling when a run
    starts, and the eager code, with a warning, where compiling fails (no C++ compiler). Earlier versions called it
    ``compile_lstm`` (still read)."""
    checkpoint_every: int = 1250
    keep_checkpoints: int = 2
    log_every: int = 100
    eval_every: int = 0
    """Steps between held-out full-softmax perplexity evaluations (0: only at the end, when a file is given)."""
    eval_rows: int = 1
    """Parallel streams for the held-out evaluation during training (1 = one continuous stream)."""
    max_bad_steps: int = 10
    """A step with a non-finite loss or gradient is skipped; this many in a row stop the run."""
    state_reset_prob: float = 0.0
    """Chance that a row's carried LSTM state is zeroed before a window (0 in the original, which starts a row from
    zeros only at step 0). A model that never sees a zero state can fall, from one, into a saturated regime it never
    leaves, and stateless embedding and ``elmo perplexity`` start from zeros (docs/training.md)."""

    average_last: float = 0.0
    """Fraction of the run's final steps whose weights are averaged (uniform tail averaging); the held-out
    evaluations from then on, ``elmo export`` and ``elmo perplexity`` of the run use the mean (0: off, the
    original)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.type in ("bool", bool) and not isinstance(getattr(self, field.name), bool):
                raise ConfigError(f"{field.name}: expected true or false, got {getattr(self, field.name)!r}")
        for name in ("batch_size", "unroll_steps", "n_negative_samples_batch", "n_epochs", "grad_accum_steps",
                     "checkpoint_every", "keep_checkpoints", "log_every", "eval_rows", "max_bad_steps"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name}: expected a positive integer, got {getattr(self, name)}")
        if not 0.0 <= self.state_reset_prob < 1.0:
            raise ConfigError(f"state_reset_prob: expected a value in [0, 1), got {self.state_reset_prob}")
        if not 0.0 <= self.average_last <= 1.0:
            raise ConfigError(f"average_last: expected a fraction in [0, 1], got {self.average_last}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout: expected a value in [0, 1), got {self.dropout}")
        if not 0.0 <= self.weight_dropout < 1.0:
            raise ConfigError(f"weight_dropout: expected a value in [0, 1), got {self.weight_dropout}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer: expected one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule: expected one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if int(self.warmup_steps) < 0:
            raise ConfigError(f"warmup_steps: expected a non-negative integer, got {self.warmup_steps}")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning_rate: expected > 0, got {self.learning_rate}")
        if self.share_embedding_softmax:
            raise ConfigError("share_embedding_softmax: true is not supported (the original models do not use it)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
_RENAMED_KEYS = {"compile_lstm": "compile"}
"""Training keys of earlier versions, read under their new names (run directories and checkpoints they wrote)."""
_OPTIONS_KEYS = {"lstm", "char_cnn", "bidirectional"}


def split_preset(data: dict[str, Any], source: str) -> tuple[BiLMConfig, TrainConfig]:
    """A parsed preset -> (architecture, training config); unknown keys are errors naming the file."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    data = {_RENAMED_KEYS.get(key, key): value for key, value in data.items()}
    unknown = sorted(set(data) - _TRAIN_FIELDS - _OPTIONS_KEYS - TRAINING_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key '{unknown[0]}'")
    options = {k: v for k, v in data.items() if k in _OPTIONS_KEYS or k in TRAINING_KEYS}
    config = BiLMConfig.from_options(options, source=source)
    if config.char_cnn is None:
        raise ConfigError(f"{source}: training needs a 'char_cnn' block (token-input training is not supported)")
    try:
        train = TrainConfig(**{k: v for k, v in data.items() if k in _TRAIN_FIELDS})
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e
    except TypeError as e:
        raise ConfigError(f"{source}: {e}") from e
    return config, train


def merge_preset(config: BiLMConfig, train: TrainConfig) -> dict[str, Any]:
    """The inverse of :func:`split_preset`: one JSON object (written to the run directory)."""
    data = config.to_options()
    data.update(train.to_dict())
    return data
