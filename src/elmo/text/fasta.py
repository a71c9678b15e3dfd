"""FASTA files (protein or nucleotide sequences), read for ``elmo embed``: SeqVec-style models are biLMs whose tokens
are residues, so a record is a sentence of one token per residue.

What a record is: a header line ``>ID description`` (the id is the first word after ``>``; it keys the record's
vectors, as ``bio_embeddings`` and Biopython key them), then sequence lines, joined, with any whitespace inside
them dropped. Blank lines are skipped, and so are ``;`` lines (comments in the original FASTA format). Residues are
kept as written (case, ``*``, ``X``, ``-``): the model's character vocabulary decides what they mean. The file is
opened like every user text (``elmo.runtime.text_files``: UTF-8, a byte-order mark dropped, gzip, ``-`` for stdin).

Checked, each one a one-line :class:`InputFileError` naming the file and line: the first line that is not blank
starts with ``>`` (otherwise it is not a FASTA file), a header has an id, a record has at least one residue, and no
id repeats (ids key the output, so a repeated one would lose a record).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from elmo.errors import InputFileError
from elmo.runtime.text_files import display_name, read_text_lines

FASTA_SUFFIXES = (".fa", ".fasta", ".faa")
"""File names FASTA input is recognised by (``.gz`` after them too)."""
HEADER = ">"
COMMENT = ";"


@dataclass(frozen=True)
class FastaRecord:
    index: int
    """0-based position among the file's records."""
    id: str
    """The first word after ``>``."""
    sequence: str
    """The residues, sequence lines joined without whitespace."""
    line: int
    """1-based line number of the header."""

    @property
    def residues(self) -> list[str]:
        """One token per residue."""
        return list(self.sequence)


def read_fasta(
    path: str | os.PathLike, errors: str = "strict", advice: str = "fix the file or pass --errors replace"
) -> Iterator[FastaRecord]:
    """Yield the records of ``path`` in file order, lazily (a record is complete at the next header or the end).

    Args:
        errors: "strict" raises naming the first line that is not UTF-8; "replace" turns bad bytes into U+FFFD.
        advice: appended to the not-UTF-8 error.
    """
    name = display_name(path)
    seen: dict[str, int] = {}  # id -> its header's line
    header: tuple[str, int] | None = None  # (id, line) of the record being read
    pieces: list[str] = []
    index = 0
    for number, text in read_text_lines(path, errors, "FASTA file", advice=advice):
        if text.startswith(HEADER):
            if header is not None:
                yield _record(name, index, header, pieces)
                index += 1
            header, pieces = (_header_id(name, number, text, seen), number), []
        elif not text.strip() or text.startswith(COMMENT):
            continue
        elif header is None:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise InputFileError(
                f"{name}, line {number}: not a FASTA file: the first line that is not blank must be a '>' header, "
                f"found {shown!r}; pass --input-format text for one sentence per line"
            )
        else:
            pieces.append("".join(text.split()))
    if header is not None:
        yield _record(name, index, header, pieces)


def _header_id(name: str, number: int, text: str, seen: dict[str, int]) -> str:
    words = text[len(HEADER):].split(maxsplit=1)
    if not words:
        raise InputFileError(f"{name}, line {number}: a FASTA header without an id: write '>ID' before its residues")
    record_id = words[0]
    if record_id in seen:
        raise InputFileError(
            f"{name}, line {number}: record id {record_id!r} repeats line {seen[record_id]} (ids key the output: "
            "make them unique)"
        )
    seen[record_id] = number
    return record_id


def _record(name: str, index: int, header: tuple[str, int], pieces: list[str]) -> FastaRecord:
    record_id, line = header
    sequence = "".join(pieces)
    if not sequence:
        raise InputFileError(f"{name}, line {line}: FASTA record {record_id!r} is empty (no residues after its "
                             "header): remove it or add its sequence")
    return FastaRecord(index, record_id, sequence, line)


def is_fasta_name(path: str | os.PathLike) -> bool:
    """Whether the file name says FASTA (``.fa``, ``.fasta``, ``.faa``, any of them followed by ``.gz``)."""
    name = str(path).lower().removesuffix(".gz")
    return name.endswith(FASTA_SUFFIXES)
