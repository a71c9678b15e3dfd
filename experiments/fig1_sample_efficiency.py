"""Figure 1 at our scale: NER test F1 with 1%, 10% and 100% of the training sentences, baseline vs +ELMo, N seeds
per point (default 5), with a Welch t-test, a bootstrap CI of the gain and a verdict (+ELMo > baseline) per size.

    python experiments/fig1_sample_efficiency.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 5] [--quick]
"""

from __future__ import annotations

import statistics

import matplotlib.pyplot as plt
from _common import (
    COMPARISON_HEADERS,
    HEADLINE_SEEDS,
    comparison_cells,
    markdown_table,
    mean_std,
    parse_args,
    seed_scores,
    write_table,
)

FRACTIONS = (0.01, 0.1, 1.0)
VARIANTS = (("baseline", "baseline"), ("elmo", "+ELMo"))


def main() -> None:
    args = parse_args(__doc__, default_seeds=HEADLINE_SEEDS)
    scores = {(v, f): seed_scores(args, "ner", v, "test", f) for v, _ in VARIANTS for f in FRACTIONS}
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for variant, label in VARIANTS:
        means = [statistics.mean(scores[variant, f]) for f in FRACTIONS]
        stds = [statistics.stdev(scores[variant, f]) if args.seeds > 1 else 0.0 for f in FRACTIONS]
        ax.errorbar([100 * f for f in FRACTIONS], means, yerr=stds, marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xticks([100 * f for f in FRACTIONS], [f"{100 * f:g}%" for f in FRACTIONS])
    ax.set_xlabel("% of CoNLL-2003 training sentences")
    ax.set_ylabel("test F1 (dev-selected)")
    ax.set_title("Sample efficiency" + (" (quick smoke run)" if args.quick else ""))
    ax.legend()
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "fig1_sample_efficiency.png", dpi=150)
    rows, comparisons = [], {}
    for f in FRACTIONS:
        cells, comparisons[f"{f:g}"] = comparison_cells(scores["elmo", f], scores["baseline", f])
        rows.append([f"{100 * f:g}%", *[mean_std(scores[v, f]) for v, _ in VARIANTS], *cells])
    write_table(args, "fig1_sample_efficiency", f"NER test F1 by training size ({args.seeds} seeds)",
                markdown_table(["training data", *[label for _, label in VARIANTS], *COMPARISON_HEADERS], rows)
                + "\n![sample efficiency](fig1_sample_efficiency.png)\n", {"comparisons": comparisons})


if __name__ == "__main__":
    main()
