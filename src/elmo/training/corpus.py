"""Text shards: discovery by glob, loading (:mod:`elmo.text.sentences`), and a resumable shuffled sentence stream.

A corpus is one or more shards (plain text or ``.gz``), one whitespace-tokenised sentence per line. Like the original
``LMDataset``, training visits the shards in a shuffled order each epoch and shuffles the sentences of a shard after
loading it. Every shuffle is a pure function of (seed, epoch[, shard]), so a :class:`SentencePosition` (epoch, shard
cursor, line cursor) is enough to continue the stream exactly where it stopped.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from elmo.errors import InputFileError
from elmo.runtime.text_files import STDIN, display_name, is_stream
from elmo.text.sentences import read_sentences


def expand_shards(patterns: str | Sequence[str]) -> list[Path]:
    """Sorted files matching one or more globs (a plain path is its own glob, ``-`` is stdin); an error names a
    pattern that matches nothing, or a directory (give its files as a glob: reading every file in a directory
    would also read stray files such as a README)."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [str(patterns)]
    shards: list[Path] = []
    for pattern in patterns:
        if str(pattern) == STDIN:
            shards.append(Path(STDIN))
            continue
        matched = [Path(m) for m in sorted(glob.glob(os.path.expanduser(str(pattern))))]
        files = [m for m in matched if not m.is_dir()]
        if not files and matched:
            what = "is a directory, not a text file" if len(matched) == 1 else "matches only directories"
            raise InputFileError(f"{pattern}: {what}; give the files as a glob, e.g. '{matched[0] / '*'}'")
        if not files:
            raise InputFileError(f"{pattern}: no such file (the pattern matches no shard)")
        shards.extend(files)
    return shards


def load_shard(path: Path) -> list[list[str]]:
    """All sentences of a shard (its non-blank lines); each distinct word is stored once (``sys.intern``), which
    keeps big shards small."""
    return [[sys.intern(t) for t in line.tokens] for line in read_sentences(path, skip_blank=True)]


@dataclass
class SentencePosition:
    """Where a :class:`SentenceStream` is: the next sentence is line ``line`` of shard ``shard`` of epoch ``epoch``
    (both indices into that epoch's shuffled orders)."""

    epoch: int = 0
    shard: int = 0
    line: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SentencePosition:
        return cls(epoch=int(data["epoch"]), shard=int(data["shard"]), line=int(data["line"]))


def rereadable(shards: Sequence[Path]) -> list[Path]:
    """``shards``, refused when empty or when one is stdin or a pipe: training reads its corpus once per epoch."""
    if not shards:
        raise InputFileError("no training shards given")
    for shard in shards:
        if is_stream(shard):
            raise InputFileError(f"{display_name(shard)}: training reads its corpus once per epoch, so it "
                                 "cannot come from stdin or a pipe; save it to a file")
    return list(shards)


class SentenceStream:
    """An endless stream of sentences over the shards, epoch after epoch (or one pass with ``loop=False``).

    Args:
        shards: the shard files.
        seed: the shuffling seed; ``shuffle=False`` keeps file order (evaluation).
        position: where to start (default: the beginning).
    """

    def __init__(
        self,
        shards: Sequence[Path],
        seed: int = 0,
        shuffle: bool = True,
        loop: bool = True,
        position: SentencePosition | None = None,
    ) -> None:
        self.shards = rereadable(shards)
        self.seed = seed
        self.shuffle = shuffle
        self.loop = loop
        self.position = position or SentencePosition()
        self._loaded: tuple[int, int] | None = None  # (epoch, shard) of self._sentences
        self._sentences: list[list[str]] = []

    def _shard_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.shards)))
        if self.shuffle:
            np.random.default_rng([self.seed, epoch]).shuffle(order)
        return order

    def _load(self, epoch: int, shard: int) -> None:
        path = self.shards[self._shard_order(epoch)[shard]]
        sentences = load_shard(path)
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch, shard]).permutation(len(sentences))
            sentences = [sentences[i] for i in order]
        self._sentences = sentences
        self._loaded = (epoch, shard)

    def next_sentence(self) -> list[str] | None:
        """The next sentence, or None at the end of a single pass."""
        empty_shards = 0
        while True:
            pos = self.position
            if pos.shard >= len(self.shards):
                if not self.loop:
                    return None
                self.position = SentencePosition(pos.epoch + 1, 0, 0)
                continue
            if self._loaded != (pos.epoch, pos.shard):
                self._load(pos.epoch, pos.shard)
            if pos.line < len(self._sentences):
                pos.line += 1
                return self._sentences[pos.line - 1]
            empty_shards = empty_shards + 1 if not self._sentences else 0
            if empty_shards > len(self.shards):
                raise InputFileError(f"{self.shards[0]}: the shards contain no sentences (only blank lines)")
            self.position = SentencePosition(pos.epoch, pos.shard + 1, 0)
