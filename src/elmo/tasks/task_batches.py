"""Tokenised sentences -> one padded batch of tensors for a task model (pure functions, no model state)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from elmo.tasks.elmo_features import ActivationCache, pad_layers
from elmo.tasks.word_index import WordIndex
from elmo.text.char_encoding import batch_to_ids


@dataclass
class TaskBatch:
    words: torch.Tensor
    """(B, T) word ids, 0 pads."""
    chars: torch.Tensor
    """(B, T, W) +1-shifted character ids for the task's own char-CNN."""
    mask: torch.Tensor
    """(B, T) bool."""
    elmo_ids: torch.Tensor | None = None
    """(B, T, 50) character ids for an on-the-fly biLM."""
    elmo_layers: torch.Tensor | None = None
    """(B, L+1, T, D) cached biLM activations."""
    targets: torch.Tensor | None = None
    """(B, T) tag ids (tagger) or (B,) class ids (classifier)."""

    def to(self, device: torch.device | str) -> TaskBatch:
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return TaskBatch(**{k: v.to(device) if v is not None else None for k, v in moved.items()})


def make_batch(
    sentences: Sequence[Sequence[str]],
    word_index: WordIndex,
    max_characters_per_token: int,
    elmo_mode: str | None = None,
    cache: ActivationCache | None = None,
    targets: torch.Tensor | None = None,
) -> TaskBatch:
    """Build a batch; ``elmo_mode`` is None (baseline), ``"cached"`` (needs ``cache``) or ``"ids"`` (on the fly)."""
    time = max(len(s) for s in sentences)
    words = np.zeros((len(sentences), time), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        words[b, : len(sentence)] = word_index.encode(sentence)
    words_t = torch.from_numpy(words)
    batch = TaskBatch(
        words=words_t,
        chars=batch_to_ids(sentences, max_characters_per_token),
        mask=words_t > 0,
        targets=targets,
    )
    if elmo_mode == "cached":
        if cache is None:
            raise ValueError("make_batch: elmo_mode='cached' needs an ActivationCache")
        batch.elmo_layers = pad_layers([cache.get(s) for s in sentences])
    elif elmo_mode == "ids":
        batch.elmo_ids = batch_to_ids(sentences)
    elif elmo_mode is not None:
        raise ValueError(f"elmo_mode must be None, 'cached' or 'ids', got {elmo_mode!r}")
    return batch


def tag_targets(tag_sequences: Sequence[Sequence[str]], tag_ids: dict[str, int]) -> torch.Tensor:
    """(B, T) tag ids, 0 at padding (masked out by the CRF)."""
    time = max(len(t) for t in tag_sequences)
    out = torch.zeros(len(tag_sequences), time, dtype=torch.long)
    for b, tags in enumerate(tag_sequences):
        out[b, : len(tags)] = torch.tensor([tag_ids[t] for t in tags])
    return out
