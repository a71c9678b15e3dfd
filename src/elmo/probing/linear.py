"""A softmax classifier on frozen vectors: one layer's, or a scalar mix of all layers learned jointly with it.

Training is full-batch and deterministic (no sampling; on one machine and thread count the same numbers every
run): each layer's vectors are standardised (per dimension, on the training rows), then L-BFGS (strong Wolfe line
search) minimises the mean cross-entropy plus ``l2 * ||W||^2`` on the classifier's weight
matrix, from zero weights (the mix starts as the plain average, gamma 1). The last ``held_out`` fraction of the
training rows (in the order given: for POS, the last sentences of the training file) is kept aside: every
``check_every`` iterations its accuracy is measured, the best weights are kept, and training stops after
``patience`` checks without improvement or after ``max_iterations``.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from elmo.modules.scalar_mix import ScalarMix
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.settings import at_least, check_settings, setting


def _open_fraction(value: float) -> float:
    if not 0 < value < 1:
        raise ValueError(f"must be between 0 and 1, got {value}")
    return value


SMALL_PROBLEM = 1 << 21
"""Training vectors of fewer elements run on one thread."""


@dataclass(frozen=True)
class ProbeSettings:
    """How every linear probe trains (the same for each layer, so the layers are compared on equal terms)."""

    max_iterations: int = setting(300, "most L-BFGS iterations", check=at_least(1))
    check_every: int = setting(10, "L-BFGS iterations between two held-out checks", check=at_least(1))
    l2: float = setting(1e-4, "weight of ||W||^2 (the classifier's weights) in the loss", check=at_least(0))
    held_out: float = setting(0.1, "fraction of the training rows (the last ones) kept for early stopping",
                              check=_open_fraction)
    patience: int = setting(3, "held-out checks without a better accuracy before stopping", check=at_least(1))

    def __post_init__(self) -> None:
        check_settings(self)


class LinearProbe(nn.Module):
    """(N, K, D) frozen vectors of K layers -> (N, classes) logits; K > 1 mixes the layers first (softmax weights
    and gamma, as ``Elmo``'s mix)."""

    def __init__(self, dim: int, num_classes: int, num_layers: int = 1) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_layers, dim))
        self.register_buffer("scale", torch.ones(num_layers, dim))
        self.mix = ScalarMix(num_layers) if num_layers > 1 else None
        self.linear = nn.Linear(dim, num_classes)

    def standardize_on(self, vectors: torch.Tensor) -> None:
        """Fix the per-layer, per-dimension mean and 1/std of the training vectors (N, K, D): the probe sees
        z-scores, which L-BFGS fits in far fewer steps (a linear map of one layer can express the same either way)."""
        self.mean.copy_(vectors.mean(0))
        self.scale.copy_(1 / vectors.std(0).clamp_min(1e-6))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        vectors = (vectors - self.mean) * self.scale  # (N, K, D)
        if self.mix is None:
            return self.linear(vectors[:, 0])  # (N, classes)
        return self.linear(self.mix(list(vectors.unbind(1))))

    def mix_weights(self) -> list[float] | None:
        """softmax(w) of the mix, lowest layer first (None without a mix)."""
        return None if self.mix is None else [round(float(w), 4) for w in self.mix.normalized_weights().detach()]

    @torch.no_grad()
    def predict(self, vectors: np.ndarray, batch_size: int = 8192) -> np.ndarray:
        """(N, K, D) -> (N,) class indices."""
        self.eval()
        starts = range(0, len(vectors), batch_size)
        out = [self(torch.from_numpy(vectors[i: i + batch_size])).argmax(-1) for i in starts]
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


def train_probe(
    vectors: np.ndarray, labels: np.ndarray, num_classes: int, settings: ProbeSettings | None = None
) -> LinearProbe:
    """Train a probe on (N, K, D) float32 ``vectors`` with (N,) int ``labels`` in [0, num_classes)."""
    settings = settings or ProbeSettings()
    if vectors.ndim != 3 or len(vectors) != len(labels):
        raise ValueError(f"vectors (N, K, D) and labels (N,) expected, got {vectors.shape} and {labels.shape}")
    n_held = max(1, int(round(len(vectors) * settings.held_out)))
    if len(vectors) - n_held < 1:
        raise ValueError(f"{len(vectors)} training rows are too few to keep {n_held} for early stopping")
    train_x = torch.from_numpy(np.ascontiguousarray(vectors[:-n_held]))  # (N - H, K, D)
    train_y = torch.from_numpy(np.asarray(labels[:-n_held], dtype=np.int64))
    held_x, held_y = vectors[-n_held:], np.asarray(labels[-n_held:], dtype=np.int64)
    probe = LinearProbe(vectors.shape[2], num_classes, vectors.shape[1])
    probe.standardize_on(train_x)
    nn.init.zeros_(probe.linear.weight)
    nn.init.zeros_(probe.linear.bias)
    optimizer = torch.optim.LBFGS(probe.parameters(), max_iter=settings.check_every, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(probe(train_x), train_y) + settings.l2 * probe.linear.weight.square().sum()
        loss.backward()
        return loss

    best, best_state, waited = -1.0, copy.deepcopy(probe.state_dict()), 0
    small = vectors.size < SMALL_PROBLEM  # thread barriers would cost more than the arithmetic
    with small_ops_on_one_thread("cpu") if small else contextlib.nullcontext():
        for _ in range(-(-settings.max_iterations // settings.check_every)):
            probe.train()
            optimizer.step(closure)
            held_accuracy = accuracy(probe.predict(held_x), held_y)
            if held_accuracy > best:
                best, best_state, waited = held_accuracy, copy.deepcopy(probe.state_dict()), 0
            else:
                waited += 1
                if waited >= settings.patience:
                    break
    probe.load_state_dict(best_state)
    return probe.eval()


def accuracy(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Fraction correct (0.0 for no rows); a gold label the probe never saw (-1) counts as wrong."""
    return float((predicted == gold).mean()) if len(gold) else 0.0
