"""Row counts rounded up to a few sizes, for reduced-precision inference on the CPU.

oneDNN, which runs PyTorch's bf16 matrix products on CPUs, builds and keeps a kernel for every new shape. A service
sees batches of every size, so it builds thousands, and its resident memory grows with them (the measurements:
docs/benchmarks/serving.md). Rounding the rows of the products whose shape follows the input up to 8 sizes per
doubling bounds the shapes, and with them the memory, for at most 12.5% more rows (padding rows whose results are
dropped).
"""

from __future__ import annotations

import torch

EXACT_UP_TO = 16
"""Counts up to this stay as they are (their shapes are few anyway)."""


def bucket_rows(n: int) -> int:
    """The smallest of the bucket sizes >= n: n itself up to 16, then multiples of 1/8 of n's power of two."""
    if n <= EXACT_UP_TO:
        return n
    step = 1 << (n.bit_length() - 4)  # 8 steps from 2^(b-1) to 2^b
    return -(-n // step) * step


def buckets_shapes(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether products of ``dtype`` on ``device`` round their rows: reduced precision on the CPU, outside
    autograd (training batches have fixed shapes; fp32 products keep no per-shape kernels)."""
    return device.type == "cpu" and dtype in (torch.bfloat16, torch.float16) and not torch.is_grad_enabled()
