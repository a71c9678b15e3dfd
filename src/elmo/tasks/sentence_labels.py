"""Sentence classification files: ``label<TAB>sentence`` per line, the sentence already tokenised by spaces.

    3<TAB>It 's a lovely film with lovely performances by Buy and Accorsi .

Predictions are written as ``gold<TAB>predicted<TAB>sentence``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError
from elmo.runtime.atomic_files import write_text_atomic
from elmo.runtime.text_files import read_text_lines


@dataclass
class LabelledSentence:
    label: str
    words: list[str]
    line: int


def read_labelled_sentences(path: str | os.PathLike) -> list[LabelledSentence]:
    """Read every non-blank line; a line without a TAB, label or words raises naming file and line."""
    path = Path(path)
    sentences = []
    for number, line in read_text_lines(path):
        if not line.strip():
            continue
        label, tab, text = line.partition("\t")
        if not tab:
            raise InputFileError(f"{path}, line {number}: expected 'label<TAB>sentence', found no TAB")
        if not label.strip():
            raise InputFileError(f"{path}, line {number}: empty label")
        words = text.split()
        if not words:
            raise InputFileError(f"{path}, line {number}: empty sentence")
        sentences.append(LabelledSentence(label.strip(), words, number))
    if not sentences:
        raise InputFileError(f"{path}: no sentences found")
    return sentences


def write_label_predictions(
    path: str | os.PathLike, sentences: Sequence[LabelledSentence], predicted: Sequence[str]
) -> None:
    lines = [f"{s.label}\t{p}\t{' '.join(s.words)}" for s, p in zip(sentences, predicted, strict=True)]
    write_text_atomic(path, "\n".join(lines) + "\n")
