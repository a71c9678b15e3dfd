"""SIGINT/SIGTERM as a clean stop for long jobs (training, embedding).

A scheduler's SIGTERM or a user's Ctrl-C should cost at most the unit of work in progress. Training asks for
``deferred=True``: the signal only sets a flag, the loop finishes its step, saves a checkpoint and raises
:class:`~elmo.errors.Interrupted`. Embedding asks for ``deferred=False``: the signal raises at once, and the
part being written is dropped (finished parts stay for ``--resume``). A second signal always raises at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from elmo.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Set by the handler; ``signal_number`` is the first signal received (None: keep going)."""

    def __init__(self) -> None:
        self.signal_number: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signal_number).name if self.signal_number else ""


@contextmanager
def stop_on_signals(what: str, deferred: bool) -> Iterator[StopRequest]:
    """Handle SIGINT/SIGTERM inside the block (only in the main thread; elsewhere the block runs unchanged).

    Args:
        what: the job, for the message ("training", "embedding").
        deferred: only record the first signal (the caller checks ``requested``); otherwise raise at once.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        if deferred and not request.requested:
            request.signal_number = signum
            return
        request.signal_number = request.signal_number or signum
        raise Interrupted(f"{what} stopped by {signal.Signals(signum).name}; continue with --resume", signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield request
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
