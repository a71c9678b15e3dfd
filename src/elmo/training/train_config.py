"""Training presets: one JSON file in the options.json shape, plus trainer keys.

    {"lstm": {...}, "char_cnn": {...}, "bidirectional": true,             <- the architecture (options.json)
     "batch_size": ..., "unroll_steps": ..., "n_negative_samples_batch": ..., ...   <- original trainer keys
     "seed": ..., "checkpoint_every": ..., "precision": "auto", ...}                <- our trainer keys

Original keys keep their meaning: ``batch_size`` is rows per process (per GPU in bilm-tf), the gradient is taken of
``loss * unroll_steps``, the optimizer is Adagrad(``learning_rate``, ``initial_accumulator_value``) with global-norm
clip ``all_clip_norm_val``. Every trainer key is a field of :class:`TrainConfig`, which holds its default and its
check; those declared with :func:`~elmo.settings.setting` are also flags of ``elmo train`` and ``elmo finetune``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from elmo.config import TRAINING_KEYS, BiLMConfig
from elmo.errors import ConfigError
from elmo.precision import Precision
from elmo.settings import at_least, check_keys, check_settings, fraction, greater_than, setting
from elmo.shared_settings import PRECISION, SEED

OPTIMIZERS = ("adagrad", "adam")
LR_SCHEDULES = ("constant", "linear", "cosine")


def _only_false(value: bool) -> bool:
    if value:
        raise ValueError("must be false: the published models do not share the embedding and the softmax")
    return value


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

    batch_size: int = setting(128, "rows per process and micro-batch", check=at_least(1))
    """Each row is an independent stream."""
    unroll_steps: int = setting(20, "truncated-BPTT window", check=at_least(1))
    n_negative_samples_batch: int = setting(8192, "sampled-softmax negatives per batch", flag="--negatives",
                                            check=at_least(1))
    """Shared by the whole batch."""
    sample_softmax: bool = setting(True, "train with the full softmax (small vocabularies)", flag="--full-softmax",
                                   const=False)
    """False trains with the full softmax (fine for vocabularies of a few 10k words)."""
    optimizer: str = setting("adagrad", "adagrad (the original) or adam (faster on small corpora)",
                             choices=OPTIMIZERS)
    learning_rate: float = setting(0.2, "base learning rate", check=greater_than(0))
    initial_accumulator_value: float = setting(1.0, "Adagrad's initial accumulator value", check=greater_than(0))
    lr_schedule: str = setting("constant", "learning-rate schedule over the run", choices=LR_SCHEDULES)
    """``constant`` (the original), or ``linear``/``cosine`` decay to 0 at the last step after ``warmup_steps``."""
    warmup_steps: int = setting(0, "linear warm-up steps", check=at_least(0))
    all_clip_norm_val: float = setting(10.0, "global gradient-norm clip", flag="--clip-norm", check=greater_than(0))
    dropout: float = setting(0.1, "dropout on LSTM inputs and output", check=fraction())
    """On every LSTM layer input and on the LSTM output before the softmax, one mask per position."""
    weight_dropout: float = setting(
        0.0, "DropConnect on each LSTM layer's recurrent matrix, one mask per window (0: off, as in the original)",
        check=fraction(),
    )
    """AWD-LSTM's WeightDrop; not in the original."""
    n_epochs: int = setting(10, "epochs, when --max-steps is not given", check=at_least(1))
    n_train_tokens: int | None = setting(
        None, "corpus size in tokens, for the number of steps (default: counted)", check=at_least(1)
    )
    """n_epochs * n_train_tokens / tokens per step."""
    n_tokens_vocab: int | None = setting(None, "vocabulary size (the original's key; default: the vocabulary "
                                         "file's)", check=at_least(1), flag="")
    share_embedding_softmax: bool = setting(False, "the original's key; only false is supported", flag="",
                                            check=_only_false)
    seed: int = SEED.field()
    grad_accum_steps: int = setting(1, "micro-batches per optimizer step", flag="--grad-accum", check=at_least(1))
    """More rows per step without more memory."""
    precision: Precision = PRECISION.field(Precision.AUTO)
    """bf16 trains with bfloat16 autocast for the matrix products and float32 LSTM cells and softmax sums. Kept as
    given (``auto`` too) in the run directory, so a run resumed on another machine decides again."""
    compile: bool = setting(
        False, "torch.compile the training step's elementwise loops (LSTM steps, softmax blocks, char-CNN max-pool, "
        "highway): a minute or two of compiling when the run starts, then faster steps on CPU"
    )
    """The same arithmetic, with the many small passes of those loops fused into a few kernels
    (:mod:`elmo.modules.compiled`); the eager code, with a warning, where compiling fails (no C++ compiler)."""
    checkpoint_every: int = setting(1250, "steps between checkpoints", check=at_least(1))
    keep_checkpoints: int = setting(2, "how many recent checkpoints to keep", check=at_least(1))
    log_every: int = setting(100, "steps between log lines", check=at_least(1))
    eval_every: int = setting(0, "steps between held-out evaluations (0: at the end only)", check=at_least(0))
    """Held-out full-softmax perplexity, when a file is given."""
    eval_rows: int = setting(1, "parallel streams for the held-out evaluation during training (1: one stream)",
                             check=at_least(1))
    max_bad_steps: int = setting(10, "a step with a non-finite loss or gradient is skipped; this many in a row stop "
                                 "the run", check=at_least(1))
    state_reset_prob: float = setting(
        0.0, "chance that a row's carried LSTM state is zeroed before a window (0: the original); > 0 teaches the "
        "LM to start from zeros, as stateless embedding does", flag="--state-reset", check=fraction(),
    )
    """The original starts a row from zeros only at step 0. A model that never sees a zero state can fall, from one,
    into a saturated regime it never leaves, and stateless embedding and ``elmo perplexity`` start from zeros
    (docs/training.md)."""

    def __post_init__(self) -> None:
        check_settings(self)

    def to_dict(self) -> dict[str, Any]:
        """The trainer keys as JSON values."""
        return {**dataclasses.asdict(self), "precision": self.precision.value}


_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
_OPTIONS_KEYS = {"lstm", "char_cnn", "bidirectional"}

RENAMED_KEYS = {"compile_lstm": "compile", "bf16": "precision"}
"""Keys run directories and presets of earlier versions hold, read under their current names."""
RETIRED_KEYS: dict[str, Any] = {"variational_dropout": False, "average_last": 0.0}
"""Keys of removed features, each with its off value: a file that holds the off value still reads."""


def _renamed_value(key: str, value: Any) -> Any:
    if key != "bf16":
        return value
    if not isinstance(value, bool):
        raise ConfigError(f"bf16: expected true or false, got {value!r}")
    return Precision.BF16.value if value else Precision.FP32.value


def upgrade_keys(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Preset keys under their current names (see :data:`RENAMED_KEYS` and :data:`RETIRED_KEYS`)."""
    upgraded = {}
    for key, value in data.items():
        if key in RETIRED_KEYS:
            off = RETIRED_KEYS[key]
            if value != off or isinstance(value, bool) != isinstance(off, bool):
                raise ConfigError(f"{source}: '{key}' is no longer supported (only its off value, {json.dumps(off)}, "
                                  "is read)")
            continue
        new = RENAMED_KEYS.get(key)
        if new is not None and new in data:
            raise ConfigError(f"{source}: '{key}' is the earlier name of '{new}'; give only '{new}'")
        try:
            upgraded[new or key] = _renamed_value(key, value)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from e
    return upgraded


def split_preset(data: dict[str, Any], source: str) -> tuple[BiLMConfig, TrainConfig]:
    """A parsed preset -> (architecture, training config); unknown keys are errors naming the file."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    data = upgrade_keys(data, source)
    check_keys(data, _TRAIN_FIELDS | _OPTIONS_KEYS | TRAINING_KEYS, source)
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
