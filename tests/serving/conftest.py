"""``elmo serve`` started for real in a subprocess on a free loopback port, with the shipped demo biLM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from elmo.formats.published import demo_model_dir

SENTENCES = [
    "China lent Russia $ 6bn ( £3.2bn ) to help the Russian government renationalise the key unit .".split(),
    ["The", "Kremlin", "said", "on", "Tuesday", "."],
    ["bank"],
    "I went to the river bank to play in the light of the evening sun and then walked home .".split(),
    ["Über", "naïve", "café", "—", "déjà", "vu", "…"],
    [],
    ["A", "token-longer-than-fifty-characters-is-cut-by-the-char-cnn-just-like-elmo-embed-does"],
    "Shares rose 3 % on Monday after the results .".split(),
]
"""Real sentences of many lengths, an empty one, non-ASCII and an over-long token."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``elmo serve ARGS`` on a free port; :meth:`stop` sends SIGTERM and returns the exit status."""

    def __init__(self, *args: str, api_key: str | None = None, env: dict[str, str] | None = None,
                 timeout: float = 120.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would block the service
        self.process = subprocess.Popen(
            [sys.executable, "-m", "elmo", "serve", "--port", str(self.port), *args],  # fp32: the default
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"elmo serve exited with {self.process.returncode}:\n{self.output()}")
            try:
                status, _, _ = self.get("/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.process.kill()
        raise RuntimeError(f"elmo serve was not ready after {timeout} s:\n{self.output()}")

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one HTTP request; 4xx/5xx are returned, not raised."""
        request = urllib.request.Request(self.url + path, data=body, method=method,
                                         headers={**self.headers, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def get(self, path: str, **kw) -> tuple[int, dict, bytes]:
        return self.request("GET", path, **kw)

    def post_json(self, payload, **kw) -> tuple[int, dict, dict]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        status, headers, data = self.request("POST", "/v1/embed", body, **kw)
        return status, headers, json.loads(data)

    def metric(self, name: str) -> float:
        """The value of one unlabelled series of /metrics."""
        _, _, text = self.get("/metrics")
        for line in text.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def wait_for(self, name: str, value: float, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.metric(name) != value:
            assert time.monotonic() < deadline, f"{name} never became {value} (now {self.metric(name)})"
            time.sleep(0.02)

    def stop(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()

    def output(self) -> str:
        """What the service logged so far."""
        self.log.seek(0)
        return self.log.read()


API_KEY = "test-key-0123"


@pytest.fixture(scope="session")
def service():
    """One service for the API tests: an API key and small limits, so that every limit is cheap to reach."""
    running = Service("--api-key", API_KEY, "--max-request-sentences", "16", "--max-sentence-tokens", "40",
                      "--max-request-tokens", "100", "--max-request-bytes", "20000", "--max-wait-ms", "20",
                      api_key=API_KEY)
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(scope="session")
def reference() -> Embedder:
    """The same model, run in the test process: what every answer must equal."""
    return Embedder(load_bilm(demo_model_dir()), precision="fp32", device="cpu")


def expected(reference: Embedder, sentences, output: str = "all") -> list[np.ndarray]:
    layers = [reference.embed_sentence(s.split() if isinstance(s, str) else s) for s in sentences]
    if output == "top":
        return [x[-1] for x in layers]
    if output == "average":
        return [x.mean(axis=0) for x in layers]
    return layers


def json_arrays(answer: dict) -> list[np.ndarray]:
    """The arrays of a JSON answer, shaped by its ``shapes``."""
    return [np.array(e, dtype=np.float32).reshape(s) for e, s in zip(answer["embeddings"], answer["shapes"])]


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if w.size:
            assert np.abs(np.asarray(g, dtype=np.float32) - w).max() <= 1e-5
