"""Inference precision: float32 (exact) or bfloat16 weights with float32 LSTM memory cells.

bfloat16 halves the bytes every GEMM reads and runs on the bf16 units of recent CPUs (AVX512-BF16, AMX) and
GPUs. The weights are cast once, up front: autocast would re-cast the (P, 4C) recurrent weight at every time
step, which costs more than it saves on a CPU.
"""

from __future__ import annotations

import copy
import logging

import torch

from elmo.modules.bilm import BiLM

log = logging.getLogger(__name__)

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def bf16_is_fast(device: torch.device) -> bool:
    """True when bfloat16 GEMMs have hardware support on ``device``."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def for_precision(bilm: BiLM, precision: str, device: torch.device) -> BiLM:
    """``bilm`` itself for fp32; a bfloat16 copy for bf16 (the caller's model is left untouched)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return bilm
    if not bf16_is_fast(device):
        log.warning("bf16 requested but %s has no fast bfloat16 support; it will run slowly", device)
    return copy.deepcopy(bilm).to(PRECISIONS[precision])
