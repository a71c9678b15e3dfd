"""``torch.compile`` for the training step's elementwise hot loops, and their one eager fallback.

The compiled code is pure functions (the LSTM window's step loops in :mod:`elmo.modules.lstm_window`, the softmax
loss's per-block work in :mod:`elmo.modules.softmax_loss`, the char CNN's max-pool in :mod:`elmo.modules.char_cnn`,
a highway layer in :mod:`elmo.modules.highway`, compiled with its backward): the same arithmetic as the eager code,
with each step's or block's elementwise passes fused into a few kernels. Only paths with gradients (training) use
them; inference always runs eagerly.

Whether to compile is decided once per process by its entry point (:mod:`elmo.runtime.compile_switch`: the trainer
sets it from its config when it starts) and read here, where the compiled functions are chosen. Each function
compiles once per process, with static shapes (a new shape compiles anew) unless the caller asks for dynamic ones.
Where compiling fails (no C++ compiler, an unsupported platform) a warning says what failed, and the whole process
keeps to the eager code from then on.
"""

from __future__ import annotations

import logging

import torch

from elmo.runtime.compile_switch import compile_requested

log = logging.getLogger(__name__)

_compiled_functions: dict = {}
_compile_failure: list[str] = []  # why torch.compile could not be used in this process, once it failed


def compile_enabled() -> bool:
    """Whether to run the compiled functions: compiling is on and has not failed in this process."""
    return compile_requested() and not _compile_failure


def run_compiled(function, what: str, *args, dynamic: bool = False):
    """``function(*args)`` through ``torch.compile``, or None when compiling or running it fails: then a warning
    naming ``what`` (e.g. "the LSTM step loops"), and :func:`compile_enabled` is False for the rest of the process,
    so the callers run their eager code. ``dynamic``: one compilation for inputs of any size (the char CNN's
    chunks vary in size from batch to batch), not one per shape."""
    if function not in _compiled_functions:
        _compiled_functions[function] = torch.compile(function, dynamic=dynamic)
    try:
        return _compiled_functions[function](*args)
    except Exception as error:  # noqa: BLE001 - a missing toolchain can surface as any error type
        _compile_failure.append(f"{type(error).__name__}: {error}".splitlines()[0])
        log.warning("torch.compile of %s failed (%s); training continues with the eager code", what,
                    _compile_failure[0])
        return None


def compiled(function) -> bool:
    """Whether ``function`` has run through ``torch.compile`` in this process without a failure (the tests check
    it)."""
    return function in _compiled_functions and not _compile_failure
