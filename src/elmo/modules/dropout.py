"""Dropout for sequences: one mask per position (the original) or one per row, shared over time (variational).

On CPU, ``nn.Dropout`` draws its mask with ``bernoulli_``, which takes 8 ms for a (64, 35, 256) batch on 2 cores;
comparing uniform draws with p takes 3 ms, and a training step of the `ptb` preset draws six such masks.

bilm-tf drops every position of an LSTM input independently (TF's ``DropoutWrapper`` without
``variational_recurrent``). Variational dropout (Gal & Ghahramani 2016, "A Theoretically Grounded Application of
Dropout in Recurrent Neural Networks") draws one mask per row and window and applies it at every time step, so a
row loses the same units throughout. Gal & Ghahramani report better PTB perplexities with it; in the 2-hour budget
of our `ptb` preset it did not help (docs/training.md, PTB benchmark), so it is an option, off by default.
"""

from __future__ import annotations

import torch
from torch import nn


class Dropout(nn.Module):
    """``nn.Dropout`` (each element kept with probability 1 - p, scaled by 1 / (1 - p)), faster on CPU."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return x * self._mask(x)

    def _mask(self, x: torch.Tensor) -> torch.Tensor:
        """0 or 1 / (1 - p) for every element of x; drawn in float32 whatever x's dtype."""
        keep = torch.rand(x.shape, device=x.device).ge_(self.p)
        return keep.mul_(1.0 / (1.0 - self.p)).to(x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class VariationalDropout(Dropout):
    """Dropout on (B, T, D) with one (B, 1, D) mask per call, scaled by 1 / (1 - p); identity in eval mode."""

    def _mask(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - self.p).div_(1.0 - self.p)  # (B, 1, D)


def sequence_dropout(p: float, variational: bool = False) -> nn.Module:
    """Dropout on (B, T, D) sequences: per position or one mask per row (variational)."""
    return VariationalDropout(p) if variational else Dropout(p)
