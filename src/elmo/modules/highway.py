"""Highway layers (Srivastava et al., 2015) in the form the original biLM uses.

bilm-tf ``high()``: ``y = g * relu(x W_t + b_t) + (1 - g) * x`` with the gate ``g = sigmoid(x W_c + b_c)``.
(AllenNLP stores the negated carry weights because its gate multiplies ``x``; we keep the original form, so the
weights load without arithmetic.)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from elmo.modules.compiled import compile_enabled, run_compiled

_WHAT = "the highway layers"  # for the warning when compiling fails


class Highway(nn.Module):
    """``n_layers`` highway layers of width ``dim``; input and output (..., dim)."""

    def __init__(self, dim: int, n_layers: int) -> None:
        super().__init__()
        self.carry = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.transform = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        for gate in self.carry:
            nn.init.constant_(gate.bias, -2.0)  # bilm-tf init: start close to the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """With gradients and compiling on (:mod:`elmo.modules.compiled`), each layer, forward and backward, runs
        through ``torch.compile`` (:func:`highway_layer`, one compilation for any number of tokens), which fuses the
        gating's half-dozen elementwise passes over the (N, dim) activations and their gradients into a few kernels."""
        for carry, transform in zip(self.carry, self.transform):
            y = None
            if compile_enabled() and torch.is_grad_enabled():  # training: evaluation stays eager
                y = run_compiled(highway_layer, _WHAT, x, carry.weight, carry.bias, transform.weight, transform.bias,
                                 dynamic=True)
            if y is None:
                y = _gated(carry(x), transform(x), x)
            x = y
        return x


def highway_layer(x: torch.Tensor, w_carry: torch.Tensor, b_carry: torch.Tensor, w_transform: torch.Tensor,
                  b_transform: torch.Tensor) -> torch.Tensor:
    """One highway layer as a pure function, for ``torch.compile``: x (N, dim) -> (N, dim)."""
    return _gated(F.linear(x, w_carry, b_carry), F.linear(x, w_transform, b_transform), x)


def _gated(gate: torch.Tensor, candidate: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """g * relu(candidate) + (1 - g) * x with g = sigmoid(gate): the carry gate mixes the layer's input back in."""
    gate = torch.sigmoid(gate)
    return gate * torch.relu(candidate) + (1.0 - gate) * x
