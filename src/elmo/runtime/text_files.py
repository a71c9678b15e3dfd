"""User text, opened the same way by every reader (embed input, corpora, vocabularies, task data).

One rule set, so a file that one command reads, every command reads: UTF-8 split on ``\\n`` only; a leading
byte-order mark (Windows editors write one) is dropped; gzip is read whether the name ends in ``.gz`` or the bytes
start with the gzip magic; ``-`` is stdin, and pipes (``/dev/stdin``, ``<(...)``) are read like files. Every error
is an :class:`InputFileError` naming the file (and line). JSON in a user's file is read by :func:`parse_json`, whose
errors name the file too, whatever ``json.loads`` raises.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from elmo.errors import ElmoError, InputFileError
from elmo.runtime.atomic_files import first_line

STDIN = "-"
BOM = "\ufeff"
GZIP_MAGIC = b"\x1f\x8b"


def display_name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == STDIN else str(path)


def is_stream(path: str | os.PathLike) -> bool:
    """Stdin or a pipe: it can be read once only (no --resume, no second epoch)."""
    return str(path) == STDIN or (os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path))


def check_input(path: str | os.PathLike, what: str = "file") -> None:
    """Raise a one-line error unless ``path`` can be opened as text: it exists and is not a directory."""
    if str(path) == STDIN:
        return
    if os.path.isdir(path):
        raise InputFileError(f"{path}: is a directory, not a text file")
    if not os.path.exists(path):
        raise InputFileError(f"{path}: no such {what}")


@contextmanager
def _open_bytes(path: str | os.PathLike) -> Iterator[BinaryIO]:
    if str(path) == STDIN:
        yield sys.stdin.buffer  # not closed: it is the process's
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputFileError(f"{path}: cannot read ({e.strerror})") from e
    with f:
        yield f


@contextmanager
def raw_lines(path: str | os.PathLike) -> Iterator[Iterator[bytes]]:
    """The lines of a file (not a stream: it is read once) as bytes, unpacked like :func:`read_text_lines`'s but
    not decoded: for counting them cheaply (a progress bar's total). Errors are the plain OSError, EOFError or
    zlib.error: the reader that follows gives the user's error."""
    with open(path, "rb") as raw:
        packed = str(path).endswith(".gz") or raw.peek(2)[:2] == GZIP_MAGIC
        yield gzip.GzipFile(fileobj=raw, mode="rb") if packed else raw


def read_text_lines(
    path: str | os.PathLike, errors: str = "strict", what: str = "file", advice: str = ""
) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line ending) for every line of ``path``, lazily.

    Args:
        errors: "strict" raises naming the first line that is not UTF-8; "replace" turns bad bytes into U+FFFD.
        what: the noun of the "no such ..." error.
        advice: appended to the not-UTF-8 error (e.g. which flag to pass).
    """
    check_input(path, what)
    name = display_name(path)
    number = 0
    with _open_bytes(path) as raw:
        try:
            packed = str(path).endswith(".gz") or raw.peek(2)[:2] == GZIP_MAGIC  # type: ignore[attr-defined]
            lines = gzip.GzipFile(fileobj=raw, mode="rb") if packed else raw
            for number, data in enumerate(lines, start=1):
                try:
                    text = data.decode("utf-8", errors=errors)
                except UnicodeDecodeError as e:
                    raise InputFileError(
                        f"{name}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start})"
                        + (f"; {advice}" if advice else "")
                    ) from e
                if number == 1:
                    text = text.removeprefix(BOM)
                yield number, text.rstrip("\r\n")
        except EOFError as e:
            raise InputFileError(f"{name}: truncated gzip file (ends inside line {number + 1})") from e
        except (gzip.BadGzipFile, zlib.error) as e:
            raise InputFileError(f"{name}: corrupt gzip data after line {number} ({e})") from e
        except OSError as e:
            raise InputFileError(f"{name}: cannot read ({e.strerror or e})") from e


def parse_json(data: bytes | str, where: str, error: type[ElmoError] = InputFileError) -> Any:
    """The JSON value of a user's file (bytes: UTF-8, a byte-order mark dropped), or one ``error`` line naming
    ``where``: not UTF-8, invalid JSON (its line), or JSON past Python's limits (:func:`json_limit`)."""
    try:
        return json.loads(data.decode("utf-8-sig") if isinstance(data, bytes) else data)
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise error(f"{where}: invalid JSON at line {e.lineno}: {e.msg}") from e
    except (RecursionError, ValueError) as e:
        raise error(f"{where}: invalid JSON: {json_limit(e)}") from e


def json_limit(error: RecursionError | ValueError) -> str:
    """What ``json.loads`` refuses besides bad syntax, said in a few words: nesting deeper than its parser recurses
    (a RecursionError), a number of more digits than ``int()`` converts (a ValueError, 4,300 digits by default)."""
    if isinstance(error, RecursionError):
        return "nested deeper than the JSON parser goes"
    if str(error).startswith("Exceeds the limit"):
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        return f"a number of more than {limit:,} digits"
    return first_line(error)
