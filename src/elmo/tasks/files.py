"""Atomic file writes: a crash never leaves a half-written checkpoint, result or predictions file."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    _atomic(Path(path), write)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def write_with_atomic(path: str | os.PathLike, write) -> None:
    """Call ``write(tmp_path)`` and move the result to ``path``."""
    _atomic(Path(path), write)


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
