"""Linear-chain conditional random field over tag sequences (Lafferty et al., 2001; Lample et al., 2016).

score(y) = start[y_1] + sum_t emit[t, y_t] + sum_{t>1} trans[y_{t-1}, y_t] + end[y_n]
loss     = log Z - score(gold),  log Z = logsumexp over all K^n tag sequences (forward algorithm)
decode   = argmax_y score(y)                                                (Viterbi)

Batched over left-aligned padded sentences: masked steps leave the forward/Viterbi state unchanged. Every
sentence must have at least one token. Optional ``allowed`` transitions (e.g. BIO: no O -> I-PER) get a large
negative score in training and decoding alike, so forbidden paths never win.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

FORBIDDEN = -1e4  # exp(-1e4) == 0 in float32, but stays finite so gradients never become NaN


class ConditionalRandomField(nn.Module):
    """Transition, start and end scores for ``num_tags`` tags.

    Args:
        num_tags: K.
        allowed: optional (K + 2, K + 2) bool, ``allowed[i, j]`` = tag i may be followed by tag j; index K is
            the start and K + 1 the end of the sentence (see :func:`bio_allowed_transitions`).
    """

    def __init__(self, num_tags: int, allowed: torch.Tensor | None = None) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # (K, K) [from, to]
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))
        nn.init.xavier_normal_(self.transitions)
        if allowed is None:
            allowed = torch.ones(num_tags + 2, num_tags + 2, dtype=torch.bool)
        penalty = torch.where(allowed, 0.0, FORBIDDEN)
        self.register_buffer("_transition_penalty", penalty[:num_tags, :num_tags].clone(), persistent=False)
        self.register_buffer("_start_penalty", penalty[num_tags, :num_tags].clone(), persistent=False)
        self.register_buffer("_end_penalty", penalty[:num_tags, num_tags + 1].clone(), persistent=False)

    def _scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (
            self.transitions + self._transition_penalty,
            self.start + self._start_penalty,
            self.end + self._end_penalty,
        )

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """emissions (B, T, K), mask (B, T) -> log Z (B,)."""
        transitions, start, end = self._scores()
        alpha = start + emissions[:, 0]  # (B, K)
        for t in range(1, emissions.shape[1]):
            # alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + trans[i, j]) + emit[t, j]
            step = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + emissions[:, t]  # (B, K)
            alpha = torch.where(mask[:, t : t + 1], step, alpha)
        return torch.logsumexp(alpha + end, dim=1)

    def sequence_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """emissions (B, T, K), tags (B, T), mask (B, T) -> score of each gold sequence (B,)."""
        transitions, start, end = self._scores()
        mask_f = mask.to(emissions.dtype)
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
        moved = transitions[tags[:, :-1], tags[:, 1:]]  # (B, T-1)
        last = tags.gather(1, (mask.sum(1, keepdim=True) - 1).clamp(min=0)).squeeze(1)  # (B,)
        return start[tags[:, 0]] + (emitted * mask_f).sum(1) + (moved * mask_f[:, 1:]).sum(1) + end[last]

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood of the gold tags, per sentence (B,)."""
        return self.log_partition(emissions, mask) - self.sequence_score(emissions, tags, mask)

    @torch.no_grad()
    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """emissions (B, T, K), mask (B, T) -> the best tag sequence of each sentence (its length, no padding)."""
        transitions, start, end = self._scores()
        batch, time, _ = emissions.shape
        best = start + emissions[:, 0]  # (B, K)
        backpointers = []
        for t in range(1, time):
            candidates = best.unsqueeze(2) + transitions  # (B, K_from, K_to)
            step_best, step_from = candidates.max(dim=1)  # (B, K)
            keep = mask[:, t : t + 1]
            best = torch.where(keep, step_best + emissions[:, t], best)
            # At a padded step every tag points to itself, so the back-trace passes through unchanged.
            identity = torch.arange(self.num_tags, device=emissions.device).expand(batch, -1)
            backpointers.append(torch.where(keep, step_from, identity))
        tag = (best + end).argmax(dim=1)  # (B,)
        path = [tag]
        for pointers in reversed(backpointers):
            tag = pointers.gather(1, tag.unsqueeze(1)).squeeze(1)
            path.append(tag)
        path_tensor = torch.stack(path[::-1], dim=1).cpu()  # (B, T)
        lengths = mask.sum(1).tolist()
        return [path_tensor[b, :n].tolist() for b, n in enumerate(lengths)]


def is_bio(tags: Sequence[str]) -> bool:
    """Every tag is ``O``, ``B-X`` or ``I-X`` (only then do :func:`bio_allowed_transitions` apply)."""
    return all(t == "O" or (t[:2] in ("B-", "I-") and len(t) > 2) for t in tags)


def bio_allowed_transitions(tags: Sequence[str]) -> torch.Tensor:
    """(K + 2, K + 2) bool for BIO/IOB2 tags: ``I-X`` only after ``B-X`` or ``I-X``, never first."""
    k = len(tags)
    allowed = torch.ones(k + 2, k + 2, dtype=torch.bool)
    allowed[:, k] = False  # nothing goes back to the start
    allowed[k + 1, :] = False  # nothing leaves the end
    for j, tag in enumerate(tags):
        if not tag.startswith("I-"):
            continue
        entity = tag[2:]
        for i, previous in enumerate(tags):
            allowed[i, j] = previous in (f"B-{entity}", f"I-{entity}")
        allowed[k, j] = False
    return allowed
