"""Whether this process runs the training step's hot loops through ``torch.compile``: one process-wide switch.

Entry points set it (the trainer from its ``compile`` setting, when it starts); :mod:`elmo.modules.compiled` reads
it where the compiled functions are chosen, and falls back to the eager code for good if compiling fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_requested = False


def set_compile(enabled: bool) -> None:
    """Compile the training step's hot loops from now on in this process (or not)."""
    global _requested
    _requested = bool(enabled)


def compile_requested() -> bool:
    """Whether compiling is switched on in this process (:func:`elmo.modules.compiled.compile_enabled` also says
    whether it still works)."""
    return _requested


@contextmanager
def compile_setting(enabled: bool) -> Iterator[None]:
    """:func:`set_compile` for the block only."""
    before = _requested
    set_compile(enabled)
    try:
        yield
    finally:
        set_compile(before)
