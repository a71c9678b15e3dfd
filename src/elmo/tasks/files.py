"""File helpers of the task models: checksums and line-numbered reading (atomic writes: elmo.runtime.atomic_files)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from elmo.errors import InputFileError


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without the newline); a missing file or bad UTF-8 raises naming file and line."""
    if not path.is_file():
        raise InputFileError(f"{path}: no such file")
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise InputFileError(f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start})") from e
