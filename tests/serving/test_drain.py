"""Overload and shutdown, for real: a full queue gets 503 with Retry-After, a client that disconnects leaves the
queue and costs no model time, and SIGTERM answers everything queued before the service exits 0 (while /readyz
answers 503 from the moment the signal arrives)."""

from __future__ import annotations

import json
import signal
import socket
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.serving.conftest import SENTENCES, Service, assert_close, expected, json_arrays

SLOW = [(SENTENCES[0] * 3)[:40]] * 128
"""About 5,000 tokens: seconds of work for the demo biLM on one thread, so that others must queue behind it."""


@pytest.mark.slow
def test_full_queue_disconnect_and_sigterm_drain(reference):
    key = "env-key"
    service = Service("--max-queue", "1", "--max-wait-ms", "0", env={"ELMO_API_KEY": key}, api_key=key)
    try:
        with ThreadPoolExecutor(2) as pool:
            slow = pool.submit(service.post_json, {"sentences": SLOW, "output": "top"})
            service.wait_for("elmo_queue_requests", 0)
            _wait_until_running(service)

            # a client that goes away while queued: dropped from the queue, its sentences never run
            gone = _send_and_hold(service, {"sentences": [["never", "run"]] * 3}, key)
            service.wait_for("elmo_queue_requests", 1)
            gone.close()
            service.wait_for("elmo_cancelled_requests_total", 1)
            service.wait_for("elmo_queue_requests", 0)
            assert service.metric("elmo_skipped_sentences_total") == 3

            queued = pool.submit(service.post_json, {"sentences": SENTENCES, "output": "average"})
            service.wait_for("elmo_queue_requests", 1)
            status, headers, answer = service.post_json({"sentences": [["one", "too", "many"]]})
            assert status == 503 and int(headers["retry-after"]) >= 1
            assert "the service is busy: 1 requests are waiting (--max-queue)" in answer["error"]

            assert service.process.poll() is None
            # SIGTERM while one request runs and one waits: not ready at once, until the listener closes
            service.process.send_signal(signal.SIGTERM)
            readiness = _poll_readyz_until_closed(service)
            # (uvicorn closes its listener at its next 0.1 s tick, so the list is short, sometimes empty)
            assert 200 not in readiness, readiness
            assert service.stop() == 0, service.output()
            assert slow.result()[0] == 200
            status, _, answer = queued.result()
        assert status == 200
        assert_close(json_arrays(answer), expected(reference, SENTENCES, "average"))
        log = service.output()
        assert "Shutting down" in log and "Application shutdown complete" in log
    finally:
        service.stop()


def _wait_until_running(service: Service, timeout: float = 30.0) -> None:
    """Until the first round (the slow request) has started."""
    deadline = time.monotonic() + timeout
    while True:
        text = service.get("/metrics")[2].decode()
        if "elmo_round_requests_count 1" in text:
            return
        assert time.monotonic() < deadline, "the slow request never started"
        time.sleep(0.02)


def _poll_readyz_until_closed(service: Service, timeout: float = 30.0) -> list[int]:
    """The status of every /readyz answer until the service stops accepting connections."""
    statuses, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            statuses.append(service.get("/readyz", headers={"Connection": "close"})[0])
        except (urllib.error.URLError, ConnectionError):
            return statuses
    raise AssertionError(f"the service still accepted connections {timeout} s after SIGTERM: {statuses}")


def _send_and_hold(service: Service, payload: dict, key: str) -> socket.socket:
    """A raw HTTP request whose answer is never read: the connection is closed by the caller."""
    body = json.dumps(payload).encode()
    connection = socket.create_connection(("127.0.0.1", service.port))
    connection.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return connection


@pytest.mark.slow
def test_ctrl_c_answers_what_was_received_then_exits_130(reference):
    """Ctrl-C (SIGINT) drains like SIGTERM but exits 130, as an interrupted command does (it exited 0); the last line
    says so."""
    service = Service("--max-wait-ms", "0")
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(service.post_json, {"sentences": SLOW[:32], "output": "top"})
            _wait_until_running(service)
            service.process.send_signal(signal.SIGINT)
            assert service.process.wait(60) == 130, service.output()
            status, _, answer = running.result()
        assert status == 200 and len(answer["shapes"]) == 32
        log = service.output()
        assert "Application shutdown complete" in log and "Traceback" not in log
        assert log.strip().splitlines()[-1] == (
            "elmo: the service stopped by SIGINT after answering every request it had received")
    finally:
        service.stop()
