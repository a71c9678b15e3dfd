"""Table 3 at our scale, SST-5: ELMo at the classifier's input only vs at the input and the output, N seeds each
(default 3), with a Welch t-test, a bootstrap CI and a verdict per pair: input only > baseline, and input & output >
input only (the paper's direction for SNLI and SQuAD, the classification and reading tasks; for SRL it found the
opposite).

    python experiments/table3_elmo_position.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
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

COLUMNS = [("baseline", "baseline"), ("elmo", "input only"), ("elmo-in-out", "input & output")]
PAIRS = [("elmo", "baseline"), ("elmo-in-out", "elmo")]
"""(a, b) with a > b in the paper (input & output > input only: its SNLI and SQuAD rows)."""


def main() -> None:
    args = parse_args(__doc__)
    label = dict(COLUMNS)
    rows, pair_rows, comparisons = [], [], {}
    for split in ("dev", "test"):
        scores = {v: seed_scores(args, "sst", v, split) for v, _ in COLUMNS}
        rows.append(["sst", split, *[mean_std(scores[v]) for v, _ in COLUMNS]])
        for a, b in PAIRS:
            cells, comparisons[f"sst/{split}/{a}-vs-{b}"] = comparison_cells(scores[a], scores[b])
            pair_rows.append(["sst", split, f"{label[a]} > {label[b]}", *cells])
    headers = ["task", "split", *[label for _, label in COLUMNS]]
    table = markdown_table(headers, rows) + "\n" + markdown_table(["task", "split", "paper's claim",
                                                                    *COMPARISON_HEADERS], pair_rows)
    write_table(args, "table3", f"Where to include ELMo, SST-5 accuracy ({args.seeds} seeds)", table,
                {"comparisons": comparisons})


if __name__ == "__main__":
    main()
