"""Table 3 at our scale, SST-5: ELMo at the classifier's input only vs at the input and the output.

    python experiments/table3_elmo_position.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
"""

from __future__ import annotations

from _common import markdown_table, mean_std, parse_args, run, write_table

COLUMNS = [("baseline", "baseline"), ("elmo", "input only"), ("elmo-in-out", "input & output")]


def main() -> None:
    args = parse_args(__doc__)
    rows = []
    for split in ("dev", "test"):
        cells = [mean_std([run(args, "sst", v, s)[split] for s in range(args.seeds)]) for v, _ in COLUMNS]
        rows.append(["sst", split, *cells])
    headers = ["task", "split", *[label for _, label in COLUMNS]]
    write_table(args, "table3", f"Where to include ELMo, SST-5 accuracy ({args.seeds} seeds)",
                markdown_table(headers, rows))


if __name__ == "__main__":
    main()
