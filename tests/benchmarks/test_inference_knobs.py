"""benchmarks/inference_knobs.py on the small model and a few sentences: the A/B cannot rot, and no knob setting
changes the embeddings."""

from __future__ import annotations

import pytest

from tests.benchmarks.scripts import run_benchmark

pytestmark = pytest.mark.slow


def test_inference_knobs_table_lists_every_variant_with_the_same_outputs():
    variants = ["1024:2048:64", "0:3:0", "7:2048:1"]
    done = run_benchmark("inference_knobs.py", "--config", "small", "--sentences", "4", "--rounds", "2", "--threads",
                         "1", "--variants", *variants)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith("machine: ")
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line[2:3].isdigit()]
    assert [row[0][2:].split(" ")[0] for row in rows] == variants
    assert rows[0][0].endswith("(baseline)") and all(row[4] in ("0/2", "1/2", "2/2") for row in rows[1:])
    assert all(float(row[-1].rstrip(" |")) <= 1e-5 for row in rows)  # same embeddings, up to summation order


def test_inference_knobs_rejects_a_malformed_variant():
    done = run_benchmark("inference_knobs.py", "--variants", "1024:2048", "0:1:0", timeout=120)
    assert done.returncode == 1 and "--variants '1024:2048': expected COLUMNS:ROWS:MB" in done.stderr
