"""Numeric precision, one type for embedding and training: float32 (exact) or bfloat16.

Embedding casts the weights once, up front (float32 LSTM memory cells and outputs): autocast would re-cast the
(P, 4C) recurrent weight at every time step, which costs more than it saves on a CPU. Training autocasts its matrix
products and keeps float32 weights, LSTM cells and softmax sums. bfloat16 pays on GPUs and on CPUs with bf16 units
(AVX512-BF16, AMX): it halves the bytes every GEMM reads.
"""

from __future__ import annotations

import copy
import enum
import logging
from typing import TYPE_CHECKING

import torch

from elmo.errors import ConfigError

if TYPE_CHECKING:
    from elmo.modules.bilm import BiLM

log = logging.getLogger(__name__)


class Precision(str, enum.Enum):
    """Spelled as in presets, manifests and on the command line: ``"fp32"``, ``"bf16"``."""

    FP32 = "fp32"
    BF16 = "bf16"

    def __str__(self) -> str:
        return self.value

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self is Precision.BF16 else torch.float32


def parse_precision(value: str | Precision, name: str = "precision") -> Precision:
    """``value`` as a :class:`Precision`; ``name`` says which setting held it in the error."""
    try:
        return Precision(value)
    except ValueError:
        known = ", ".join(p.value for p in Precision)
        raise ConfigError(f"{name}: expected one of {known}, got {value!r}") from None


def bf16_is_fast(device: torch.device) -> bool:
    """True when bfloat16 GEMMs have hardware support on ``device``."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def for_precision(bilm: BiLM, precision: str | Precision, device: torch.device) -> BiLM:
    """``bilm`` itself for fp32; a bfloat16 copy for bf16 (the caller's model is left untouched)."""
    precision = parse_precision(precision)
    if precision is Precision.FP32:
        return bilm
    if not bf16_is_fast(device):
        log.warning("bf16 requested but %s has no fast bfloat16 support; it will run slowly", device)
    return copy.deepcopy(bilm).to(precision.dtype)
