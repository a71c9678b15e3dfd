"""benchmarks/serve_load.py at a few seconds a phase: the load benchmark cannot rot between its real runs."""

from __future__ import annotations

import pytest

from tests.benchmarks.scripts import run_benchmark

pytestmark = pytest.mark.slow


@pytest.mark.slow
def test_serve_load_runs_every_phase_and_prints_the_checks():
    done = run_benchmark("serve_load.py", "--seconds", "1", "--rounds", "1", "--open-seconds", "1", "--above-seconds",
                         "1", "--quick", "--max-requests", "10", "--threads", "1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and " loop, " in line]
    loads = [row.split(" | ")[1] for row in rows]
    assert loads[:5] == ["closed loop, 1 clients", "closed loop, 32 clients", "closed loop, 1 clients",
                         "closed loop, 32 clients", "open loop, 10 requests/s"]
    assert len(loads) == 6 and loads[5].startswith("open loop, ")  # twice the capacity measured, at least 20/s
    assert all(" | 0 (0 x 503) | " in row for row in rows[:5]), "\n".join(rows)  # below capacity: no failures
    assert "machine: " in done.stdout and "the sentences/s of one request at a time" in done.stdout
    assert "per round: " in done.stdout
    assert "above capacity (" in done.stdout
