"""The malloc policy of long jobs."""

from __future__ import annotations

import subprocess
import sys

import pytest

# In a fresh process, glibc's own bookkeeping (mallinfo2) while a 64 MB tensor is alive and after it is freed:
# bytes in mmap-ed blocks (hblkhd) and bytes of the heap (arena).
_PROBE = """
import ctypes, sys, torch
from elmo.runtime.memory import keep_freed_memory

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
if sys.argv[1] == "on":
    assert keep_freed_memory()
block = torch.ones(16 * 2**20)
alive = libc.mallinfo2()
del block
freed = libc.mallinfo2()
print(alive.hblkhd, freed.arena)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt exists on Linux only")
def test_keep_freed_memory_serves_large_blocks_from_the_heap_and_keeps_them():
    big = 64 * 2**20
    out = {}
    for mode in ("off", "on"):
        result = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
        out[mode] = [int(v) for v in result.stdout.split()]
    (mapped_off, _), (mapped_on, heap_on) = out["off"], out["on"]
    assert mapped_off >= big  # by default a 64 MB block is mmap-ed (and unmapped again when freed)
    assert mapped_on < big and heap_on >= big  # with the policy it comes from the heap, which keeps it after free
