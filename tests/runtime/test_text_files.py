"""The one opener of user text: byte-order mark, gzip, stdin and pipes, and its one-line errors."""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
import threading

import pytest

from elmo.errors import InputFileError
from elmo.runtime.text_files import is_stream, read_text_lines

TEXT = "the cat\r\n\ufeffsat .\n"  # a mark anywhere but the start is text (a zero-width no-break space)
LINES = [(1, "the cat"), (2, "\ufeffsat .")]


def _lines(path) -> list[tuple[int, str]]:
    return list(read_text_lines(path))


def test_a_leading_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(("\ufeff" + TEXT).encode())
    assert _lines(path) == LINES


def test_gzip_is_read_by_name_and_by_content(tmp_path):
    for name in ("c.txt.gz", "no-suffix"):
        path = tmp_path / name
        path.write_bytes(gzip.compress(("\ufeff" + TEXT).encode()))
        assert _lines(path) == LINES, name


def test_broken_gzip_names_the_file(tmp_path):
    data = gzip.compress(("x\n" * 1000).encode())
    truncated, corrupt = tmp_path / "t.gz", tmp_path / "c.gz"
    truncated.write_bytes(data[: len(data) // 2])
    corrupt.write_bytes(data[:20] + bytes(20) + data[40:])
    with pytest.raises(InputFileError, match=r"t\.gz: truncated gzip file"):
        _lines(truncated)
    with pytest.raises(InputFileError, match=r"c\.gz: corrupt gzip data"):
        _lines(corrupt)


def test_dash_is_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(("\ufeff" + TEXT).encode()))))
    assert is_stream("-")
    assert _lines("-") == LINES


def test_bad_utf8_on_stdin_names_stdin_and_the_line(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(b"ok\n\xff\n"))))
    with pytest.raises(InputFileError, match=r"^<stdin>, line 2: not valid UTF-8 .*; pass --x$"):
        list(read_text_lines("-", advice="pass --x"))


def test_a_pipe_is_read_like_a_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(gzip.compress(TEXT.encode())))
    writer.start()
    assert is_stream(fifo)
    assert _lines(fifo) == LINES
    writer.join()


def test_missing_file_and_directory_are_named(tmp_path):
    with pytest.raises(InputFileError, match=r"nope\.txt: no such corpus file$"):
        list(read_text_lines(tmp_path / "nope.txt", what="corpus file"))
    with pytest.raises(InputFileError, match=f"^{re.escape(str(tmp_path))}: is a directory, not a text file$"):
        _lines(tmp_path)
    assert not is_stream(tmp_path) and not is_stream(tmp_path / "nope.txt")
