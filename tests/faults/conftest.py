"""The fault suite: kills, full disks, bad input, bad model files, numerical faults (``pytest -m faults``).

Every test here runs the real CLI in a subprocess (or the Python API where a fault must be injected) on tiny
models, and checks what a user relies on: finished work survives, errors are one line, results are exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm, tiny_config, write_lm_corpus

SRC = Path(__file__).resolve().parents[2] / "src"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/faults/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.faults)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


def elmo(*args: str, check: bool = False, preexec_fn=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m elmo ARGS`` to completion, capturing its output."""
    return subprocess.run([sys.executable, "-m", "elmo", *args], env=env(), capture_output=True, text=True,
                          check=check, preexec_fn=preexec_fn, timeout=timeout)


def start_elmo(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "elmo", *args], env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Non-zero exit, no traceback, one ``elmo: error:`` line that contains every fragment."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("elmo: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("fault-corpus"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random tiny biLM in the original format (options.json + weights.hdf5)."""
    directory = tmp_path_factory.mktemp("tiny-model")
    save_bilm(random_bilm(tiny_config()), directory)
    return directory


def train_args(corpus: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["-q", "train", "--config", "tiny", "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
            "--out", str(out), "--no-progress", *extra]
