"""Figure 2 at our scale: the learned softmax-normalised ELMo layer weights, averaged over seeds.

NER and SST-5 with ELMo at the input and the output (``elmo-in-out`` runs), so both mixes are shown.

    python experiments/fig2_layer_weights.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--quick]
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from _common import markdown_table, parse_args, run, write_table

MIXES = ("input", "output")


def main() -> None:
    args = parse_args(__doc__)
    weights = {}  # (task, mix) -> (L+1,) mean softmax weights
    for task in args.tasks:
        runs = [run(args, task, "elmo-in-out", s) for s in range(args.seeds)]
        for i, mix in enumerate(MIXES):
            weights[task, mix] = np.mean([r["layer_weights"][i]["weights"] for r in runs], axis=0)
    n_layers = len(next(iter(weights.values())))
    fig, axes = plt.subplots(1, 2, figsize=(7, 3), sharey=True)
    for ax, mix in zip(axes, MIXES):
        for k, task in enumerate(args.tasks):
            ax.bar(np.arange(n_layers) + 0.4 * k - 0.2, weights[task, mix], width=0.4, label=task)
        ax.set_xticks(range(n_layers), ["tokens"] + [f"LSTM {j}" for j in range(1, n_layers)])
        ax.set_title(f"ELMo at the {mix}")
        ax.axhline(1 / n_layers, color="gray", linewidth=0.8, linestyle="--")
    axes[0].set_ylabel("softmax(w)")
    axes[0].legend()
    fig.suptitle("Learned layer weights" + (" (quick smoke run)" if args.quick else ""))
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "fig2_layer_weights.png", dpi=150)
    rows = [[task, mix, *[f"{w:.3f}" for w in weights[task, mix]]] for task in args.tasks for mix in MIXES]
    headers = ["task", "mix", "tokens", *[f"LSTM {j}" for j in range(1, n_layers)]]
    write_table(args, "fig2_layer_weights", f"softmax(w), mean over {args.seeds} seeds",
                markdown_table(headers, rows) + "\n![layer weights](fig2_layer_weights.png)\n")


if __name__ == "__main__":
    main()
