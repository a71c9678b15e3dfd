"""CoNLL column files for tagging: one token per line, word first, tag last, a blank line between sentences.

    EU NNP B-NP B-ORG          <- word ... tag (any number of columns in between, space or tab separated)
    rejects VBZ B-VP O
                               <- blank line ends a sentence
    -DOCSTART- -X- -X- O       <- document markers are skipped

Predictions are written in the ``conlleval`` layout ``word gold predicted``, one token per line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError
from elmo.runtime.atomic_files import write_text_atomic
from elmo.runtime.text_files import read_text_lines

DOCSTART = "-DOCSTART-"


@dataclass
class TaggedSentence:
    words: list[str]
    tags: list[str]
    line: int
    """Line number of the sentence's first token, for error messages."""


def read_conll(path: str | os.PathLike) -> list[TaggedSentence]:
    """Read every sentence of a CoNLL file (word in the first column, tag in the last)."""
    path = Path(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    n_columns = None
    for number, line in read_text_lines(path):
        columns = line.split()
        if not columns or columns[0] == DOCSTART:
            if words:
                sentences.append(TaggedSentence(words, tags, first_line))
                words, tags = [], []
            continue
        if len(columns) < 2:
            raise InputFileError(f"{path}, line {number}: expected 'word ... tag' (2 or more columns), got {line!r}")
        if n_columns is not None and len(columns) != n_columns:
            raise InputFileError(f"{path}, line {number}: {len(columns)} columns, earlier lines have {n_columns}")
        n_columns = len(columns)
        if not words:
            first_line = number
        words.append(columns[0])
        tags.append(columns[-1])
    if words:
        sentences.append(TaggedSentence(words, tags, first_line))
    if not sentences:
        raise InputFileError(f"{path}: no sentences found")
    return sentences


def write_conll_predictions(
    path: str | os.PathLike, sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]]
) -> None:
    """``word gold predicted`` per token, a blank line after each sentence (readable by ``conlleval``)."""
    lines = []
    for sentence, tags in zip(sentences, predicted, strict=True):
        lines.extend(f"{w} {g} {p}" for w, g, p in zip(sentence.words, sentence.tags, tags, strict=True))
        lines.append("")
    write_text_atomic(path, "\n".join(lines) + "\n")
