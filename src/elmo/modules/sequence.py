"""Helpers for left-aligned padded batches: masks, per-row reversal, sentence boundaries."""

from __future__ import annotations

import torch


def mask_from_ids(ids: torch.Tensor) -> torch.Tensor:
    """(B, T, W) character ids or (B, T) token ids -> (B, T) bool, True where a token exists (id 0 pads)."""
    return (ids > 0).any(dim=-1) if ids.dim() == 3 else ids > 0


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps and leave padding in place (TF ``reverse_sequence``).

    x: (B, T, ...) -> (B, T, ...). Applying it twice gives back ``x``.
    """
    batch, time = x.shape[:2]
    steps = torch.arange(time, device=x.device).unsqueeze(0)  # (1, T)
    lengths = lengths.unsqueeze(1)  # (B, 1)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)  # (B, T)
    index = index.view(batch, time, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


def add_sentence_boundaries(ids: torch.Tensor, bos: torch.Tensor, eos: torch.Tensor) -> torch.Tensor:
    """Wrap every row in ``<S> ... </S>``: (B, T[, W]) -> (B, T + 2[, W]).

    ``bos``/``eos`` are one token's ids, shape ``ids.shape[2:]``. Rows keep their padding at the end; an empty row
    becomes ``<S> </S>``.
    """
    batch, time = ids.shape[:2]
    lengths = mask_from_ids(ids).sum(dim=1)  # (B,)
    out = ids.new_zeros((batch, time + 2, *ids.shape[2:]))
    out[:, 1 : time + 1] = ids
    out[:, 0] = bos
    out[torch.arange(batch, device=ids.device), lengths + 1] = eos
    return out


def remove_sentence_boundaries(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the first and last real step of each row: x (B, T, ...) with mask (B, T) -> (B, T - 2, ...), mask."""
    batch, time = mask.shape
    lengths = mask.sum(dim=1)  # (B,)
    new_mask = torch.arange(time - 2, device=mask.device).unsqueeze(0) < (lengths - 2).unsqueeze(1)  # (B, T-2)
    out = x[:, 1 : time - 1] * new_mask.view(batch, time - 2, *([1] * (x.dim() - 2))).to(x.dtype)
    return out, new_mask
