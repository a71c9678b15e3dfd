"""Figure 2 at our scale: the learned softmax-normalised ELMo layer weights, averaged over seeds.

The input mix of each task's +ELMo runs (those of Table 1) and, for SST-5, both mixes of the input-and-output runs
(those of Table 3), so the figure costs no runs of its own.

    python experiments/fig2_layer_weights.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from _common import markdown_table, parse_args, run, write_table

TASK_NAMES = {"ner": "NER", "sst": "SST-5"}


def main() -> None:
    args = parse_args(__doc__)
    mixes = []  # (label, variant, task, index of the mix in the run's layer_weights)
    for task in args.tasks:
        mixes.append((f"{TASK_NAMES[task]} input", "elmo", task, 0))
    if "sst" in args.tasks:
        mixes += [("SST-5 in & out: input", "elmo-in-out", "sst", 0),
                  ("SST-5 in & out: output", "elmo-in-out", "sst", 1)]
    weights = {}  # label -> (L+1,) mean softmax weights over seeds
    for label, variant, task, i in mixes:
        runs = [run(args, task, variant, s) for s in range(args.seeds)]
        weights[label] = np.mean([r["layer_weights"][i]["weights"] for r in runs], axis=0)
    n_layers = len(next(iter(weights.values())))
    layer_names = ["tokens"] + [f"LSTM {j}" for j in range(1, n_layers)]

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(weights)
    for k, (label, w) in enumerate(weights.items()):
        ax.bar(np.arange(n_layers) + width * (k - (len(weights) - 1) / 2), w, width=width, label=label)
    ax.set_xticks(range(n_layers), layer_names)
    ax.axhline(1 / n_layers, color="gray", linewidth=0.8, linestyle="--")  # the uniform mix
    ax.set_ylabel("softmax(w)")
    ax.set_title("Learned layer weights" + (" (quick smoke run)" if args.quick else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "fig2_layer_weights.png", dpi=150)
    rows = [[label, *[f"{x:.3f}" for x in w]] for label, w in weights.items()]
    write_table(args, "fig2_layer_weights", f"softmax(w), mean over {args.seeds} seeds",
                markdown_table(["mix", *layer_names], rows) + "\n![layer weights](fig2_layer_weights.png)\n")


if __name__ == "__main__":
    main()
