from __future__ import annotations

import numpy as np
import torch

from elmo.modules.highway import Highway
from elmo.runtime.compile_switch import compile_setting


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


def test_compiled_layers_give_the_eager_values_and_gradients():
    """``compile``: each layer through torch.compile, forward and backward, one compilation for any number of
    tokens; the same values and gradients as the eager layers (float64: only the summation order may differ)."""
    from elmo.modules import compiled
    from elmo.modules.highway import highway_layer

    torch.manual_seed(0)
    layer = Highway(6, n_layers=2).double()
    for rows in (5, 11, 3):
        x = torch.randn(rows, 6, dtype=torch.float64)
        upstream = torch.randn(rows, 6, dtype=torch.float64)
        results = []
        for use_compile in (False, True):
            leaf = x.clone().requires_grad_(True)
            layer.zero_grad()
            with compile_setting(use_compile):
                y = layer(leaf)
            y.backward(upstream)
            results.append([y.detach(), leaf.grad, *(p.grad.clone() for p in layer.parameters())])
        for eager, ours in zip(*results):
            torch.testing.assert_close(ours, eager, rtol=1e-12, atol=1e-12)
    assert compiled.compiled(highway_layer)
