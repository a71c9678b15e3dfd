"""Tail averaging of the weights: the running mean, swapping it in and out, and its checkpoint round trip."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from elmo.errors import WeightFileError
from elmo.weight_average import WeightAverage


def _trained_steps(model: nn.Module, average: WeightAverage, steps: int) -> list[dict[str, torch.Tensor]]:
    """Random SGD-like steps; returns the weights after each (1-based step k at index k - 1)."""
    g = torch.Generator().manual_seed(0)
    seen = []
    for step in range(1, steps + 1):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g))
        average.update(step)
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
    return seen


def test_the_mean_covers_exactly_the_steps_after_start():
    model = nn.Linear(3, 2)
    average = WeightAverage(model, start_step=4)
    seen = _trained_steps(model, average, 10)
    assert average.count == 6
    for name, value in average.state_dict().items():
        expected = torch.stack([s[name] for s in seen[4:]]).mean(0)  # steps 5..10
        torch.testing.assert_close(value, expected, rtol=1e-6, atol=1e-6)


def test_applied_swaps_the_mean_in_and_the_weights_back_even_on_errors():
    model = nn.Linear(3, 2)
    average = WeightAverage(model, start_step=0)
    _trained_steps(model, average, 3)
    own = {k: v.clone() for k, v in model.state_dict().items()}
    with average.applied():
        for name, value in model.state_dict().items():
            assert torch.equal(value, average.state_dict()[name])
    with pytest.raises(RuntimeError), average.applied():
        raise RuntimeError("evaluation failed")
    for name, value in model.state_dict().items():
        assert torch.equal(value, own[name])


def test_before_the_first_averaged_step_there_is_nothing_to_apply():
    model = nn.Linear(3, 2)
    average = WeightAverage(model, start_step=5)
    _trained_steps(model, average, 5)
    assert average.count == 0 and average.state_dict() == {}
    own = model.weight.clone()
    with average.applied():
        assert torch.equal(model.weight, own)


def test_a_restored_mean_continues_exactly():
    torch.manual_seed(0)
    model, copy = nn.Linear(3, 2), nn.Linear(3, 2)
    copy.load_state_dict(model.state_dict())
    whole = WeightAverage(model, start_step=2)
    _trained_steps(model, whole, 4)
    resumed = WeightAverage(copy, start_step=2)
    _trained_steps(copy, resumed, 4)  # same steps
    restored = WeightAverage(copy, start_step=2)
    restored.load_state_dict(resumed.state_dict(), resumed.count, "average.safetensors")
    whole.update(5)
    restored.update(5)
    for name, value in whole.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value)


def test_a_mean_that_does_not_fit_the_model_is_a_one_line_error():
    model = nn.Linear(3, 2)
    average = WeightAverage(model, start_step=0)
    with pytest.raises(WeightFileError, match=r"^ckpt/average.safetensors: the weight average does not match the "
                                              r"model \('bias'\)$"):
        average.load_state_dict({"weight": torch.zeros(2, 3)}, 3, "ckpt/average.safetensors")
    with pytest.raises(WeightFileError, match=r"'weight' is \(3, 3\)"):
        average.load_state_dict({"weight": torch.zeros(3, 3), "bias": torch.zeros(2)}, 3, "ckpt/average.safetensors")
