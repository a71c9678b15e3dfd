"""Table 2 at our scale: top layer only vs all layers with lambda = 1 and lambda = 0.001 (dev and test), N seeds
each (default 3), and per pair the paper orders (baseline < last only < all, lambda = 1 < lambda = 0.001) a Welch
t-test, a bootstrap CI of the difference and a verdict.

    python experiments/table2_layers_and_lambda.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
"""

from __future__ import annotations

from _common import (
    COMPARISON_HEADERS,
    comparison_cells,
    markdown_table,
    mean_std,
    parse_args,
    seed_scores,
    write_table,
)

COLUMNS = [("baseline", "baseline"), ("elmo-top", "last only"), ("elmo-lambda1", "all, λ=1"), ("elmo", "all, λ=0.001")]
PAIRS = [("elmo-top", "baseline"), ("elmo-lambda1", "elmo-top"), ("elmo", "elmo-top"), ("elmo", "elmo-lambda1")]
"""(a, b): the paper's Table 2 has a > b for each (all three of its tasks, dev)."""


def main() -> None:
    args = parse_args(__doc__)
    label = dict(COLUMNS)
    rows, pair_rows, comparisons = [], [], {}
    for task in args.tasks:
        for split in ("dev", "test"):
            scores = {v: seed_scores(args, task, v, split) for v, _ in COLUMNS}
            rows.append([task, split, *[mean_std(scores[v]) for v, _ in COLUMNS]])
            for a, b in PAIRS:
                name = f"{label[a]} > {label[b]}"
                cells, comparisons[f"{task}/{split}/{a}-vs-{b}"] = comparison_cells(scores[a], scores[b])
                pair_rows.append([task, split, name, *cells])
    headers = ["task", "split", *[label for _, label in COLUMNS]]
    seeds = f"{args.seeds} seed" + "s" * (args.seeds > 1)
    table = markdown_table(headers, rows) + "\n" + markdown_table(["task", "split", "paper's claim",
                                                                    *COMPARISON_HEADERS], pair_rows)
    write_table(args, "table2", f"Layers and regularisation ({seeds})", table, {"comparisons": comparisons})


if __name__ == "__main__":
    main()
