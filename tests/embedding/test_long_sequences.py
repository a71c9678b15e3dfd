"""A sentence longer than ``sequence_window`` is embedded a window at a time: the same vectors in every initial-state
mode, a stop request honoured between windows, and ``elmo embed`` stopping within a window on SIGTERM."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import elmo.embedding.embedder as embedder_module
from elmo.embedding.embedder import Embedder
from elmo.errors import Interrupted
from elmo.formats.model_files import save_bilm
from elmo.runtime.interrupts import stop_on_signals
from tests.conftest import random_bilm

WORDS = "the a cat dog sat ran on under mat tree big small , . and then it was".split()


def _sentences() -> list[list[str]]:
    rng = random.Random(57)
    return [[rng.choice(WORDS) for _ in range(n)] for n in (500, 3, 0, 140, 61)]


@pytest.mark.parametrize("initial_state", ["zero", "warm", "carry"])
def test_a_long_sentence_in_windows_equals_the_whole_sentence(initial_state):
    bilm = random_bilm()
    whole = Embedder(bilm, device="cpu", initial_state=initial_state, sequence_window=1024)  # one call, every row
    windowed = Embedder(bilm, device="cpu", initial_state=initial_state, sequence_window=64)
    for batch in (_sentences(), _sentences()[1:]):  # with carry, the second batch starts from the first's states
        for a, b in zip(whole.embed_batch(batch), windowed.embed_batch(batch), strict=True):
            assert a.shape == b.shape and np.array_equal(a, b)
    if initial_state == "carry":  # the state after the last window is what the next batch starts from
        assert np.array_equal(whole._stateful._h, windowed._stateful._h)
        assert np.array_equal(whole._stateful._c, windowed._stateful._c)


def test_a_stop_request_ends_a_long_sentence_after_one_window(monkeypatch):
    checks = []
    real = embedder_module.stop_point
    monkeypatch.setattr(embedder_module, "stop_point", lambda: (checks.append(1), real())[1])
    embedder = Embedder(random_bilm(), device="cpu", sequence_window=64)
    with stop_on_signals("embedding") as stop:
        embedder.embed_batch([WORDS * 20])  # 360 + 2 positions: windows of 64 positions (the last one longer)
        assert len(checks) == 5
        stop.signal_number = signal.SIGTERM  # what the handler records
        with pytest.raises(Interrupted, match="embedding stopped by SIGTERM") as stopped:
            embedder.embed_batch([WORDS * 20])
    assert len(checks) == 6 and stopped.value.exit_code == 143  # at the first window's end


@pytest.mark.slow
def test_elmo_embed_stops_within_a_window_of_a_long_line(tmp_path):
    """SIGTERM while ``elmo embed`` runs one 200,000-token line: the job stops at the next window's end (before, it
    ran to the end of the line: over a minute with this model), exit 143, and no part file is left."""
    model = save_bilm(random_bilm(), tmp_path / "model")
    line = tmp_path / "long.txt"
    rng = random.Random(0)
    line.write_text(" ".join(rng.choice(WORDS) for _ in range(200_000)) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "elmo", "-q", "embed", "--all", "--model", str(model), str(line),
                             str(out), "--no-progress"], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (Path(f"{out}.parts") / "manifest.json").exists():  # the job runs, under the signal handler
        assert proc.poll() is None and time.time() < deadline, "the job did not start"
        time.sleep(0.05)
    time.sleep(1.0)
    assert proc.poll() is None, "the line was embedded before the signal"
    start = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert time.perf_counter() - start < 10  # a window (256 steps) of this model takes well under a second
    assert "embedding stopped by SIGTERM" in proc.stderr.read()
    assert not out.exists() and not list(Path(f"{out}.parts").glob("*part-*"))
