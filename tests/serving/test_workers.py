"""``--workers 2``: two processes, each with its own model and batcher, behind one port; both answer correctly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.serving.conftest import SENTENCES, Service, assert_close, expected, json_arrays


@pytest.mark.slow
def test_two_workers_answer_correctly_and_stop_on_sigterm(reference):
    service = Service("--workers", "2")
    try:
        requests = [[SENTENCES[(i + k) % len(SENTENCES)] for k in range(1 + i % 3)] for i in range(16)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda r: service.post_json({"sentences": r, "output": "top"}), requests))
        for sentences, (status, _, answer) in zip(requests, answers):
            assert status == 200
            assert_close(json_arrays(answer), expected(reference, sentences, "top"))
        assert service.stop() == 0, service.output()
        assert service.output().count("Application shutdown complete") == 2  # each worker drained and stopped
    finally:
        service.stop()
