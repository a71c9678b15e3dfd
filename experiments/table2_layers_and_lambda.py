"""Table 2 at our scale: top layer only vs all layers with lambda = 1 and lambda = 0.001 (dev and test).

    python experiments/table2_layers_and_lambda.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
"""

from __future__ import annotations

from _common import markdown_table, mean_std, parse_args, run, write_table

COLUMNS = [("baseline", "baseline"), ("elmo-top", "last only"), ("elmo-lambda1", "all, λ=1"), ("elmo", "all, λ=0.001")]


def main() -> None:
    args = parse_args(__doc__)
    rows = []
    for task in args.tasks:
        for split in ("dev", "test"):
            cells = [mean_std([run(args, task, v, s)[split] for s in range(args.seeds)]) for v, _ in COLUMNS]
            rows.append([task, split, *cells])
    headers = ["task", "split", *[label for _, label in COLUMNS]]
    seeds = f"{args.seeds} seed" + "s" * (args.seeds > 1)
    write_table(args, "table2", f"Layers and regularisation ({seeds})", markdown_table(headers, rows))


if __name__ == "__main__":
    main()
