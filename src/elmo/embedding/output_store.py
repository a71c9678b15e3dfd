"""Where a file job's vectors go: the protocol every output format keeps (:class:`OutputStore`), and the class of a
``--format`` (:func:`output_store`, from its row of :data:`~elmo.embedding.embed_options.OUTPUT_FORMATS`).

The file job, the chunk runner and the engines call only this protocol, so an output format is one class and one
row: ``hdf5`` (:class:`~elmo.embedding.parts.Parts`: part files merged into one HDF5 file at the end) and ``parquet``
(:class:`~elmo.embedding.parquet_output.ParquetShards`: a directory of shards and a manifest).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from elmo.embedding.embed_options import OUTPUT_FORMATS

if TYPE_CHECKING:
    from elmo.embedding.chunks import ChunkWriter, Receipt
    from elmo.embedding.contract import ModelDescription
    from elmo.embedding.embed_options import OutputOptions
    from elmo.embedding.selection import VectorSelection
    from elmo.runtime.distributed import DistInfo


class OutputStore(Protocol):
    """The output of one file job, kept by the job's driver (the main process): it decides what is done, lists the
    chunks' files as the engine finishes them, and makes the output whole at the end. The chunks' files themselves
    are written by its :attr:`writer`, in whichever process the engine runs a chunk."""

    kind: ClassVar[str]
    """What the output path names: ``file`` or ``directory`` (the CLI's check of outputs, ``elmo.cli.outputs``)."""
    writer: ChunkWriter

    @classmethod
    def check(cls, input_path: Path, path: Path, options: OutputOptions, resume: bool, ranks: DistInfo) -> None:
        """Refuse, before any model loads, a path this format cannot or must not write (an existing output only
        with ``force``, or ``resume`` for an earlier run of it), and settings it cannot honour; one line each."""

    @classmethod
    def for_job(cls, path: Path, manifest: dict, options: OutputOptions, selection: VectorSelection,
                model: ModelDescription) -> OutputStore:
        """The output at ``path`` of the job whose settings are ``manifest`` (what a resume must share), to which
        the format adds its own; ``model`` says what makes the vectors (the width, the provenance it records)."""

    def prepare(self, resume: bool, main: bool = True) -> int | None:
        """Start the output, or with ``resume`` continue an earlier run of the same job (its settings checked, its
        finished chunks kept where they verify). Returns the number of lines when ``resume`` finds that run
        complete: nothing to do. ``main``: this process is the one of several ``torchrun`` ranks that writes the
        bookkeeping."""

    def done(self, chunk: int) -> bool:
        """Whether chunk ``chunk``'s file is finished (and verified), so it is not embedded again."""

    def record(self, chunk: int, receipt: Receipt) -> None:
        """Note a chunk's file as finished, with what its writer returned, so a killed run resumes after it."""

    def discard(self) -> None:
        """Remove what this run wrote: for runs that can never be resumed (the input has an error)."""

    def finish(self, n_chunks: int, n_lines: int) -> None:
        """Make the output whole: every chunk 0 .. n_chunks-1 is finished; the output becomes complete atomically."""


def output_store(output_format: str) -> type[OutputStore]:
    """The class of ``--format output_format`` (its row of :data:`OUTPUT_FORMATS`)."""
    module, _, name = OUTPUT_FORMATS[output_format].partition(":")
    return getattr(importlib.import_module(module), name)
