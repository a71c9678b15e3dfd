"""Per-layer token vectors of many sentences, computed once with the :class:`~elmo.embedding.embedder.Embedder` and
kept in memory, so every probe (each layer, the mix) trains on the same frozen features."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elmo.embedding.embedder import Embedder


@dataclass(frozen=True)
class Activations:
    """The vectors of selected tokens, all layers: ``vectors[i]`` belongs to ``tokens[i]`` = (sentence, position)."""

    vectors: np.ndarray
    """(N, L + 1, 2P) float32; layer 0 is the token layer (duplicated for both directions)."""
    tokens: np.ndarray
    """(N, 2) int64: sentence number and position in it of each row."""

    @property
    def num_layers(self) -> int:
        return self.vectors.shape[1]

    def layer(self, index: int) -> np.ndarray:
        """(N, 2P) vectors of one layer (negative: counted from the top)."""
        return self.vectors[:, index]


def compute_activations(
    embedder: Embedder,
    sentences: Sequence[list[str]],
    keep: Sequence[Sequence[int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Activations:
    """Embed ``sentences`` once; keep every token's vectors, or only positions ``keep[i]`` of sentence i.

    ``keep`` saves memory when a probe needs a few tokens of long contexts (word senses: the target word only).
    """
    if keep is not None and len(keep) != len(sentences):
        raise ValueError(f"keep has {len(keep)} entries for {len(sentences)} sentences")
    dim = (embedder.num_layers, embedder.output_dim)
    total = sum(len(s) for s in sentences) if keep is None else sum(len(k) for k in keep)
    vectors = np.empty((total, *dim), dtype=np.float32)  # (N, L+1, 2P)
    tokens = np.empty((total, 2), dtype=np.int64)
    row = 0
    for i, layers in enumerate(embedder.embed_sentences(sentences, progress=progress)):  # (L+1, n, 2P)
        positions = np.arange(layers.shape[1]) if keep is None else np.asarray(keep[i], dtype=np.int64)
        vectors[row: row + len(positions)] = layers[:, positions].transpose(1, 0, 2)
        tokens[row: row + len(positions), 0] = i
        tokens[row: row + len(positions), 1] = positions
        row += len(positions)
    return Activations(vectors, tokens)
