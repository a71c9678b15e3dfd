"""Inference's CPU tuning knobs, A/B: column-blocked gate GEMMs and the input window, in one process, interleaved.

    PYTHONPATH=src python benchmarks/inference_knobs.py --config original --precision fp32 --sentences 256 \
        --rounds 6 --variants 1024:2048:64 0:2048:0

A variant is ``COLUMNS:ROWS:MB``: :data:`elmo.modules.lstm.CPU_GEMM_COLUMNS` (0: one GEMM over all the gate
columns), :data:`~elmo.modules.lstm.INPUT_WINDOW_ROWS` and :data:`~elmo.modules.lstm.INPUT_WINDOW_BYTES` in MB
(0: no byte cap). The first variant is the baseline. One embedder (random weights scaled like a trained model's,
the benchmark's real 20-30-token sentences, one batch) runs every variant once per round, in a rotated order, after
one warm-up run each; the table gives each variant's median time, the median of its per-round ratios to the
baseline (>1: faster), how many rounds it won, a Wilcoxon signed-rank test of the paired times, its minor page
faults per run, and the largest difference of its output from the baseline's. Differences of a few percent need
a quiet machine.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from embed_throughput import CONFIGS, real_sentences, write_random_model
from machine import machine_line
from scipy.stats import wilcoxon

import elmo.modules.lstm as lstm
from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm


def parse_variant(text: str) -> tuple[int, int, int]:
    try:
        columns, rows, mb = (int(x) for x in text.split(":"))
    except ValueError:
        raise SystemExit(f"--variants {text!r}: expected COLUMNS:ROWS:MB, e.g. 1024:2048:64") from None
    if min(columns, mb) < 0 or rows < 1:
        raise SystemExit(f"--variants {text!r}: COLUMNS and MB must be >= 0, ROWS >= 1")
    return columns, rows, mb


def set_knobs(columns: int, rows: int, mb: int) -> None:
    lstm.CPU_GEMM_COLUMNS = columns or None
    lstm.INPUT_WINDOW_ROWS = rows
    lstm.INPUT_WINDOW_BYTES = (mb << 20) or (1 << 62)


def run_once(embedder: Embedder, sentences: list[list[str]]) -> tuple[float, int, list[np.ndarray]]:
    """(seconds, minor page faults, outputs) of one batch."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    out = embedder.embed_batch(sentences)
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="original")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=["1024:2048:64", "0:2048:0"])
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    if len(variants) < 2:
        raise SystemExit("--variants: give at least two (the first is the baseline)")

    torch.set_num_threads(args.threads)
    print(machine_line())
    sentences = real_sentences(args.sentences)
    tokens = sum(map(len, sentences))
    with tempfile.TemporaryDirectory() as tmp:
        model = write_random_model(args.config, Path(tmp) / args.config)
        embedder = Embedder(load_bilm(model), precision=args.precision, device="cpu", batch_size=len(sentences),
                            max_batch_tokens=1 << 30)
    times, faults = [[] for _ in variants], [[] for _ in variants]
    diffs = []
    reference = None
    for i, knobs in enumerate(variants):  # warm-up, and the outputs each variant must reproduce
        set_knobs(*knobs)
        _, _, out = run_once(embedder, sentences)
        reference = out if reference is None else reference
        diffs.append(max(float(np.abs(a - b).max()) for a, b in zip(out, reference, strict=True)))
    for r in range(args.rounds):
        for k in range(len(variants)):
            i = (k + r) % len(variants)
            set_knobs(*variants[i])
            seconds, n_faults, _ = run_once(embedder, sentences)
            times[i].append(seconds)
            faults[i].append(n_faults)

    print(f"{args.config}, {args.precision}, {len(sentences)} sentences ({tokens} tokens), {args.rounds} rounds")
    print("| variant (columns:rows:MB) | median s | tokens/s | vs baseline (median of paired ratios) | rounds won "
          "| Wilcoxon p | minor faults per run | largest difference from the baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for i, text in enumerate(args.variants):
        median = statistics.median(times[i])
        ratios = [b / t for b, t in zip(times[0], times[i], strict=True)]
        won = sum(x > 1 for x in ratios)
        p = "" if i == 0 else f"{wilcoxon(times[0], times[i]).pvalue:.3f}"
        print(f"| {text}{' (baseline)' if i == 0 else ''} | {median:.3f} | {tokens / median:,.0f} | "
              f"{statistics.median(ratios):.3f}x | {'' if i == 0 else f'{won}/{args.rounds}'} | {p} | "
              f"{statistics.median(faults[i]):,.0f} | {diffs[i]:.1e} |")


if __name__ == "__main__":
    main()
