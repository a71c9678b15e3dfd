"""Scalar mix of the biLM layers (paper eq. 1): ``ELMo = gamma * sum_j softmax(w)_j * h_j``.

The optional "layer norm" is the original's, not per-token LayerNorm: each layer is normalised by ONE mean and
variance over all unmasked elements of the batch (bilm-tf ``weight_layers._do_ln``, epsilon 1e-12), so with it
the output depends on the rest of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

LAYER_NORM_EPSILON = 1e-12


@dataclass(frozen=True)
class TrainedMix:
    """A mix a model file ships with (a TF-Hub module's own): ``gamma * sum_j softmax(weights)_j * layer_j``;
    :class:`elmo.modules.elmo.Elmo` starts its mixes from it."""

    weights: tuple[float, ...]
    """Pre-softmax weights, one per layer (token layer first)."""
    gamma: float
    source: str
    """Where they were read from (the file's variable names)."""


class ScalarMix(nn.Module):
    """Softmax-weighted sum of ``num_layers`` tensors of equal shape, times a scalar ``gamma``.

    Args:
        num_layers: L + 1.
        do_layer_norm: normalise each layer over the masked batch first (needs ``mask`` in ``forward``).
        initial_weights: pre-softmax weights w (default all zero, i.e. a uniform average).
        trainable: False freezes w and gamma (e.g. ``[-9e10, 1, -9e10]`` to pick one layer).
    """

    def __init__(
        self,
        num_layers: int,
        do_layer_norm: bool = False,
        initial_weights: Sequence[float] | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        if initial_weights is None:
            initial_weights = [0.0] * num_layers
        if len(initial_weights) != num_layers:
            raise ValueError(f"ScalarMix: {len(initial_weights)} initial weights given for {num_layers} layers")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.Parameter(torch.tensor(list(initial_weights), dtype=torch.float32))
        self.gamma = nn.Parameter(torch.tensor(1.0))
        self.scalar_parameters.requires_grad_(trainable)
        self.gamma.requires_grad_(trainable)

    def normalized_weights(self) -> torch.Tensor:
        """softmax(w), shape (num_layers,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def forward(self, layers: Sequence[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """``num_layers`` tensors (B, T, D) [+ mask (B, T)] -> (B, T, D)."""
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix: expected {self.num_layers} layers, got {len(layers)}")
        weights = self.normalized_weights()
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix: do_layer_norm=True needs the mask")
            layers = [_masked_layer_norm(x, mask) for x in layers]
        mixed = weights[0] * layers[0]
        for weight, layer in zip(weights[1:], layers[1:]):
            mixed = mixed + weight * layer
        return self.gamma * mixed


def _masked_layer_norm(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One mean/variance over the unmasked elements of x (B, T, D)."""
    broadcast_mask = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    count = broadcast_mask.sum() * x.shape[-1]
    masked = x * broadcast_mask
    mean = masked.sum() / count
    variance = (((masked - mean) * broadcast_mask) ** 2).sum() / count
    return (x - mean) / torch.sqrt(variance + LAYER_NORM_EPSILON)
