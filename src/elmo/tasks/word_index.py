"""Word and label indices of a task model, and the initial word-embedding matrix.

Word ids: 0 pads, 1 is unknown, then the pretrained vocabulary, then training words it lacks (randomly
initialised). Lookup falls back to the lower-cased word, so "The" finds "the" when only that was pretrained.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

PAD = "<pad>"
UNK = "<unk>"


class WordIndex:
    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        found = self.ids.get(word)
        if found is None:
            found = self.ids.get(word.lower(), 1)
        return found

    def encode(self, words: Sequence[str]) -> list[int]:
        return [self.id(w) for w in words]


def build_word_index(
    pretrained: Sequence[str], training_sentences: Iterable[Sequence[str]], min_count: int = 1
) -> WordIndex:
    """Pretrained words, then training words seen ``min_count`` times that neither they nor their lower case cover."""
    words = [PAD, UNK, *pretrained]
    known = set(words)
    counts = Counter(w for sentence in training_sentences for w in sentence)
    for word, count in counts.most_common():
        if count >= min_count and word not in known and word.lower() not in known:
            words.append(word)
            known.add(word)
    return WordIndex(words)


def embedding_matrix(index: WordIndex, pretrained_words: Sequence[str], vectors: np.ndarray, seed: int) -> np.ndarray:
    """(V, D): pretrained rows copied, the rest N(0, std of the pretrained vectors), the padding row zero."""
    rng = np.random.default_rng(seed)
    dim = vectors.shape[1]
    matrix = rng.normal(0.0, float(vectors.std()) or 0.1, size=(len(index), dim)).astype(np.float32)
    for word, row in zip(pretrained_words, vectors):
        matrix[index.ids[word]] = row
    matrix[0] = 0.0
    return matrix


class LabelIndex:
    """Tags or class labels <-> ids, in a fixed sorted order so ids do not depend on the data order."""

    def __init__(self, labels: Iterable[str]) -> None:
        self.labels = sorted(set(labels))
        self.ids = {label: i for i, label in enumerate(self.labels)}

    def __len__(self) -> int:
        return len(self.labels)
