"""Lazy reading of a text file of tokenised sentences, one per line, with line numbers for error messages.

Lines are split on ``\\n`` only (as ``allennlp elmo`` and bilm-tf do), then tokenised on whitespace. An empty
line is an empty sentence; it keeps its key so keys stay aligned with line numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError

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
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such input file")
    with open(path, "rb") as f:
        for index, raw in enumerate(f):
            try:
                text = raw.decode("utf-8", errors=errors)
            except UnicodeDecodeError as e:
                raise InputFileError(
                    f"{path}, line {index + 1}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                    "fix the file or pass --errors replace"
                ) from e
            yield Line(index, text.split())

