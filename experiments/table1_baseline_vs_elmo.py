"""Table 1 at our scale: the same task model without and with ELMo, N seeds each, test scores (dev-selected).

    python experiments/table1_baseline_vs_elmo.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--quick]
"""

from __future__ import annotations

import statistics

from _common import METRIC, markdown_table, mean_std, parse_args, run, write_table


def main() -> None:
    args = parse_args(__doc__)
    rows = []
    for task in args.tasks:
        scores = {v: [run(args, task, v, seed)["test"] for seed in range(args.seeds)] for v in ("baseline", "elmo")}
        gain = statistics.mean(scores["elmo"]) - statistics.mean(scores["baseline"])
        spread = max(statistics.stdev(s) if len(s) > 1 else 0.0 for s in scores.values())
        rows.append([task, METRIC[task], mean_std(scores["baseline"]), mean_std(scores["elmo"]), f"{gain:+.2f}",
                     "yes" if gain > 2 * spread else "no"])
    headers = ["task", "test metric", "baseline", "+ELMo", "Δ", "Δ > 2 × max seed std"]
    write_table(args, "table1", f"Baseline vs +ELMo ({args.seeds} seeds, mean ± std)", markdown_table(headers, rows))


if __name__ == "__main__":
    main()
