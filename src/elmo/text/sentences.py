"""The one reader of tokenised sentences from user files (``elmo embed``'s input, training corpora, held-out text).

Three input formats:

- ``text`` (default): one tokenised sentence per line, split on ``\\n`` only (as ``allennlp elmo`` and bilm-tf do),
  then tokenised on whitespace. An empty line is an empty sentence (``skip_blank`` drops it), and it keeps its key,
  so keys stay aligned with line numbers.
- ``conllu``: the FORM column of each sentence's syntactic words (``elmo.text.conllu``: multiword-token ranges and empty
  nodes skipped). A sentence's key is its 0-based position among the file's sentences (the ``# sent_id`` comment
  is not used: not every file has one, and an HDF5 name cannot hold every string it may hold, e.g. ``/``).
- ``fasta``: one record per sentence, one token per residue (``elmo.text.fasta``); a sentence's key is its record id.
- ``jsonl`` and ``parquet``: one record per sentence, its ``text_field`` (``elmo.text.records``); keyed by its
  ``id_field`` when one is named, else by its position among the records.

``auto`` picks the format from the file name (:func:`resolve_input_format`). ``tokens="chars"`` makes a text line
one token per character that is not whitespace (residues written one sequence per line).

Either way the file is opened like every user text (``elmo.runtime.text_files``: a byte-order mark dropped, gzip,
``-`` for stdin), and every error names the file and line.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from elmo.errors import ConfigError, reading
from elmo.runtime.text_files import is_stream, raw_lines, read_text_lines
from elmo.text.conllu import read_conllu
from elmo.text.fasta import is_fasta_name, read_fasta
from elmo.text.records import count_records, read_jsonl, read_parquet_records, record_format_of

ENCODING_ERRORS = ("strict", "replace")
INPUT_FORMATS = ("text", "conllu", "fasta", "jsonl", "parquet")
AUTO = "auto"
TOKENS = ("words", "chars")


@dataclass(frozen=True)
class Line:
    index: int
    """0-based line number (text) or sentence number (CoNLL-U): the dataset key."""
    tokens: list[str]
    line: int = 0
    """1-based line number where the sentence starts, for error messages (0: index + 1)."""

    key: str | None = None
    """The dataset key the file itself gives (a FASTA record's id); None: keyed by ``index``."""

    @property
    def line_number(self) -> int:
        return self.line or self.index + 1


def resolve_input_format(path: str | os.PathLike, input_format: str = AUTO) -> str:
    """``input_format``, or for ``auto`` the one the file name says: ``.fa``/``.fasta``/``.faa`` -> fasta,
    ``.conllu`` -> conllu, ``.jsonl``/``.ndjson`` -> jsonl (``.gz`` after any of them too), ``.parquet`` -> parquet,
    anything else (stdin included) -> text."""
    if input_format != AUTO:
        return input_format
    if is_fasta_name(path):
        return "fasta"
    if records := record_format_of(path):
        return records
    if str(path).lower().removesuffix(".gz").endswith(".conllu"):
        return "conllu"
    return "text"


def read_sentences(
    path: str | os.PathLike, input_format: str = "text", errors: str = "strict", what: str = "file",
    advice: str = "", skip_blank: bool = False, tokens: str = "words", text_field: str = "text",
    id_field: str | None = None,
) -> Iterator[Line]:
    """Yield the sentences of ``path`` in ``input_format`` ("text", "conllu", "fasta" or "auto"), lazily, keyed as
    the module says.

    Args:
        errors: "strict" raises :class:`~elmo.errors.InputFileError` naming the first line that is not UTF-8;
            "replace" turns bad bytes into U+FFFD and carries on.
        what, advice: of a text file, the noun of its "no such ..." error and what its not-UTF-8 error advises
            (a CoNLL-U file's errors have their own: :func:`elmo.text.conllu.read_conllu`).
        skip_blank: leave out sentences without tokens (training's corpora and held-out files).
        tokens: "words" (whitespace-separated) or "chars" (every character that is not whitespace) of a text line
            or a record's text; a FASTA record is always one token per residue, and CoNLL-U's tokens are its words.
        text_field, id_field: of a JSONL or Parquet file, the field holding the sentence and the one keying it.
    """
    input_format = resolve_input_format(path, input_format)
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS + (AUTO,)}, got {input_format!r}")
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"errors must be one of {ENCODING_ERRORS}, got {errors!r}")
    if tokens not in TOKENS:
        raise ValueError(f"tokens must be one of {TOKENS}, got {tokens!r}")
    if tokens == "chars" and input_format == "conllu":
        raise ConfigError("--tokens chars splits the lines of a text file; a CoNLL-U file's tokens are its words: "
                          "drop --tokens chars")
    split = str.split if tokens == "words" else _characters
    if input_format == "text":
        lines = (Line(number - 1, split(text), number)
                 for number, text in read_text_lines(path, errors, what, advice=advice))
    elif input_format in ("jsonl", "parquet"):
        records = (read_jsonl(path, text_field, id_field, errors, split) if input_format == "jsonl"
                   else read_parquet_records(path, text_field, id_field, split))
        lines = (Line(record.index, record.tokens, record.line, record.key) for record in records)
    elif input_format == "fasta":
        lines = (Line(record.index, record.residues, record.line, record.id)
                 for record in read_fasta(path, errors, advice or "fix the file or pass --errors replace"))
    else:
        lines = (Line(sentence.index, sentence.forms, sentence.line) for sentence in read_conllu(path, errors))
    with reading(path, "input file"):  # the safety net: anything a reader lets through is one line naming the file
        for line in lines:
            if line.tokens or not skip_blank:
                yield line


def _characters(text: str) -> list[str]:
    return [c for c in text if not c.isspace()]


def count_sentences(path: str | os.PathLike, input_format: str = "text") -> int | None:
    """How many sentences :func:`read_sentences` will yield (blank ones included), counted in the raw bytes before
    the real read: lines of text, blocks with a word line of CoNLL-U, ``>`` headers of FASTA. None for a stream (it
    can be read only once) or a file that cannot be read through (the real read then names the problem)."""
    if is_stream(path):
        return None
    input_format = resolve_input_format(path, input_format)
    try:
        if input_format in ("jsonl", "parquet"):
            return count_records(path, input_format)
        with raw_lines(path) as lines:
            if input_format == "text":
                return sum(1 for _ in lines)
            if input_format == "fasta":
                return sum(1 for line in lines if line.removeprefix(b"\xef\xbb\xbf").startswith(b">"))
            count, words = 0, False
            for line in lines:
                if not line.strip():
                    count, words = count + words, False
                elif not line.startswith(b"#"):
                    words = True
            return count + words
    except (OSError, EOFError, zlib.error):
        return None
