"""The loss/perplexity curve written to the run directory at the end of training (matplotlib, Agg backend: the
train extra; without it the curve is skipped with one warning)."""

from __future__ import annotations

import math
from pathlib import Path

from elmo.runtime.atomic_files import write_atomic
from elmo.runtime.extras import optional


def plot_history(history: list[dict], path: str | Path, loss_label: str) -> Path | None:
    """Training loss by step (left) and held-out perplexity by step (right); None (after one warning line naming
    the pip command) when matplotlib is missing."""
    matplotlib = optional("matplotlib", "train", "the training curve")
    if matplotlib is None:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    train = [h for h in history if "train_loss" in h]
    valid = [h for h in history if "valid_forward" in h]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot([h["step"] for h in train], [h["train_loss"] for h in train], label=loss_label)
    left.set_xlabel("step")
    left.set_ylabel("loss (nats)")
    left.set_title("training loss")
    left.legend()
    curves = (("valid_forward", "forward"), ("valid_backward", "backward"), ("valid_geometric_mean", "geo. mean"))
    for key, label in curves:
        right.plot([h["step"] for h in valid], [h[key] for h in valid], marker="o", label=label)
    right.set_xlabel("step")
    right.set_ylabel("perplexity (full softmax)")
    right.set_title("held-out perplexity")
    if valid and all(math.isfinite(h["valid_forward"]) for h in valid):
        right.set_yscale("log")
    right.legend()
    fig.tight_layout()
    path = Path(path)
    try:
        write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))  # a full disk leaves no half a PNG
    finally:
        plt.close(fig)
    return path
