"""The unit of work of ``elmo embed``: a chunk of input lines, embedded into its HDF5 part or its Parquet shard.

A chunk is also the unit of ``--resume`` and of ``torchrun`` ranks. The file job reads the input, cuts it into
chunks and gives those still to do to an engine, which embeds each and writes its file: :func:`local_engine` here,
one after another in this process; ``elmo.ray_engine`` on a pool of Ray actors, each writing its chunks' files
itself. Both call :func:`embed_chunk`, so a chunk's file is the same whichever engine wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from elmo.embedding.contract import Progress, SentenceEmbedder, embed_unordered
from elmo.embedding.parquet_output import ShardFiles
from elmo.embedding.parts import Parts
from elmo.embedding.selection import VectorSelection

ChunkTarget = Parts | ShardFiles
"""Where chunks are written: the HDF5 parts of an output file, or the shard files of a Parquet directory."""


@dataclass(frozen=True)
class Chunk:
    """Lines ``lines`` (0-based input line numbers) of the input, keyed ``keys``, as token lists."""

    index: int
    lines: list[int]
    keys: list[str]
    sentences: list[list[str]]


def embed_chunk(embedder: SentenceEmbedder, selection: VectorSelection, target: ChunkTarget, chunk: Chunk,
                progress: Progress | None = None) -> dict | None:
    """Embed ``chunk`` into its file (memory: one batch, or one Parquet row group); returns a shard's manifest
    entry (None for an HDF5 part, whose file is its own record)."""
    with _writing(target, chunk) as add:
        for i, layers in embed_unordered(embedder, chunk.sentences, progress):
            add(i, selection.apply(layers))
    return target.entry(chunk.index, chunk.lines) if isinstance(target, ShardFiles) else None


class ChunkEngine(Protocol):
    """Runs chunks: yields ``(chunk, entry)`` as each chunk's file is finished, in any order. It may read ahead
    of what it yields; an error of the input iterator (a bad line) stops it."""

    def __call__(self, embedder: SentenceEmbedder, selection: VectorSelection, target: ChunkTarget,
                 chunks: Iterable[Chunk], progress: Progress | None = None) -> Iterator[tuple[Chunk, dict | None]]: ...


def local_engine(embedder: SentenceEmbedder, selection: VectorSelection, target: ChunkTarget,
                 chunks: Iterable[Chunk], progress: Progress | None = None) -> Iterator[tuple[Chunk, dict | None]]:
    """One chunk after another, in this process (``--engine local``)."""
    for chunk in chunks:
        yield chunk, embed_chunk(embedder, selection, target, chunk, progress)


@contextmanager
def _writing(target: ChunkTarget, chunk: Chunk) -> Iterator[Callable[[int, np.ndarray], None]]:
    """``add(i, vectors)`` for line ``i`` of a chunk, into its HDF5 part or its Parquet shard."""
    if isinstance(target, ShardFiles):
        with target.writing(chunk.index, chunk.lines, chunk.keys) as add:
            yield add
    else:
        with target.writing(chunk.index, chunk.keys, [" ".join(s) for s in chunk.sentences]) as add:
            yield lambda i, data: add(chunk.keys[i], data)
