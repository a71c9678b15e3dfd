"""Senseval lexical-sample files (the NLTK/Pedersen XML form of Senseval-2's "hard", "interest", "line", "serve";
any file of that form is read the same way).

The form, one element per tag, tags not split across lines::

    <corpus lang="en">
    <lexelt item="line-n">
    <instance id="line-n.w7_010:888:">
    <answer instance="line-n.w7_010:888:" senseid="cord"/>
    <context>
     <wf pos="DT">the</wf> ... <head> <wf pos="NNS">lines</wf></head> ... <s snum="3"/> <compound> ... </compound>
    </context>
    </instance>
    </lexelt>
    </corpus>

What we keep per instance: its lexelt item (the word: ``line-n``), id, the sense of its first ``<answer>``, the
context's tokens (each ``<wf>`` is one token; text outside ``<wf>`` is split on whitespace) and which of them is the
``<head>``. ``<corpus>``, ``<s/>``, ``<p>`` and ``<compound>`` are accepted and ignored; XML entities (``&amp;``) are
decoded. A file that breaks the form (an unknown or misplaced tag, an instance without an answer or with other than
one head word, an unclosed element) gives an :class:`InputFileError` naming the file and line.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from elmo.errors import InputFileError
from elmo.runtime.text_files import display_name, read_text_lines

SUFFIXES = (".pos", ".xml")
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)((?:\s+[\w-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(/?)>")
_WORD = re.compile(r"<wf(?:\s[^<>]*)?>([^<>]*)</wf>")  # the common case, read in one step
_PIECE = re.compile(f"{_WORD.pattern}|{_TAG.pattern}")
_ATTRIBUTE = re.compile(r"([\w-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_IGNORED = {"corpus", "s", "p", "compound"}


@dataclass(frozen=True)
class Instance:
    word: str
    """The lexelt item, e.g. ``line-n``."""
    id: str
    sense: str
    tokens: list[str]
    head: int
    """Index of the target word in ``tokens``."""
    line: int
    """1-based line of the ``<instance>`` tag."""


@dataclass
class _Open:
    """The instance being read."""

    id: str
    line: int
    senses: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    in_context: bool = False
    context_done: bool = False
    in_head: bool = False
    in_wf: bool = False
    wf_text: str = ""


class _Reader:
    def __init__(self, path: str | os.PathLike) -> None:
        self.name = display_name(path)
        self.path = path
        self.item: str | None = None
        self.open: _Open | None = None

    def error(self, number: int, problem: str) -> InputFileError:
        return InputFileError(f"{self.name}, line {number}: {problem}")

    def instances(self) -> Iterator[Instance]:
        number = 0
        for number, text in read_text_lines(self.path, what="Senseval file"):
            position = 0
            for found in _PIECE.finditer(text):
                self.text(number, text[position: found.start()])
                position = found.end()
                if found.group(1) is not None:
                    self.word(number, found.group(1))
                    continue
                done = self.tag(number, found)
                if done is not None:
                    yield done
            self.text(number, text[position:])
        if self.open is not None:
            raise self.error(number, f"the file ends inside instance {self.open.id!r} (line {self.open.line})")
        if self.item is not None:
            raise self.error(number, f"the file ends inside lexelt {self.item!r} (no </lexelt>)")

    def text(self, number: int, text: str) -> None:
        if "<" in text or ">" in text:
            raise self.error(number, f"malformed tag near {text.strip()[:40]!r}")
        if not text.strip():
            return
        current = self.open
        if current is None or not current.in_context:
            raise self.error(number, f"text outside <context>: {text.strip()[:40]!r}")
        if current.in_wf:
            current.wf_text += text
            return
        for token in html.unescape(text).split():
            self.token(number, token)

    def token(self, number: int, token: str) -> None:
        current = self.open
        assert current is not None
        if current.in_head:
            current.heads.append(len(current.tokens))
        current.tokens.append(token)

    def word(self, number: int, text: str) -> None:
        """``<wf ...>text</wf>``: one token."""
        current = self.open
        if current is None or not current.in_context or current.in_wf:
            raise self.error(number, "unexpected <wf>")
        word = html.unescape(text).strip()
        if not word or len(word.split()) != 1:
            raise self.error(number, f"<wf> must hold one word, found {word!r}")
        self.token(number, word)

    def tag(self, number: int, found: re.Match) -> Instance | None:
        closing, name, empty = found.group(2) == "/", found.group(3).lower(), found.group(5)
        if name in _IGNORED:
            return None
        values = {m.group(1): html.unescape(m.group(2) if m.group(2) is not None else m.group(3))
                  for m in _ATTRIBUTE.finditer(found.group(4))}
        current = self.open
        if name == "lexelt":
            if closing:
                if self.item is None or current is not None:
                    raise self.error(number, "</lexelt> without an open <lexelt>" if self.item is None
                                     else f"</lexelt> inside instance {current.id!r}")  # type: ignore[union-attr]
                self.item = None
            else:
                if self.item is not None:
                    raise self.error(number, f"<lexelt> inside lexelt {self.item!r} (no </lexelt> before)")
                if not values.get("item"):
                    raise self.error(number, "<lexelt> without an item attribute")
                self.item = values["item"]
            return None
        if name == "instance":
            if not closing:
                if self.item is None:
                    raise self.error(number, "<instance> outside a <lexelt>")
                if current is not None:
                    raise self.error(number, f"<instance> inside instance {current.id!r} (no </instance> before)")
                if not values.get("id"):
                    raise self.error(number, "<instance> without an id attribute")
                self.open = _Open(values["id"], number)
                return None
            if current is None:
                raise self.error(number, "</instance> without an open <instance>")
            return self.close_instance(number, current)
        if current is None:
            raise self.error(number, f"<{'/' if closing else ''}{name}> outside an <instance>")
        if name == "answer":
            if closing or current.in_context:
                raise self.error(number, "<answer .../> belongs before <context>")
            if not values.get("senseid"):
                raise self.error(number, "<answer> without a senseid attribute")
            current.senses.append(values["senseid"])
        elif name == "context":
            if closing != current.in_context or (not closing and current.context_done):
                raise self.error(number, f"unexpected <{'/' if closing else ''}context>")
            if closing and (current.in_head or current.in_wf):
                raise self.error(number, "</context> inside an open <head> or <wf>")
            current.in_context, current.context_done = not closing, closing or current.context_done
        elif name == "head":
            if not current.in_context or closing != current.in_head or current.in_wf or empty:
                raise self.error(number, f"unexpected <{'/' if closing else ''}head>")
            current.in_head = not closing
        elif name == "wf":
            if not current.in_context or closing != current.in_wf or empty:
                raise self.error(number, f"unexpected <{'/' if closing else ''}wf>")
            if closing:
                current.in_wf = False
                self.word(number, current.wf_text)
            current.in_wf, current.wf_text = not closing, ""
        else:
            raise self.error(number, f"unknown tag <{'/' if closing else ''}{name}>")
        return None

    def close_instance(self, number: int, current: _Open) -> Instance:
        where = f"instance {current.id!r} (line {current.line})"
        if current.in_context:
            raise self.error(number, f"{where}: </instance> before </context>")
        if not current.senses:
            raise self.error(number, f"{where} has no <answer senseid=.../>")
        if len(current.heads) != 1:
            raise self.error(number, f"{where} has {len(current.heads)} head words, expected one (<head>)")
        self.open = None
        assert self.item is not None
        return Instance(self.item, current.id, current.senses[0], current.tokens, current.heads[0], current.line)


def read_senseval(path: str | os.PathLike) -> Iterator[Instance]:
    """The instances of one Senseval lexical-sample file, in file order."""
    yield from _Reader(path).instances()


def read_senseval_data(path: str | os.PathLike) -> dict[str, list[Instance]]:
    """Instances by word (lexelt item) from a file or a directory of ``*.pos`` / ``*.xml`` files (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not files:
            raise InputFileError(f"{path}: no Senseval files ({' or '.join('*' + s for s in SUFFIXES)}) in the "
                                 "directory")
    else:
        files = [path]
    words: dict[str, list[Instance]] = {}
    for file in files:
        for instance in read_senseval(file):
            words.setdefault(instance.word, []).append(instance)
    if not words:
        raise InputFileError(f"{path}: no instances")
    return words
