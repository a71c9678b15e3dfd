"""``elmo embed --engine local``: the file job's chunks one after another, in this process."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from elmo.embedding.chunks import Chunk, ChunkWriter, Receipt, embed_chunk
from elmo.embedding.contract import Progress, SentenceEmbedder
from elmo.embedding.selection import VectorSelection


@dataclass(frozen=True)
class LocalEngine:
    """Runs each chunk's batches on ``model`` (the local :class:`~elmo.embedding.embedder.Embedder`, or a
    :class:`~elmo.serving.remote.RemoteEmbedder` whose batches go to ``elmo serve``)."""

    model: SentenceEmbedder

    def run(self, selection: VectorSelection, writer: ChunkWriter, chunks: Iterable[Chunk],
            progress: Progress | None = None) -> Iterator[tuple[Chunk, Receipt]]:
        for chunk in chunks:
            yield chunk, embed_chunk(self.model, selection, writer, chunk, progress)
