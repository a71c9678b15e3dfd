"""Highway layers (Srivastava et al., 2015) in the form the original biLM uses.

bilm-tf ``high()``: ``y = g * relu(x W_t + b_t) + (1 - g) * x`` with the gate ``g = sigmoid(x W_c + b_c)``.
(AllenNLP stores the negated carry weights because its gate multiplies ``x``; we keep the original form, so the
weights load without arithmetic.)
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.modules.threads import gemm_threads


class Highway(nn.Module):
    """``n_layers`` highway layers of width ``dim``; input and output (..., dim)."""

    def __init__(self, dim: int, n_layers: int) -> None:
        super().__init__()
        self.carry = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.transform = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        for gate in self.carry:
            nn.init.constant_(gate.bias, -2.0)  # bilm-tf init: start close to the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for carry, transform in zip(self.carry, self.transform):
            with gemm_threads(x.numel() * carry.out_features):
                gate, candidate = carry(x), transform(x)
            gate = torch.sigmoid(gate)
            x = gate * torch.relu(candidate) + (1.0 - gate) * x
        return x
