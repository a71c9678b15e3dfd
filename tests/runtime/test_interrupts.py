"""SIGINT/SIGTERM as a clean stop: recorded wherever they land, raised where the job looks."""

import signal

import pytest

from elmo.errors import Interrupted
from elmo.runtime.interrupts import stop_on_signals


class _Finalised:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
        sum(range(10))  # Python runs the handler here, inside __del__, where an exception would be dropped


def test_a_signal_landing_in_a_finalizer_still_stops_the_job(recwarn):
    with stop_on_signals("embedding") as stop:
        _Finalised()  # finalised at once
        assert stop.requested
        with pytest.raises(Interrupted, match="^embedding stopped by SIGINT; continue with --resume$") as info:
            stop.raise_if_requested()
    assert info.value.exit_code == 128 + signal.SIGINT
    assert not [w for w in recwarn if issubclass(w.category, pytest.PytestUnraisableExceptionWarning)]


def test_the_first_signal_is_recorded_and_a_second_raises_at_once():
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job, default_int_handler in a terminal
    with stop_on_signals("training") as stop:
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested and stop.name == "SIGTERM"
        with pytest.raises(Interrupted, match="training stopped by SIGTERM"):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # the previous handlers are back


def test_a_stop_point_raises_in_the_job_s_thread_once_a_signal_came():
    import threading

    from elmo.runtime.interrupts import stop_point

    stop_point()  # outside a block: nothing
    with stop_on_signals("embedding") as stop:
        stop_point()  # no signal yet
        stop.signal_number = signal.SIGTERM
        elsewhere = []
        thread = threading.Thread(target=lambda: elsewhere.append(stop_point()))
        thread.start()
        thread.join()
        assert elsewhere == [None]  # another thread (a service's model thread) finishes what it started
        with pytest.raises(Interrupted, match="embedding stopped by SIGTERM"):
            stop_point()
    stop_point()  # the block is closed
