"""Running a script of benchmarks/ as a user does: its own process, the package from this checkout's src/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_benchmark(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> args...`` with PYTHONPATH=src; its exit status, stdout and stderr (text)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    command = [sys.executable, str(REPO / "benchmarks" / script), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
