"""Build a training vocabulary from word counts (``elmo vocab``).

The sampled softmax draws negatives from a log-uniform (Zipfian) distribution over word ids, which only makes
sense when ids are sorted by descending frequency. So the file is ``<S>``, ``</S>``, ``<UNK>``, then words by
descending count, ties broken by the word itself (code-point order) so the output never depends on input order.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from elmo.errors import ConfigError
from elmo.text.sentences import read_sentences
from elmo.text.vocab import SPECIAL_TOKENS, Vocabulary


def count_words(paths: Iterable[str | os.PathLike]) -> Counter[str]:
    """Token counts over the shards, streaming (a shard is never held in memory)."""
    counts: Counter[str] = Counter()
    for path in paths:
        for line in read_sentences(path):
            counts.update(line.tokens)
    return counts


def vocabulary_from_counts(counts: Counter[str], min_count: int = 1, max_size: int | None = None) -> Vocabulary:
    """Specials first, then words with ``count >= min_count`` by descending count; at most ``max_size`` lines."""
    if min_count < 1:
        raise ConfigError(f"--min-count must be >= 1, got {min_count}")
    if max_size is not None and max_size < len(SPECIAL_TOKENS):
        raise ConfigError(f"--max-size must be >= {len(SPECIAL_TOKENS)} (the special tokens), got {max_size}")
    words = [w for w, n in counts.items() if n >= min_count and w not in SPECIAL_TOKENS]
    words.sort(key=lambda w: (-counts[w], w))
    if max_size is not None:
        words = words[: max_size - len(SPECIAL_TOKENS)]
    return Vocabulary([*SPECIAL_TOKENS, *words])
