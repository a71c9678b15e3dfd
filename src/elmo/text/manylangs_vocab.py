"""ELMoForManyLangs' tokens -> ids: its learned character and word lexicons (``char.dic``, ``word.dic``).

The original (``elmoformanylangs`` 0.0.4, ``frontend.create_one_batch`` and ``elmo.read_list``) encodes one token as::

    word id:   word.dic[token], or word.dic['<oov>']
    char ids:  [BOW, char.dic[c] (or char.dic['<oov>']) for each character c, EOW, PAD, ..., PAD]   (W ids)
    '<bos>'/'<eos>' (the sentence boundaries, also when a sentence holds them literally):
               [BOW, char.dic['<bos>' / '<eos>'], EOW, PAD, ..., PAD]

where BOW is ``char.dic['<eow>']`` and EOW is ``char.dic['<bow>']``: the original assigns the two marker ids
swapped relative to their names, in training and at inference alike, so the code is followed, not the names.
A token longer than W - 2 characters (code points, not bytes) is cut to its first W - 2 before BOTH lookups.

Model inputs shift every id by +1 so that 0 can mean "no token here": one token is a row of 1 + W ids, the word
id first (1 when the model has no word embedding), then its W character ids (none without a char CNN).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from elmo.errors import ConfigError

BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
OOV = "<oov>"
PAD = "<pad>"
CHAR_SPECIALS = (BOS_TOKEN, EOS_TOKEN, OOV, PAD, "<bow>", "<eow>")
"""Entries char.dic must hold (the original's ``create_one_batch`` looks each up)."""
WORD_SPECIALS = (OOV, PAD)
"""Entries word.dic must hold (``<bos>``/``<eos>`` fall back to ``<oov>`` when absent, as in the original)."""
LEXICON_FORMAT = "elmo-manylangs-lexicon/1"


def parse_dictionary(data: bytes, source: str) -> dict[str, int]:
    """``token<TAB>id`` lines -> {token: id}, read exactly as the original reader does (``codecs.open`` +
    ``line.strip().split('\\t')``):

    - lines end at every Unicode line boundary (``str.splitlines``: also U+0085, U+2028, U+001C-U+001E, ...), as
      codecs' UTF-8 reader splits them; no byte-order mark is dropped;
    - each line is stripped of Unicode whitespace, so a whitespace token leaves only its id: such a line becomes the
      token U+3000 (ideographic space), the original's fallback, and several of them collapse into one entry;
    - a later line with the same token wins.

    Lines the original cannot read (no id, an id that is not an integer, more than one tab) are one-line errors.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{source}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    lexicon: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, "\u3000")
        if len(fields) != 2:
            raise ConfigError(f"{source}, line {number}: expected 'token<TAB>id', got {len(fields)} tab-separated "
                              "fields")
        token, value = fields
        try:
            lexicon[token] = int(value)
        except ValueError:
            raise ConfigError(f"{source}, line {number}: the id {value!r} is not an integer") from None
    return lexicon


@dataclass
class ManyLangsLexicon:
    """The two lexicons of one model (None: the model has no such embedding) and W, the char ids per token."""

    chars: dict[str, int] | None
    words: dict[str, int] | None
    max_characters_per_token: int = 50

    def __post_init__(self) -> None:
        if self.chars is not None:
            self._bow, self._eow = self.chars["<eow>"], self.chars["<bow>"]  # swapped, as the original does
            self._char_oov, self._char_pad = self.chars[OOV], self.chars[PAD]
        if self.words is not None:
            self._word_oov = self.words[OOV]

    @staticmethod
    def missing(lexicon: dict[str, int], specials: Iterable[str]) -> str | None:
        """The first of ``specials`` the lexicon lacks, or None."""
        return next((s for s in specials if s not in lexicon), None)

    @property
    def width(self) -> int:
        """Ids per token row: 1 (the word) + W characters (0 without a char CNN)."""
        return 1 + (self.max_characters_per_token if self.chars is not None else 0)

    def token_ids(self, words: list[str]) -> np.ndarray:
        """N tokens -> (N, 1 + W) int64 model inputs, +1 shifted (see the module docstring)."""
        out = np.empty((len(words), self.width), dtype=np.int64)
        for n, word in enumerate(words):
            out[n] = self._row(word)
        return out

    def _row(self, token: str) -> list[int]:
        width = self.max_characters_per_token
        if len(token) + 2 > width:
            token = token[: width - 2]
        row = [1 if self.words is None else self.words.get(token, self._word_oov) + 1]
        if self.chars is None:
            return row
        chars = [self._bow]
        if token in (BOS_TOKEN, EOS_TOKEN):
            chars.append(self.chars[token])
        else:
            chars.extend(self.chars.get(c, self._char_oov) for c in token)
        chars.append(self._eow)
        chars.extend([self._char_pad] * (width - len(chars)))
        return row + [i + 1 for i in chars]

    # ------------------------------------------------------------------ native storage (JSON, no pickle)

    def to_json(self) -> dict[str, Any]:
        return {"format": LEXICON_FORMAT, "max_characters_per_token": self.max_characters_per_token,
                "chars": self.chars, "words": self.words}

    @classmethod
    def from_json(cls, obj: Any, source: str) -> ManyLangsLexicon:
        if not isinstance(obj, dict) or obj.get("format") != LEXICON_FORMAT:
            raise ConfigError(f"{source}: not an ELMoForManyLangs lexicon (expected \"format\": \"{LEXICON_FORMAT}\")")
        tables = {}
        for key, specials in (("chars", CHAR_SPECIALS), ("words", WORD_SPECIALS)):
            table = obj.get(key)
            if table is not None:
                if not isinstance(table, dict) or not all(isinstance(v, int) for v in table.values()):
                    raise ConfigError(f"{source}: '{key}' must map tokens to integer ids")
                absent = cls.missing(table, specials)
                if absent is not None:
                    raise ConfigError(f"{source}: '{key}' has no entry for {absent!r}")
            tables[key] = table
        width = obj.get("max_characters_per_token")
        if not isinstance(width, int) or width < 3:
            raise ConfigError(f"{source}: 'max_characters_per_token' must be an integer >= 3, got {width!r}")
        return cls(chars=tables["chars"], words=tables["words"], max_characters_per_token=width)
