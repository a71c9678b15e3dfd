"""Dropout for sequences: one mask per position (the original) or one per row, shared over time (variational).

bilm-tf drops every position of an LSTM input independently (TF's ``DropoutWrapper`` without
``variational_recurrent``). Variational dropout (Gal & Ghahramani 2016, "A Theoretically Grounded Application of
Dropout in Recurrent Neural Networks") draws one mask per row and window and applies it at every time step, so a
row loses the same units throughout. Gal & Ghahramani report better PTB perplexities with it; in the 2-hour budget
of our `ptb` preset it did not help (docs/training.md, PTB benchmark), so it is an option, off by default.
"""

from __future__ import annotations

import torch
from torch import nn


class VariationalDropout(nn.Module):
    """Dropout on (B, T, D) with one (B, 1, D) mask per call, scaled by 1 / (1 - p); identity in eval mode."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - self.p)  # (B, 1, D)
        return x * mask.div_(1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def sequence_dropout(p: float, variational: bool = False) -> nn.Module:
    """Dropout on (B, T, D) sequences: per position (``nn.Dropout``) or one mask per row (variational)."""
    return VariationalDropout(p) if variational else nn.Dropout(p)
