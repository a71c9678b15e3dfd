from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.modules.scalar_mix import ScalarMix


def test_weighted_sum_formula():
    mix = ScalarMix(3, initial_weights=[0.1, -0.4, 1.2])
    with torch.no_grad():
        mix.gamma.fill_(1.7)
    layers = [torch.randn(2, 4, 6) for _ in range(3)]
    w = np.exp([0.1, -0.4, 1.2])
    w = w / w.sum()
    expected = 1.7 * sum(wi * x.numpy() for wi, x in zip(w, layers))
    np.testing.assert_allclose(mix(layers).detach().numpy(), expected, atol=1e-6)


def test_default_is_uniform_average_with_gamma_one():
    mix = ScalarMix(3)
    layers = [torch.randn(2, 4, 6) for _ in range(3)]
    torch.testing.assert_close(mix(layers), sum(layers) / 3)


def test_layer_norm_uses_one_mean_and_variance_over_the_masked_batch():
    mix = ScalarMix(2, do_layer_norm=True)
    layers = [torch.randn(2, 3, 4) * 3 + 1 for _ in range(2)]
    mask = torch.tensor([[True, True, False], [True, False, False]])
    expected = 0
    for x in layers:
        real = x.numpy()[mask.numpy()]  # (3, 4): the unmasked tokens only
        normed = (x.numpy() - real.mean()) / np.sqrt(real.var() + 1e-12)
        expected = expected + 0.5 * normed
    np.testing.assert_allclose(mix(layers, mask).detach().numpy(), expected, atol=1e-5)


def test_fixed_parameters_select_one_layer_and_are_frozen():
    mix = ScalarMix(3, initial_weights=[-9e10, 1.0, -9e10], trainable=False)
    layers = [torch.randn(2, 2, 3) for _ in range(3)]
    torch.testing.assert_close(mix(layers), layers[1])
    assert not any(p.requires_grad for p in mix.parameters())


def test_wrong_number_of_layers_raises():
    with pytest.raises(ValueError, match="expected 3 layers, got 2"):
        ScalarMix(3)([torch.zeros(1, 1, 1)] * 2)
