"""benchmarks/recurrent_step.py at a tiny size: the layout A/B cannot rot, and no layout changes the outputs beyond
summation order."""

from __future__ import annotations

import pytest

from tests.benchmarks.scripts import run_benchmark

pytestmark = pytest.mark.slow


def test_recurrent_step_table_lists_every_layout_with_the_same_outputs():
    done = run_benchmark("recurrent_step.py", "--cells", "64", "--projection", "16", "--rows", "64", "--steps", "3",
                         "--rounds", "2", "--columns", "128")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith("machine: ")
    rows = [line.strip("| ").split(" | ") for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    not_run = [line.split(":")[0] for line in done.stdout.splitlines() if ": not run (" in line]
    names = [row[0] for row in rows] + not_run
    assert sorted(names) == sorted(["blocks (baseline)", "one-gemm", "contiguous", "mkl-packed"])
    assert rows[0][0] == "blocks (baseline)" and rows[0][2] == "1.000x"
    assert all(row[3] in ("0/2", "1/2", "2/2") for row in rows)
    assert all(float(row[-1]) <= 1e-5 for row in rows)  # the same outputs, up to summation order
