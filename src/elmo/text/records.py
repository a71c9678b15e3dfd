"""Records with named fields, read for ``elmo embed``: JSON Lines and Parquet, the forms corpora take when they come
out of a data pipeline (a crawl, PubMed, a Spark or Ray job) rather than as plain text.

A record is one sentence: its ``text_field`` holds the sentence, whitespace-tokenised text or a list of tokens; its
``id_field``, if one is named, keys the record's vectors (and becomes the ``key`` of Parquet output), otherwise the
record's 0-based position does. JSON Lines files are opened like every user text (``elmo.runtime.text_files``:
UTF-8, a byte-order mark dropped, gzip, ``-`` for stdin); blank lines between records are skipped. Parquet files are
read one record batch at a time (pyarrow, the ``parquet`` extra), never whole.

Checked, each a one-line :class:`InputFileError` naming the file and the line (JSONL) or row (Parquet): a line that is
not a JSON object, a record without the text field or with one that is neither a string nor a list of strings, a
missing or null id, a Parquet file without the named column (the error lists the columns it has).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from elmo.errors import InputFileError
from elmo.runtime.atomic_files import first_line
from elmo.runtime.extras import require
from elmo.runtime.text_files import check_input, display_name, json_limit, raw_lines, read_text_lines

JSONL_SUFFIXES = (".jsonl", ".ndjson")
"""File names JSON Lines input is recognised by (``.gz`` after them too)."""
PARQUET_SUFFIX = ".parquet"
BATCH_ROWS = 4096
"""Parquet rows converted to Python at a time."""


@dataclass(frozen=True)
class Record:
    index: int
    """0-based position among the file's records."""
    tokens: list[str]
    line: int
    """1-based line number (JSONL) or row number (Parquet), for error messages."""
    key: str | None
    """The id field's value, as a string; None without an id field."""


def record_format_of(path: str | os.PathLike) -> str | None:
    """``jsonl`` or ``parquet`` when the file name says so (``.jsonl``/``.ndjson``, ``.gz`` after them too;
    ``.parquet``), else None."""
    name = str(path).lower()
    if name.removesuffix(".gz").endswith(JSONL_SUFFIXES):
        return "jsonl"
    return "parquet" if name.endswith(PARQUET_SUFFIX) else None


Split = Callable[[str], list[str]]


def read_jsonl(path: str | os.PathLike, text_field: str = "text", id_field: str | None = None,
               errors: str = "strict", split: Split = str.split) -> Iterator[Record]:
    """Yield the records of a JSON Lines file in file order, lazily; ``split`` tokenises a text field that is a
    string."""
    name = display_name(path)
    index, seen = 0, {}
    for number, text in read_text_lines(path, errors, "input file", advice="fix the file or pass --errors replace"):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputFileError(f"{name}:{number}: not a JSON object ({e.msg} at column {e.colno})") from None
        except (RecursionError, ValueError) as e:
            raise InputFileError(f"{name}:{number}: not a JSON object ({json_limit(e)})") from None
        if not isinstance(record, dict):
            raise InputFileError(f"{name}:{number}: not a JSON object (a JSON {type(record).__name__})")
        where = f"{name}:{number}"
        yield Record(index, _tokens(record.get(text_field), text_field, where, text_field in record, split),
                     number, _key(record, id_field, where, seen, f"line {number}"))
        index += 1


def read_parquet_records(path: str | os.PathLike, text_field: str = "text", id_field: str | None = None,
                         split: Split = str.split) -> Iterator[Record]:
    """Yield the rows of a Parquet file in file order, one record batch at a time."""
    check_input(path, "input file")
    parquet = require("pyarrow.parquet", "parquet", "elmo embed of a Parquet file")
    name = display_name(path)
    try:
        table = parquet.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - pyarrow's errors for a file that is not Parquet vary by version
        raise InputFileError(f"{name}: not a Parquet file ({str(e).splitlines()[0]})") from None
    columns = table.schema_arrow.names
    for field, flag in ((text_field, "--text-field"), (id_field, "--id-field")):
        if field is not None and field not in columns:
            raise InputFileError(f"{name}: no column {field!r} (its columns: {', '.join(columns)}); name the "
                                 f"column with {flag}")
    wanted = [text_field] + ([id_field] if id_field is not None and id_field != text_field else [])
    index, seen = 0, {}
    for rows in _batches(table, wanted, name, lambda: index):
        for text, key in zip(rows[text_field], rows[id_field] if id_field else [None] * len(rows[text_field])):
            where = f"{name}: row {index}"
            record = {text_field: text} | ({id_field: key} if id_field else {})
            yield Record(index, _tokens(text, text_field, where, True, split), index + 1,
                         _key(record, id_field, where, seen, f"row {index}"))
            index += 1


def _batches(table: Any, columns: list[str], name: str, row: Callable[[], int]) -> Iterator[dict[str, list]]:
    """The file's record batches as columns of Python values; damaged data (pyarrow raises its own errors, or OSError,
    as it decodes each page) is one line naming the file and the row it reached."""
    arrow = require("pyarrow", "parquet", "elmo embed of a Parquet file")
    batches = table.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            rows = batch.to_pydict()
        except (arrow.ArrowException, OSError) as e:
            raise InputFileError(f"{name}: damaged Parquet data at row {row()} ({first_line(e)})") from None
        yield rows


def count_records(path: str | os.PathLike, input_format: str) -> int | None:
    """Records a JSONL (lines that are not blank) or Parquet (rows, from its footer) file holds; None where the file
    cannot be read through (the real read then names the problem)."""
    try:
        if input_format == "parquet":
            parquet = require("pyarrow.parquet", "parquet", "elmo embed of a Parquet file")
            return parquet.ParquetFile(path).metadata.num_rows
        with raw_lines(path) as lines:
            return sum(1 for line in lines if line.strip())
    except Exception:  # noqa: BLE001 - a count for a progress bar; reading the file gives the user's error
        return None


def _tokens(value: Any, field: str, where: str, present: bool, split: Split) -> list[str]:
    if isinstance(value, str):
        return split(value)
    if isinstance(value, list) and all(isinstance(token, str) for token in value):
        return value
    if not present:
        raise InputFileError(f"{where}: no field {field!r}; name the text's field with --text-field")
    raise InputFileError(f"{where}: field {field!r} is {_clip(value)}, expected a string or a list of strings")


def _key(record: dict[str, Any], id_field: str | None, where: str, seen: dict[str, str], at: str) -> str | None:
    """The record's id as a string; ids key the output, so one that repeats an earlier one is refused."""
    if id_field is None:
        return None
    value = record.get(id_field)
    if value is None or isinstance(value, dict | list):
        state = "missing" if id_field not in record else f"{_clip(value)}"
        raise InputFileError(f"{where}: id field {id_field!r} is {state}; every record needs a string or number id")
    key = str(value)
    if key in seen:
        raise InputFileError(f"{where}: id {key!r} is also the id at {seen[key]}; ids key the output, so each must be "
                             "unique")
    seen[key] = at
    return key


def _clip(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."
