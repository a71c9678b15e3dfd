"""CoNLL-U files (Universal Dependencies), read once for every part that takes them: ``elmo embed --input-format
conllu`` and the probes (``elmo probe pos``).

What we keep of a sentence: its syntactic words (lines whose ID is an integer) with FORM, UPOS and XPOS, and the
``# sent_id`` comment if there is one. Multiword-token lines (ID ``1-2``: the surface token whose words follow)
and empty nodes (ID ``1.1``) are skipped, as UD's own word-level tools do. A sentence ends at a blank line (the last
one may lack it); comment lines (``#``) are kept only for ``sent_id``. The file is opened like every user text
(``elmo.runtime.text_files``: UTF-8, a byte-order mark dropped, gzip, ``-`` for stdin).

Checked, with the file and line named in a one-line :class:`InputFileError`: 10 tab-separated columns, an ID that is
an integer, a range or a decimal, word IDs 1, 2, 3, ... in order, ranges and empty nodes where the IDs say, and a
non-empty FORM. Nothing else (HEAD, DEPREL, FEATS) is read, so it is not checked either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from elmo.errors import InputFileError
from elmo.runtime.text_files import display_name, read_text_lines

TAGSETS = ("upos", "xpos")
COLUMNS = 10
_INTEGER = re.compile(r"[1-9][0-9]*\Z")
_RANGE = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)\Z")
_EMPTY_NODE = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)\Z")
_SENT_ID = re.compile(r"#\s*sent_id\s*=\s*(.*?)\s*\Z")


@dataclass(frozen=True)
class Word:
    form: str
    upos: str
    xpos: str
    line: int
    """1-based line number in the file."""


@dataclass(frozen=True)
class Sentence:
    index: int
    """0-based position among the file's sentences."""
    line: int
    """1-based line number of its first word."""
    words: list[Word]
    sent_id: str | None = field(default=None)

    @property
    def forms(self) -> list[str]:
        return [w.form for w in self.words]

    def tags(self, tagset: str) -> list[str]:
        """UPOS or XPOS of every word (``_`` where the file leaves it unspecified)."""
        if tagset not in TAGSETS:
            raise ValueError(f"tagset must be one of {TAGSETS}, got {tagset!r}")
        return [w.upos if tagset == "upos" else w.xpos for w in self.words]


class _SentenceBuilder:
    """The lines of one sentence so far, and what the next ID may be."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.words: list[Word] = []
        self.first_line = 0
        self.sent_id: str | None = None
        self.range_end = 0  # the last word ID covered by the most recent multiword token

    def error(self, number: int, problem: str) -> InputFileError:
        return InputFileError(f"{self.name}, line {number}: {problem}")

    def add(self, number: int, text: str) -> None:
        columns = text.split("\t")
        if len(columns) != COLUMNS:
            raise self.error(number, f"expected {COLUMNS} tab-separated columns, found {len(columns)}")
        token_id, form, _, upos, xpos = columns[:5]
        expected = len(self.words) + 1
        if _INTEGER.match(token_id):
            if int(token_id) != expected:
                raise self.error(number, f"word ID {token_id} out of order: expected {expected}")
            if not form:
                raise self.error(number, "empty FORM column")
            self.words.append(Word(form, upos, xpos, number))
            self.first_line = self.first_line or number
            return
        if found := _RANGE.match(token_id):
            start, end = int(found.group(1)), int(found.group(2))
            if start != expected or end <= start:
                raise self.error(number, f"multiword token {token_id} out of order: expected {expected}-N with N > "
                                 f"{expected}")
            self.range_end = end
            return
        if found := _EMPTY_NODE.match(token_id):
            if int(found.group(1)) != len(self.words):
                raise self.error(number, f"empty node {token_id} out of order: expected {len(self.words)}.N")
            return
        raise self.error(number, f"ID {token_id!r} is not an integer, a range (1-2) or an empty node (1.1)")

    def finish(self, index: int, number: int) -> Sentence | None:
        """The sentence, or None for a block of comments only; ``number``: the line that ended it."""
        if self.range_end > len(self.words):
            raise self.error(number, f"the sentence ends at word {len(self.words)} inside a multiword token that "
                             f"covers words up to {self.range_end}")
        if not self.words:
            return None
        return Sentence(index, self.first_line, self.words, self.sent_id)


def read_conllu(path: str | os.PathLike, errors: str = "strict") -> Iterator[Sentence]:
    """Yield the sentences of a CoNLL-U file, lazily.

    Args:
        errors: "strict" raises naming the first line that is not UTF-8; "replace" turns bad bytes into U+FFFD.
    """
    name = display_name(path)
    builder = _SentenceBuilder(name)
    index = number = 0
    for number, text in read_text_lines(path, errors, "CoNLL-U file", advice="fix the file or pass --errors replace"):
        if not text.strip():
            sentence = builder.finish(index, number)
            if sentence is not None:
                yield sentence
                index += 1
            builder = _SentenceBuilder(name)
        elif text.startswith("#"):
            if found := _SENT_ID.match(text):
                builder.sent_id = found.group(1)
        else:
            builder.add(number, text)
    sentence = builder.finish(index, number + 1)
    if sentence is not None:
        yield sentence
