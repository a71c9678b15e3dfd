"""Process memory policy for long CPU jobs: keep freed memory for reuse instead of returning it to the kernel.

glibc serves large allocations (above a threshold of at most 32 MB) with ``mmap`` and unmaps them when they are
freed, so every training step's large temporaries (the (T, B, 4C) gate buffers of each LSTM window, the dense
gradient of the softmax weight, ...) land on fresh pages that the kernel must zero on first touch. Served from
the heap, which is then never trimmed, the next step reuses the same pages. PyTorch's CPU performance guide gets
the same effect by preloading jemalloc or tcmalloc; this needs no preload. The price is that the process keeps
its peak memory until it exits, which is what a training job does anyway.

The opposite, for a reader that builds a model from many temporaries (:func:`release_freed_memory`): glibc keeps
freed blocks below its (self-raising) mmap threshold in the heap, so reading a checkpoint whose variables are
transposed on the way would hold the freed raw bytes of each one until the process exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # mallopt parameters of glibc's <malloc.h>
_M_MMAP_MAX = -4


def keep_freed_memory() -> bool:
    """Make glibc malloc reuse freed memory (no mmap for large blocks, no heap trimming); False where it can't."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    done = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, -1))
    log.debug("malloc keeps freed memory: %s", done)
    return done


def release_freed_memory() -> None:
    """Give the heap's free memory back to the kernel now (glibc's ``malloc_trim``; nothing elsewhere). A one-off
    call, not a policy: it undoes no :func:`keep_freed_memory`."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
