"""How the hand-written autograd functions (the LSTM training window, the fused softmax losses) take autocast.

Autocast would re-cast operands op by op, including the recurrent weight at every time step, and would run the
elementwise math and the sums in bf16 too. These functions instead run with autocast off and are told the dtype
their GEMMs should read: they cast weights once, keep everything else in float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def autocast_suspended(device: torch.device | str) -> Iterator[torch.dtype | None]:
    """Autocast off inside the block; yields the autocast dtype that was active (None when it was off)."""
    device_type = torch.device(device).type
    matmul_dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    with torch.autocast(device_type, enabled=False):
        yield matmul_dtype
