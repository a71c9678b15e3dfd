"""Softmax output layers of the biLM language model: full softmax and sampled softmax.

Both directions share one softmax (W (V, P), b (V)), as in bilm-tf. Training uses TF's ``sampled_softmax_loss``
recipe: S distinct negatives per batch for each direction from a log-uniform (Zipfian) sampler over the
frequency-sorted vocabulary, every logit corrected by ``-log(expected count)``, and accidental hits (a negative
that equals the row's target) removed. Evaluation always uses the full softmax.

Log-uniform sampler over ids 0..V-1 (TF ``log_uniform_candidate_sampler``)::

    P(k) = (log(k + 2) - log(k + 1)) / log(V + 1)

Sampling S unique ids takes ``tries`` draws with replacement; the expected count of id k among them is
``1 - (1 - P(k)) ** tries``. When S >= V every id is taken, each with expected count 1, so the sampled loss is
exactly the full softmax loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from elmo.modules.autocast import autocast_suspended
from elmo.modules.softmax_loss import fused_loss

BLOCK_ROWS = 512
"""Rows per block of the fused training losses: a block's logits (512 x K floats, 20 MB for K = 10,000) stay in
the last-level cache."""


class Softmax(nn.Module):
    """The shared output layer: logits = h W^T + b. Initialised like the original (normal, std 1/sqrt(P)).

    ``sparse``: the sampled losses give ``weight`` a sparse gradient holding only the rows of the step's negatives
    and targets (as ``nn.Embedding(sparse=True)``; the optimizer must accept it, see :mod:`elmo.training.optimizer`),
    where the dense one is a (V, P) matrix of mostly zeros that is filled, read by the clip and updated whole every
    step.
    """

    def __init__(self, vocab_size: int, dim: int, sparse: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, dim) / math.sqrt(dim))  # (V, P)
        self.bias = nn.Parameter(torch.zeros(vocab_size))  # (V,)
        self.sparse = sparse

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    def full_loss(self, hidden: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """Cross-entropy over the whole vocabulary: hidden (N, P), targets (N,)."""
        if reduction == "mean" and _needs_gradients(hidden, self.weight):
            return self.full_losses([(hidden, targets)])[0]
        logits = F.linear(hidden, self.weight, self.bias)  # (N, V)
        return F.cross_entropy(logits.float(), targets, reduction=reduction)

    def full_losses(self, parts: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean over parts (hidden (N, P), targets (N,)) of each part's mean cross-entropy, and the (G,) part
        losses (no gradient; for logging). With gradients: fused and blockwise (:mod:`elmo.modules.softmax_loss`),
        each block's elementwise work through ``torch.compile`` when compiling is on."""
        if any(_needs_gradients(hidden, self.weight) for hidden, _ in parts):
            with autocast_suspended(parts[0][0].device) as matmul_dtype:
                return fused_loss(self.weight, self.bias, parts, BLOCK_ROWS, matmul_dtype)
        losses = torch.stack([self.full_loss(hidden, targets) for hidden, targets in parts])
        return losses.mean(), losses

    def sampled_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, sampled: torch.Tensor, expected: torch.Tensor,
        target_expected: torch.Tensor,
    ) -> torch.Tensor:
        """Mean sampled-softmax cross-entropy.

        Args:
            hidden: (N, P).
            targets: (N,) true ids.
            sampled: (S,) distinct negative ids; expected: (S,) their expected counts.
            target_expected: (N,) the expected counts of the targets.
        """
        return self.sampled_losses([(hidden, targets, sampled, expected, target_expected)])[0]

    def sampled_losses(self, parts: Sequence[tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean over parts (the arguments of :meth:`sampled_loss`) of each part's mean sampled-softmax loss, and the
        (G,) part losses (no gradient; for logging). With gradients: fused and blockwise, one pass for all parts
        (compiled as in :meth:`full_losses`); the weight's gradient is sparse when :attr:`sparse` is set."""
        if any(_needs_gradients(part[0], self.weight) for part in parts):
            logged = [(hidden, targets, sampled, expected.log(), target_expected.log())
                      for hidden, targets, sampled, expected, target_expected in parts]
            with autocast_suspended(parts[0][0].device) as matmul_dtype:
                return fused_loss(self.weight, self.bias, logged, BLOCK_ROWS, matmul_dtype, self.sparse)
        losses = torch.stack([self._sampled_loss_plain(*part) for part in parts])
        return losses.mean(), losses

    def _sampled_loss_plain(self, hidden, targets, sampled, expected, target_expected) -> torch.Tensor:
        true_logits = (hidden * self.weight.index_select(0, targets)).sum(-1) + self.bias.index_select(0, targets)
        true_logits = true_logits.float() - target_expected.log()
        sampled_logits = F.linear(hidden, self.weight.index_select(0, sampled), self.bias.index_select(0, sampled))
        sampled_logits = sampled_logits.float() - expected.log()
        hits = targets.unsqueeze(1) == sampled.unsqueeze(0)  # (N, S) accidental hits
        sampled_logits = sampled_logits.masked_fill(hits, float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)  # (N, 1 + S)
        return (torch.logsumexp(logits, dim=1) - true_logits).mean()


def head_losses(
    softmax: Softmax, sampler: LogUniformSampler | None, hiddens: Sequence[torch.Tensor],
    targets: Sequence[torch.Tensor], samples: Sequence[tuple[torch.Tensor, int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The training loss of the biLM's directions at once: hiddens (N, P) and targets (N,) of each, and each
    direction's negatives (ids (S,), draws) from ``sampler``. Returns the mean of the directions' mean losses and
    the (G,) direction losses (no gradient). Full softmax without samples."""
    if samples is None or sampler is None:
        return softmax.full_losses(list(zip(hiddens, targets)))
    parts = []
    for hidden, wanted, (sampled, tries) in zip(hiddens, targets, samples):
        parts.append((hidden, wanted, sampled, sampler.expected_count(sampled, tries),
                      sampler.expected_count(wanted, tries)))
    return softmax.sampled_losses(parts)


def _needs_gradients(hidden: torch.Tensor, weight: torch.Tensor) -> bool:
    """The fused losses compute their gradients up front: only worth it when autograd will ask for them."""
    return torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)


class LogUniformSampler:
    """Draws S distinct ids from the log-uniform distribution, with their expected counts (see module doc)."""

    def __init__(self, vocab_size: int, num_sampled: int) -> None:
        self.vocab_size = vocab_size
        self.num_sampled = num_sampled
        self._log_range = math.log(vocab_size + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.double()
        return (torch.log(ids + 2) - torch.log(ids + 1)) / self._log_range

    def expected_count(self, ids: torch.Tensor, tries: int) -> torch.Tensor:
        """1 - (1 - P(id)) ** tries, computed stably; exactly 1 when every id is sampled."""
        if self.num_sampled >= self.vocab_size:
            return torch.ones(ids.shape, dtype=torch.float32, device=ids.device)
        p = self.probability(ids)
        return (-torch.expm1(tries * torch.log1p(-p))).float()

    def sample(self, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """(S,) distinct ids in draw order and the number of draws it took (CPU tensors)."""
        if self.num_sampled >= self.vocab_size:
            return torch.arange(self.vocab_size), self.vocab_size
        seen = torch.zeros(self.vocab_size, dtype=torch.bool)
        chosen: list[torch.Tensor] = []
        have, tries = 0, 0
        while have < self.num_sampled:
            draws = self._draw(2 * (self.num_sampled - have) + 16, generator)
            first = _first_occurrences(draws, self.vocab_size) & ~seen[draws]
            positions = first.nonzero().squeeze(1)
            need = self.num_sampled - have
            if positions.numel() >= need:
                cut = int(positions[need - 1]) + 1  # draws needed to reach S distinct ids
                draws, first = draws[:cut], first[:cut]
            tries += draws.numel()
            new = draws[first]
            seen[new] = True
            chosen.append(new)
            have += new.numel()
        return torch.cat(chosen), tries

    def _draw(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """n ids with replacement by inverting the CDF: id = floor(exp(u log(V + 1))) - 1."""
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        ids = torch.floor(torch.exp(u * self._log_range)).long() - 1
        return ids.clamp_(0, self.vocab_size - 1)


def _first_occurrences(x: torch.Tensor, size: int) -> torch.Tensor:
    """(n,) bool: True where x[i] does not occur in x[:i], for ids in [0, size): each id's first index from one
    scatter into a table of ``size`` slots (a stable sort of x is much slower on CPU)."""
    positions = torch.arange(x.shape[0], device=x.device)
    first = torch.full((size,), x.shape[0], dtype=torch.long, device=x.device)
    first.scatter_reduce_(0, x, positions, "amin")
    return first[x] == positions
