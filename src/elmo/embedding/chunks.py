"""The unit of work of ``elmo embed``: a chunk of input lines, embedded into its own file of the output.

A chunk is also the unit of ``--resume`` and of ``torchrun`` ranks. The file job reads the input, cuts it into
chunks and gives those still to do to its :class:`ChunkEngine` (``elmo.embedding.engines``: here, one after another;
on Ray actors, side by side), which embeds each with :func:`embed_chunk` and writes it through the output's
:class:`ChunkWriter` (``elmo.embedding.output_store``), so a chunk's file is the same whichever engine wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from elmo.embedding.contract import ModelDescription, Progress, SentenceEmbedder, embed_unordered
from elmo.embedding.selection import VectorSelection

ChunkRows = Iterable[tuple[int, np.ndarray]]
"""A chunk's vectors: (i, vectors) for row i (line ``chunk.lines[i]``), in any order."""
Receipt = dict | None
"""What the output store records of a finished chunk's file (a Parquet shard's name, rows and sha256); None where the
file is its own record (an HDF5 part)."""


@dataclass(frozen=True)
class Chunk:
    """Lines ``lines`` (0-based input line numbers) of the input, keyed ``keys``, as token lists."""

    index: int
    lines: list[int]
    keys: list[str]
    sentences: list[list[str]]


class ChunkWriter(Protocol):
    """Writes the file of one chunk of an output (its part, its shard): what an engine's workers need, so it is
    small and picklable, for workers in other processes too."""

    directory: Path
    """Where the chunks' files go (on a cluster: storage every node mounts)."""

    def absolute(self) -> ChunkWriter:
        """The same writer, its directory absolute: a worker's working directory is not the driver's."""

    def write(self, chunk: Chunk, rows: ChunkRows) -> Receipt:
        """Write the chunk's file as ``rows`` come (memory: one batch, or one Parquet row group); the file gets its
        name only when every row is written, so it exists completely or not at all."""


def embed_chunk(embedder: SentenceEmbedder, selection: VectorSelection, writer: ChunkWriter, chunk: Chunk,
                progress: Progress | None = None) -> Receipt:
    """Embed ``chunk`` into its file; every engine's workers call this."""
    rows = ((i, selection.apply(layers)) for i, layers in embed_unordered(embedder, chunk.sentences, progress))
    return writer.write(chunk, rows)


@runtime_checkable
class ChunkEngine(Protocol):
    """Runs a file job's chunks: one class per place they run (``elmo.embedding.engines``)."""

    @property
    def model(self) -> ModelDescription:
        """What makes the vectors, as the output records it."""

    def run(self, selection: VectorSelection, writer: ChunkWriter, chunks: Iterable[Chunk],
            progress: Progress | None = None) -> Iterator[tuple[Chunk, Receipt]]:
        """Embed each chunk into its file through ``writer``; yields ``(chunk, receipt)`` as each chunk's file is
        finished, in any order. It may read ahead of what it yields; an error of the input iterator (a bad line)
        stops it."""
