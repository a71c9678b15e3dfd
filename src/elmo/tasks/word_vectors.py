"""Context-independent word vectors for the baseline, trained with gensim (the tasks extra) on the biLM's own corpus.

The paper's baselines use GloVe; we train word2vec (or fastText) on the same unlabelled text as the biLM, so the
baseline and +ELMo models see exactly the same data. Vectors are stored in the plain word2vec text format
(``count dim`` header, then ``word v1 ... vd``): readable by gensim and by anything else, with no pickling.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from elmo.errors import InputFileError
from elmo.runtime.atomic_files import write_atomic
from elmo.runtime.extras import require
from elmo.runtime.text_files import check_input, is_stream, read_text_lines

log = logging.getLogger(__name__)


class _Corpus:
    """Re-iterable whitespace-tokenised sentences of a text file (plain or .gz), one per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[list[str]]:
        for _, line in read_text_lines(self.path):
            if words := line.split():
                yield words


def train_word_vectors(
    corpus: str | os.PathLike,
    output: str | os.PathLike,
    dim: int = 100,
    algorithm: str = "word2vec",
    window: int = 5,
    min_count: int = 2,
    epochs: int = 5,
    seed: int = 0,
    workers: int = 2,
) -> int:
    """Train skip-gram vectors on ``corpus`` and write them to ``output``; returns the vocabulary size."""
    models = require("gensim.models", "tasks", "training word vectors")  # heavy import, only needed here

    corpus = Path(corpus)
    check_input(corpus, "corpus file")
    if is_stream(corpus):
        raise InputFileError(f"{corpus}: word2vec reads its corpus once per epoch, so it cannot come from stdin or a "
                             "pipe; save it to a file")
    if algorithm not in ("word2vec", "fasttext"):
        raise ValueError(f"algorithm must be 'word2vec' or 'fasttext', got {algorithm!r}")
    model_class = models.Word2Vec if algorithm == "word2vec" else models.FastText
    model = model_class(
        sentences=_Corpus(corpus),
        vector_size=dim,
        window=window,
        min_count=min_count,
        epochs=epochs,
        sg=1,
        seed=seed,
        workers=workers,
    )
    if len(model.wv) == 0:
        raise InputFileError(f"{corpus}: no word occurs {min_count} times; nothing to train on")
    write_atomic(output, lambda tmp: model.wv.save_word2vec_format(tmp, binary=False))
    log.info("trained %d %s vectors of dim %d on %s", len(model.wv), algorithm, dim, corpus)
    return len(model.wv)


def read_word_vectors(path: str | os.PathLike, max_words: int | None = None) -> tuple[list[str], np.ndarray]:
    """Read word2vec text format -> (words, float32 array (V, D)); the first ``max_words`` (most frequent) only."""
    path = Path(path)
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim = None
    for number, line in read_text_lines(path):
        parts = line.rstrip().split(" ")
        if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
            dim = int(parts[1])
            continue
        if max_words is not None and len(words) >= max_words:
            break
        if dim is None:
            dim = len(parts) - 1
        if len(parts) != dim + 1:
            raise InputFileError(f"{path}, line {number}: expected a word and {dim} numbers, got {len(parts)} fields")
        try:
            rows.append(np.asarray(parts[1:], dtype=np.float32))
        except ValueError as e:
            raise InputFileError(f"{path}, line {number}: not a number in the vector ({e})") from e
        words.append(parts[0])
    if not words:
        raise InputFileError(f"{path}: no word vectors found")
    return words, np.stack(rows)
