"""`elmo train` with the default precision (``auto``) against an explicit precision, end to end through the CLI.

    PYTHONPATH=src python benchmarks/precision_auto.py --train ../shared/data/lm/ptb/ptb.train.txt \
        [--config ptb] [--steps 100] [--rounds 2] [--against fp32]

Each round trains ``--steps`` steps from scratch twice, once without a precision option and once with
``--precision AGAINST``, alternating which goes first, in fresh processes with the preset's own settings (compile
included). The log's tokens/s of every window after the first (which holds the compile warm-up) are the
samples; the table gives the median per case, the ratio, a Welch t-test of the two sets of windows (scipy), and the
precision each run's log says it chose. On a CPU
without bf16 units ``auto`` must choose fp32 and run as fast as ``--precision fp32``; with bf16 units it must
choose bf16 (compare ``--against bf16``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import machine_line
from scipy.stats import ttest_ind

TOKENS_PER_S = re.compile(r"step (\d+)/\d+ .*\| (\d+) tokens/s")
CHOSEN = re.compile(r"precision (auto: \w+|\w+) on \S+")


def train_once(args: argparse.Namespace, work: Path, precision: str | None) -> tuple[list[float], str]:
    """(tokens/s of every log window after the first, the precision line of the log) of one fresh run."""
    run_dir = Path(tempfile.mkdtemp(dir=work))
    cmd = [sys.executable, "-m", "elmo", "train", "--config", args.config, "--train", str(args.train),
           "--vocab", str(work / "vocab.txt"), "--out", str(run_dir / "run"), "--max-steps", str(args.steps),
           "--log-every", str(args.log_every), "--no-progress"]
    if precision is not None:
        cmd += ["--precision", precision]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    windows = [(int(m[1]), float(m[2])) for m in TOKENS_PER_S.finditer(done.stderr)]
    chosen = CHOSEN.search(done.stderr)
    return [rate for step, rate in windows if step > args.log_every], chosen[1] if chosen else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, required=True, help="a training text file (e.g. ptb.train.txt)")
    parser.add_argument("--config", default="ptb")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", default="fp32", choices=("fp32", "bf16"))
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, "-m", "elmo", "-q", "vocab", str(args.train), "-o", str(work / "vocab.txt")],
                       check=True)
        cases = {"default (auto)": None, f"--precision {args.against}": args.against}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        chosen: dict[str, set[str]] = {name: set() for name in cases}
        for r in range(args.rounds):
            order = list(cases) if r % 2 == 0 else list(reversed(cases))
            for name in order:
                print(f"  round {r + 1}: {name}", file=sys.stderr)
                rates, line = train_once(args, work, cases[name])
                samples[name] += rates
                chosen[name].add(line)
    base = statistics.median(samples[f"--precision {args.against}"])
    print(f"\n`elmo train --config {args.config}`, {args.steps} steps x {args.rounds} rounds, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}\n")
    print("| case | log says | windows | median tokens/s | min-max | vs explicit |")
    print("|---|---|---:|---:|---|---:|")
    for name, rates in samples.items():
        median = statistics.median(rates)
        print(f"| {name} | precision {', '.join(sorted(chosen[name]))} | {len(rates)} | {median:,.0f} "
              f"| {min(rates):,.0f}-{max(rates):,.0f} | {median / base:.3f}x |")
    auto, explicit = samples.values()
    test = ttest_ind(auto, explicit, equal_var=False)
    print(f"\nWelch t-test, auto against --precision {args.against}: t = {test.statistic:.2f}, p = {test.pvalue:.3f}")


if __name__ == "__main__":
    main()
