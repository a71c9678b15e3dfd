"""The settings several parts of the package share, each declared once.

Embedding, serving, training and task models take these under the same name, with the same help and check; a part
whose default differs says so where it uses the setting (``PRECISION.field(Precision.AUTO)`` in training).
"""

from __future__ import annotations

from elmo.precision import Precision, precision_of
from elmo.settings import Setting, at_least

INITIAL_STATES = ("zero", "carry", "warm")

PRECISION = Setting(
    Precision.FP32, "fp32: exact, the same vectors on every machine; bf16: bfloat16 weights, faster only on CPUs "
    "with AVX512-BF16 or AMX and on GPUs (cosine to fp32 > 0.9999; docs/embedding.md); auto: bf16 where the device "
    "has bf16 units, else fp32", check=precision_of,
)
"""Embedding and serving default to fp32, so that a sentence's vectors do not depend on the machine; training and
the task models' activation cache keep ``auto``."""

DEVICE = Setting(None, "torch device: cpu, cuda, cuda:N or mps (default: cuda if available, else cpu)")
"""Checked by :func:`elmo.devices.checked_device` (whether this machine has it), not here."""

MAX_BATCH_TOKENS = Setting(
    8192, "most padded tokens in one model batch (sentence boundaries included); sentences are sorted by length",
    check=at_least(1),
)
"""The one budget of a batch's size, in ``elmo embed`` and ``elmo serve``."""

PROGRESS = Setting(None, "progress bar (default: on when stderr is a terminal)")
"""None: decided by whether stderr is a terminal (:func:`elmo.runtime.progress.show_progress`)."""

FORCE = Setting(False, "replace what the output path already holds (without it, an existing file or non-empty "
                "directory is refused before any work; an input is never replaced)")
"""The one flag that lets a command replace an existing output (``elmo.cli.outputs``); ``--overwrite`` is retired."""

SEED = Setting(0, "seed for initialisation, shuffling, sampling and dropout", check=at_least(0))

INITIAL_STATE = Setting(
    "zero", "where each sentence's LSTM state starts: zero; carry = the state the previous sentence of the same "
    "batch row ended in, batches in file order (the original's stateful mode); warm = one fixed state, read from "
    "the model's warm_state.safetensors (`elmo warm-state`) or computed from a shipped neutral text",
    choices=INITIAL_STATES,
)
"""``elmo.modules.initial_state``. ``warm`` is deterministic and batches like ``zero``."""
