"""Lazy reading of a text file of tokenised sentences, one per line, with line numbers for error messages.

Lines are split on ``\\n`` only (as ``allennlp elmo`` and bilm-tf do), then tokenised on whitespace. An empty
line is an empty sentence; it keeps its key so keys stay aligned with line numbers. The file is opened like every
user text (``elmo.runtime.text_files``: a byte-order mark dropped, gzip, ``-`` for stdin).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from elmo.runtime.text_files import read_text_lines

ENCODING_ERRORS = ("strict", "replace")


@dataclass(frozen=True)
class Line:
    index: int
    """0-based line number: the dataset key."""
    tokens: list[str]


def read_lines(path: str | os.PathLike, errors: str = "strict") -> Iterator[Line]:
    """Yield every line of ``path`` as tokens, lazily.

    Args:
        errors: "strict" raises :class:`InputFileError` naming the first line that is not UTF-8; "replace" turns
            bad bytes into U+FFFD and carries on.
    """
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"errors must be one of {ENCODING_ERRORS}, got {errors!r}")
    for number, text in read_text_lines(path, errors, "input file", advice="fix the file or pass --errors replace"):
        yield Line(number - 1, text.split())
