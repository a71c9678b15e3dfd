"""Table 1 at our scale: the same task model without and with ELMo, N seeds each (default 5), test scores
(dev-selected), with a Welch t-test, a bootstrap CI of the gain and a verdict on the paper's claim (+ELMo > baseline).

    python experiments/table1_baseline_vs_elmo.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 5] [--quick]
"""

from __future__ import annotations

from _common import (
    COMPARISON_HEADERS,
    HEADLINE_SEEDS,
    METRIC,
    comparison_cells,
    markdown_table,
    mean_std,
    parse_args,
    seed_scores,
    write_table,
)


def main() -> None:
    args = parse_args(__doc__, default_seeds=HEADLINE_SEEDS)
    rows, comparisons = [], {}
    for task in args.tasks:
        scores = {v: seed_scores(args, task, v) for v in ("baseline", "elmo")}
        cells, comparisons[task] = comparison_cells(scores["elmo"], scores["baseline"])
        rows.append([task, METRIC[task], mean_std(scores["baseline"]), mean_std(scores["elmo"]), *cells])
    headers = ["task", "test metric", "baseline", "+ELMo", *COMPARISON_HEADERS]
    write_table(args, "table1", f"Baseline vs +ELMo ({args.seeds} seeds, mean ± std)", markdown_table(headers, rows),
                {"comparisons": comparisons})


if __name__ == "__main__":
    main()
