"""benchmarks/gpu_check.sh at toy sizes on the CPU (DEVICE=cpu): the GPU check runs the same script, so it cannot
rot between the sessions that are lent a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_on_cpu_and_prints_one_table(tmp_path):
    env = dict(os.environ, DEVICE="cpu", PYTHON=sys.executable, KEEP=str(tmp_path), OMP_NUM_THREADS="1")
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| check | ok | tokens/s | peak memory MB | result |"
    checks = [row.split(" | ")[0].removeprefix("| ") for row in table[1:]]
    assert checks == ["parity with bilm-tf", "embed 40 sentences, tiny, fp32, pipeline off",
                      "embed 40 sentences, tiny, bf16, pipeline on", "embed 40 sentences, tiny, bf16, pipeline off",
                      "train tiny, sampled softmax, fp32, 4 x 5 tokens a step",
                      "elmo train, 1-process torchrun (gloo)"]
    assert all(" | yes | " in row for row in table[1:]), "\n".join(table)
    assert "machine: " in done.stdout and "ISA " in done.stdout
    assert "pipeline overlap " in table[3] and " reused, at most " in table[3]  # what the GPU run is to report
    assert (tmp_path / "torchrun-run" / "checkpoints").is_dir()
