"""Lazy reading of the sentences to embed, with line numbers for error messages.

Two input formats (``elmo embed --input-format``):

- ``text`` (default): one tokenised sentence per line, split on ``\\n`` only (as ``allennlp elmo`` and bilm-tf do),
  then tokenised on whitespace. An empty line is an empty sentence; it keeps its key so keys stay aligned with line
  numbers.
- ``conllu``: the FORM column of each sentence's syntactic words (``elmo.conllu``: multiword-token ranges and empty
  nodes skipped). A sentence's key is its 0-based position among the file's sentences (the ``# sent_id`` comment
  is not used: not every file has one, and an HDF5 name cannot hold every string it may hold, e.g. ``/``).

Either way the file is opened like every user text (``elmo.runtime.text_files``: a byte-order mark dropped, gzip,
``-`` for stdin).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from elmo.conllu import read_conllu
from elmo.runtime.text_files import read_text_lines

ENCODING_ERRORS = ("strict", "replace")
INPUT_FORMATS = ("text", "conllu")
_ADVICE = "fix the file or pass --errors replace"


@dataclass(frozen=True)
class Line:
    index: int
    """0-based line number (text) or sentence number (CoNLL-U): the dataset key."""
    tokens: list[str]
    line: int = 0
    """1-based line number where the sentence starts, for error messages (0: index + 1)."""

    @property
    def line_number(self) -> int:
        return self.line or self.index + 1


def read_lines(path: str | os.PathLike, errors: str = "strict") -> Iterator[Line]:
    """Yield every line of ``path`` as tokens, lazily.

    Args:
        errors: "strict" raises :class:`InputFileError` naming the first line that is not UTF-8; "replace" turns
            bad bytes into U+FFFD and carries on.
    """
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"errors must be one of {ENCODING_ERRORS}, got {errors!r}")
    for number, text in read_text_lines(path, errors, "input file", advice=_ADVICE):
        yield Line(number - 1, text.split(), number)


def read_sentences(path: str | os.PathLike, input_format: str = "text", errors: str = "strict") -> Iterator[Line]:
    """Yield the sentences of ``path`` in ``input_format`` ("text" or "conllu"), lazily, keyed as the module says."""
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if input_format == "text":
        yield from read_lines(path, errors)
        return
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"errors must be one of {ENCODING_ERRORS}, got {errors!r}")
    for sentence in read_conllu(path, errors):
        yield Line(sentence.index, sentence.forms, sentence.line)
