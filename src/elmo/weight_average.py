"""Tail averaging of the weights (Polyak & Juditsky 1992): the mean of the parameters over a run's last steps.

While the learning rate is still large enough to make progress, the last iterates of a language model scatter
around a minimum, and their mean can score a lower held-out perplexity than the last one (averaged SGD in
AWD-LSTM, Merity et al. 2018, is the best-known case on PTB). ``elmo train --average-last F`` keeps a running
mean of the parameters over the final fraction F of the steps; the run's held-out evaluations from then on,
``elmo export`` and ``elmo perplexity`` of the run directory use it. The training itself continues from the raw
weights.

The mean lives beside the weights in each checkpoint (``average.safetensors``, its step count in
``trainer.json``), so a resumed run continues it exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from elmo.errors import WeightFileError


class WeightAverage:
    """Running mean of ``module``'s parameters over the optimizer steps after ``start_step``."""

    def __init__(self, module: nn.Module, start_step: int) -> None:
        self.module = module
        self.start_step = start_step
        self.count = 0
        self._average: dict[str, torch.Tensor] = {}

    def update(self, step: int) -> None:
        """Fold in the weights after optimizer step ``step`` (1-based) when it is past ``start_step``."""
        if step <= self.start_step:
            return
        self.count += 1
        with torch.no_grad():
            for name, p in self.module.named_parameters():
                if self.count == 1:
                    self._average[name] = p.detach().clone()
                else:
                    self._average[name].lerp_(p, 1.0 / self.count)  # mean += (p - mean) / count

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The mean by parameter name (empty before the first averaged step)."""
        return dict(self._average)

    def load_state_dict(self, tensors: dict[str, torch.Tensor], count: int, source: str) -> None:
        """Restore a saved mean of ``count`` steps; ``source`` names the file in errors."""
        if count == 0:
            self.count, self._average = 0, {}
            return
        params = dict(self.module.named_parameters())
        if tensors.keys() != params.keys():
            missing = sorted(params.keys() - tensors.keys()) or sorted(tensors.keys() - params.keys())
            raise WeightFileError(f"{source}: the weight average does not match the model ('{missing[0]}')")
        for name, p in params.items():
            if tensors[name].shape != p.shape or tensors[name].dtype != p.dtype:
                raise WeightFileError(f"{source}: '{name}' is {tuple(tensors[name].shape)} {tensors[name].dtype}, "
                                      f"the model's {tuple(p.shape)} {p.dtype}")
        self.count = count
        self._average = {name: tensors[name].to(p.device).clone() for name, p in params.items()}

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Inside the block the module holds the mean (when there is one); its own weights come back after."""
        if self.count == 0:
            yield
            return
        params = dict(self.module.named_parameters())
        saved = {name: p.detach().clone() for name, p in params.items()}
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(self._average[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in params.items():
                    p.copy_(saved[name])
