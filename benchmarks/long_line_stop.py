"""``elmo embed`` on one very long line (a 200,000-token sentence): wall time, peak RSS, and how long SIGTERM takes
to stop it, so that docs/embedding.md can state what a long sequence costs and how soon it stops.

Three runs of the command per table row, each its own process: one to the end (seconds, CPU seconds and peak RSS
from ``os.wait4``); one sent SIGTERM ``--delay`` seconds after the embedder is built (its ``precision ...`` log line),
timed from the signal to the exit; one sent SIGTERM twice, one second apart, timed from the first. The model is the
tests' tiny biLM (random weights: 12 LSTM cells, 8 projections, 2 layers, a 3-filter char CNN) unless ``--model``
names one; ``--repo`` runs another checkout's ``elmo`` (an earlier commit, for a before/after table) on the same
files; ``--window`` is passed as ``--sequence-window`` (the default: the checkout's own).

    PYTHONPATH=src nice .venv/bin/python benchmarks/long_line_stop.py --tokens 200000
    PYTHONPATH=src nice .venv/bin/python benchmarks/long_line_stop.py --tokens 200000 --repo /tmp/before
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine_line

WORDS = "the a cat dog sat ran on under mat tree big small , . and then it was".split()


def tiny_model(directory: Path) -> Path:
    import torch

    from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
    from elmo.formats.model_files import save_bilm
    from elmo.modules.bilm import build_bilm

    config = BiLMConfig(lstm=LSTMConfig(dim=12, projection_dim=8, n_layers=2, cell_clip=3, proj_clip=3,
                                        use_skip_connections=True),
                        char_cnn=CharCNNConfig(filters=[(1, 4), (2, 6), (3, 8)], embedding_dim=5, n_highway=1))
    bilm = build_bilm(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in bilm.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    save_bilm(bilm, directory)
    return directory


def command(repo: Path, model: str, line: Path, out: Path, window: int | None) -> tuple[list[str], dict[str, str]]:
    argv = [sys.executable, "-m", "elmo", "embed", "--all", "--model", model, str(line), str(out), "--no-progress"]
    if window is not None:
        argv += ["--sequence-window", str(window)]
    return argv, {**os.environ, "PYTHONPATH": str(repo / "src")}


def run_to_end(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system: steadier than the wall time on shared cores), peak RSS (MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def time_to_stop(argv: list[str], env: dict[str, str], delay: float, signals: int) -> str:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "precision" in line:  # the embedder is built; the job runs under the signal handler right after
            break
    time.sleep(delay)
    if proc.poll() is not None:
        return "ended before the signal"
    start = time.perf_counter()
    for i in range(signals):
        if i:
            time.sleep(1.0)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "still running after 600 s"
    return f"{time.perf_counter() - start:.2f} (exit {code})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--model", help="a model --model takes (default: the tests' tiny biLM, random weights)")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose elmo runs (default: this one)")
    parser.add_argument("--window", type=int, help="--sequence-window (default: the checkout's default)")
    parser.add_argument("--delay", type=float, default=5.0, help="seconds between the embedder's start and SIGTERM")
    args = parser.parse_args()
    print(machine_line())
    print(f"checkout {args.repo}; `elmo embed --all` of one line of {args.tokens:,} tokens\n")
    print("| window | seconds | CPU seconds | peak RSS (MB) | SIGTERM to exit (s) | two SIGTERMs to exit (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model or str(tiny_model(tmp / "model"))
        line = tmp / "line.txt"
        rng = random.Random(0)
        line.write_text(" ".join(rng.choice(WORDS) for _ in range(args.tokens)) + "\n", encoding="utf-8")
        seconds, cpu, rss = run_to_end(*command(args.repo, model, line, tmp / "whole.hdf5", args.window))
        one = time_to_stop(*command(args.repo, model, line, tmp / "one.hdf5", args.window), args.delay, 1)
        two = time_to_stop(*command(args.repo, model, line, tmp / "two.hdf5", args.window), args.delay, 2)
    window = "default" if args.window is None else f"{args.window:,}"
    print(f"| {window} | {seconds:.1f} | {cpu:.1f} | {rss:.0f} | {one} | {two} |", flush=True)


if __name__ == "__main__":
    main()
