from __future__ import annotations

import numpy as np
import torch

from elmo.modules.highway import Highway


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_matches_the_original_formula():
    layer = Highway(6, n_layers=2)
    x = torch.randn(4, 6)
    expected = x.numpy().astype(np.float64)
    for carry, transform in zip(layer.carry, layer.transform):
        wc, bc = carry.weight.detach().numpy().T, carry.bias.detach().numpy()
        wt, bt = transform.weight.detach().numpy().T, transform.bias.detach().numpy()
        gate = _sigmoid(expected @ wc + bc)
        expected = gate * np.maximum(expected @ wt + bt, 0) + (1 - gate) * expected
    np.testing.assert_allclose(layer(x).detach().numpy(), expected, atol=1e-6)


def test_carry_bias_starts_at_minus_two():
    layer = Highway(3, n_layers=1)
    assert torch.equal(layer.carry[0].bias, torch.full((3,), -2.0))
