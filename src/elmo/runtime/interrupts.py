"""SIGINT/SIGTERM as a clean stop for long jobs (training, embedding).

A scheduler's SIGTERM or a user's Ctrl-C should cost at most the unit of work in progress. The first signal only
records itself; the job looks at the record between units of work: training finishes its step, saves a checkpoint
and raises :class:`~elmo.errors.Interrupted`; embedding raises after the batch in progress
(:meth:`StopRequest.raise_if_requested`), dropping the part being written (finished parts stay for ``--resume``).
A second signal raises at once. (Raising from the handler itself is not reliable: Python may run the handler
inside a finalizer or a weakref callback, where its exception is printed as "Exception ignored" and dropped, and
the job would carry on to the end.)

Work that is long in itself asks between its own steps too, through :func:`stop_point`, without being handed the
request: the embedder between the windows of a long sequence, so that one 200,000-token line stops within a window,
not at its end.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from elmo.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_active: list[StopRequest] = []
"""The requests of the :func:`stop_on_signals` blocks now open, innermost last (only the main thread opens them)."""


class StopRequest:
    """Set by the handler; ``signal_number`` is the first signal received (None: keep going)."""

    def __init__(self, what: str = "the job") -> None:
        self.what = what
        self.signal_number: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signal_number).name if self.signal_number else ""

    def interrupted(self) -> Interrupted:
        return Interrupted(f"{self.what} stopped by {self.name}; continue with --resume", self.signal_number or 0)

    def raise_if_requested(self) -> None:
        """Raise :class:`Interrupted` once a signal came."""
        if self.requested:
            raise self.interrupted()


@contextmanager
def stop_on_signals(what: str) -> Iterator[StopRequest]:
    """Record SIGINT/SIGTERM inside the block (only in the main thread; elsewhere the block runs unchanged).

    Args:
        what: the job, for the message ("training", "embedding").
    """
    request = StopRequest(what)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        if not request.requested:
            request.signal_number = signum
            return
        raise request.interrupted()

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    _active.append(request)
    try:
        yield request
    finally:
        _active.remove(request)
        for s, h in previous.items():
            signal.signal(s, h)


def stop_point() -> None:
    """Raise :class:`Interrupted` if a signal came inside the open :func:`stop_on_signals` block, for a step of work
    that can stop cleanly; nothing outside one, or in another thread than the block's (the main thread's): a
    service's model thread, say, answers what it has started."""
    if _active and threading.current_thread() is threading.main_thread():
        _active[-1].raise_if_requested()
