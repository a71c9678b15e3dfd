"""Token-layer vectors of the words in a batch, each distinct word encoded once, frequent words cached.

The char CNN + highway + projection is a function of a word's characters alone, so a batch needs it once per
distinct word, and a cache can keep the vectors of words already seen for later batches (``--vocab-cache N``).
The cache takes words in the order they first appear until it holds N; in running text the frequent words
arrive first, so it ends up holding (mostly) the frequent ones without a counting pass over the input.
"""

from __future__ import annotations

import numpy as np
import torch

from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.manylangs_encoder import ManyLangsTokenEncoder
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids

ENCODE_CHUNK = 4096
"""Distinct words per char-CNN call."""

TOKEN_ENCODERS = (CharCNNEncoder, ManyLangsTokenEncoder)
"""Encoders whose vector of a word depends on the word alone: bilm-tf's char CNN, ELMoForManyLangs' embedder."""


def token_input_ids(encoder: CharCNNEncoder | ManyLangsTokenEncoder, words: list[str]) -> np.ndarray:
    """The encoder's inputs for ``words``, (N, W'): bilm-tf's byte ids, or the ManyLangs model's own lexicon."""
    if isinstance(encoder, ManyLangsTokenEncoder):
        if encoder.lexicon is None:
            raise ValueError("this ELMoForManyLangs biLM has no lexicon (load it with elmo.formats.model_files)")
        return encoder.lexicon.token_ids(words)
    return shifted_char_ids(words, encoder.config.max_characters_per_token)


class TokenVectors:
    """Maps words to token-layer vectors (P,) with an optional cache of ``capacity`` words.

    Args:
        encoder: the biLM's char CNN (in the dtype and on the device it will run).
        capacity: words to keep across calls (0: no cache, every batch encodes its own words).
    """

    def __init__(self, encoder: CharCNNEncoder | ManyLangsTokenEncoder, capacity: int = 0) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.encoder = encoder
        self.capacity = capacity
        self._rows: dict[str, int] = {}
        self._table: torch.Tensor | None = None  # (capacity, P), filled from row 0 up
        self.boundary_tokens = getattr(encoder, "boundary_tokens", (BOS_TOKEN, EOS_TOKEN))
        """The sentence-boundary tokens of the model's family (``<S>``/``</S>``; ``<bos>``/``<eos>``)."""

    def __call__(self, words: list[str], ids: np.ndarray | None = None) -> torch.Tensor:
        """Distinct ``words`` -> (len(words), P), in the same order. ``ids``: their encoder inputs
        (:func:`token_input_ids`, (len(words), W)) where the caller made them already (the embedder, on another
        thread); the cache is looked up and filled here either way."""
        missing = [w for w in words if w not in self._rows]
        if ids is not None and len(missing) < len(words):
            ids = ids[[i for i, w in enumerate(words) if w not in self._rows]]  # (M, W)
        fresh = self._encode(missing, ids)  # (M, P)
        if len(missing) == len(words):
            self._remember(missing, fresh)
            return fresh
        assert self._table is not None
        hits = [(i, self._rows[w]) for i, w in enumerate(words) if w in self._rows]
        out = fresh.new_empty(len(words), fresh.shape[1])  # (U, P)
        device = fresh.device
        hit_positions = torch.tensor([i for i, _ in hits], device=device)
        out[hit_positions] = self._table[torch.tensor([r for _, r in hits], device=device)]
        if missing:
            out[torch.tensor([i for i, w in enumerate(words) if w not in self._rows], device=device)] = fresh
        self._remember(missing, fresh)
        return out

    def _encode(self, words: list[str], ids: np.ndarray | None = None) -> torch.Tensor:
        device = next(self.encoder.parameters()).device
        if not words:
            return torch.zeros(0, self.encoder.output_dim, device=device, dtype=self._dtype())
        ids = token_input_ids(self.encoder, words) if ids is None else ids
        inputs = torch.from_numpy(ids).to(device)  # (M, W)
        return torch.cat([self.encoder.encode_tokens(part) for part in inputs.split(ENCODE_CHUNK)])  # (M, P)

    def _remember(self, words: list[str], vectors: torch.Tensor) -> None:
        free = self.capacity - len(self._rows)
        if free <= 0 or not words:
            return
        if self._table is None:
            self._table = vectors.new_zeros(self.capacity, vectors.shape[1])
        start = len(self._rows)
        take = min(free, len(words))
        self._table[start : start + take] = vectors[:take]
        self._rows.update((w, start + i) for i, w in enumerate(words[:take]))

    def _dtype(self) -> torch.dtype:
        return next(self.encoder.parameters()).dtype
