"""`elmo embed` end to end, two source trees (or two sets of flags) against each other: the before/after of a change.

    git worktree add /tmp/before <commit>           # the code before the change
    PYTHONPATH=src .venv/bin/python benchmarks/embed_ab.py --before /tmp/before/src --config original \\
        --precision fp32 --sentences 512 --rounds 3
    PYTHONPATH=src .venv/bin/python benchmarks/embed_ab.py --before src --before-flags="--pipeline off" \\
        --after-flags="--pipeline on" --config small          # one tree, two settings

Both run the real command (`python -m elmo -q embed IN OUT --all --model M --precision P`, default batching: sorted
by length, 256 sentences / 8,192 tokens a batch) on the same input, real sentences of the sample corpus of every
length, and the same model (random weights scaled like a trained model's, in the original format), each run a
process of its own, the two trees in alternating order in every round. The table gives each tree's median wall
time (the whole command: start-up and model loading included) and tokens/s, the median of the per-round paired
ratios (>1: the after tree is faster), the rounds it won, a Wilcoxon signed-rank test of the paired times (with 3
rounds the smallest p it can give is 0.25: use 6 or more for a verdict), peak RSS of each, and the largest
difference between the two trees' vectors.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
from embed_throughput import write_random_model
from machine import machine_line
from roofline import corpus_sentences

HERE = Path(__file__).resolve().parents[1] / "src"


def run(src: Path, flags: list[str], text: Path, out: Path, model: Path, precision: str,
        threads: int) -> tuple[float, float]:
    """One `elmo embed` with the package of ``src`` and the extra ``flags``: (wall seconds, peak RSS MB)."""
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    command = [sys.executable, "-m", "elmo", "-q", "embed", str(text), str(out), "--all", "--model", str(model),
               "--precision", precision, "--force", "--no-progress", *flags]
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"elmo embed with {src} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def largest_difference(a: Path, b: Path) -> float:
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        keys = [k for k in fa if k != "sentence_to_index"]
        return max((float(np.abs(fa[k][...] - fb[k][...]).max()) for k in keys if fa[k].size), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the src/ folder of the code before")
    parser.add_argument("--after", type=Path, default=HERE, help="the src/ folder of the code after (default: this "
                        "checkout's)")
    parser.add_argument("--before-flags", default="", help="more `elmo embed` flags for the before side")
    parser.add_argument("--after-flags", default="", help="more `elmo embed` flags for the after side")
    parser.add_argument("--config", default="original", choices=("original", "small"))
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32"])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from scipy.stats import wilcoxon

    print(machine_line())
    sentences = corpus_sentences(args.sentences)
    tokens = sum(map(len, sentences))
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    flags = {"before": args.before_flags.split(), "after": args.after_flags.split()}
    print(f"before: {trees['before']} {args.before_flags}\nafter: {trees['after']} {args.after_flags}")
    print(f"{args.config}, {len(sentences)} sentences, "
          f"{tokens:,} tokens, {args.rounds} rounds\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = write_random_model(args.config, tmp / "model")
        text = tmp / "in.txt"
        text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        for precision in args.precision:
            times = {name: [] for name in trees}
            rss = {name: 0.0 for name in trees}
            for round_ in range(args.rounds):
                for name in (list(trees) if round_ % 2 == 0 else list(trees)[::-1]):
                    seconds, peak = run(trees[name], flags[name], text, tmp / f"{name}.hdf5", model, precision,
                                        args.threads)
                    times[name].append(seconds)
                    rss[name] = max(rss[name], peak)
                    print(f"  round {round_ + 1}, {precision}, {name}: {seconds:.2f} s", file=sys.stderr, flush=True)
            ratios = [b / a for b, a in zip(times["before"], times["after"])]
            p = wilcoxon(times["before"], times["after"]).pvalue if args.rounds >= 2 else float("nan")
            rows.append((precision, times, rss, ratios, p, largest_difference(tmp / "before.hdf5", tmp / "after.hdf5")))
    print("| precision | before: median s, tokens/s | after: median s, tokens/s | after / before (paired median) "
          "| rounds won | Wilcoxon p | peak RSS MB, before / after | largest difference |")
    print("|---|---|---|---:|---:|---:|---|---:|")
    for precision, times, rss, ratios, p, diff in rows:
        before, after = statistics.median(times["before"]), statistics.median(times["after"])
        print(f"| {precision} | {before:.2f}, {tokens / before:,.0f} | {after:.2f}, {tokens / after:,.0f} | "
              f"**{statistics.median(ratios):.3f}x** | {sum(r > 1 for r in ratios)}/{len(ratios)} | {p:.3f} | "
              f"{rss['before']:,.0f} / {rss['after']:,.0f} | {diff:.2e} |")


if __name__ == "__main__":
    main()
