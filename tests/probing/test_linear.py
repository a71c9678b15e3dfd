"""The linear probe learns a separable case, learns which layer to mix, and is deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from elmo.probing.linear import ProbeSettings, accuracy, train_probe
from elmo.settings import SettingError

FAST = ProbeSettings(max_iterations=40)


def _separable(n: int, informative_layer: int, layers: int = 3, dim: int = 8, seed: int = 0):
    """Labels 0..2 readable from dims 0-2 of one layer only; the other layers are noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    vectors = rng.normal(size=(n, layers, dim)).astype(np.float32)
    vectors[np.arange(n), informative_layer, labels] += 4.0
    return vectors, labels


def test_learns_a_separable_case_and_not_noise():
    x, y = _separable(400, informative_layer=1)
    test_x, test_y = _separable(300, informative_layer=1, seed=1)
    good = train_probe(x[:, 1:2], y, 3, FAST)
    assert accuracy(good.predict(test_x[:, 1:2]), test_y) > 0.95
    noise = train_probe(x[:, 0:1], y, 3, FAST)
    assert accuracy(noise.predict(test_x[:, 0:1]), test_y) < 0.5  # chance is 1/3


def test_the_mix_weights_the_informative_layer():
    x, y = _separable(400, informative_layer=2)
    probe = train_probe(x, y, 3, FAST)
    weights = probe.mix_weights()
    assert len(weights) == 3 and abs(sum(weights) - 1) < 1e-3
    assert max(range(3), key=weights.__getitem__) == 2
    test_x, test_y = _separable(300, informative_layer=2, seed=1)
    assert accuracy(probe.predict(test_x), test_y) > 0.95


def test_deterministic():
    x, y = _separable(200, informative_layer=0)
    a, b = train_probe(x, y, 3, FAST), train_probe(x, y, 3, FAST)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert np.array_equal(p.numpy(), q.numpy()), name


def test_unseen_label_counts_as_wrong_and_settings_are_checked():
    assert accuracy(np.array([0, 1]), np.array([0, -1])) == 0.5
    with pytest.raises(SettingError, match="held_out must be between 0 and 1"):
        ProbeSettings(held_out=1.0)
    with pytest.raises(SettingError, match="max_iterations must be >= 1"):
        ProbeSettings(max_iterations=0)
