"""The ``elmo embed`` file job: a text file in, one HDF5 file of vectors out, resumable and split over ranks.

Output layout (compatible with ``allennlp elmo`` and bilm-tf ``dump_bilm_embeddings``): one dataset per input
line, keyed by the line index ("0", "1", ...) or by the sentence itself, of shape

    --all      (L + 1, n_tokens, 2P)   layer 0 = token layer duplicated for both directions
    --top      (n_tokens, 2P)
    --average  (n_tokens, 2P)          mean of the L + 1 layers

plus ``sentence_to_index``: a (1,) string dataset holding a JSON object sentence -> key. An empty line gives
an empty (L + 1, 0, 2P) entry. Other layers (``--layer N|mix``) are (n_tokens, 2P). Pooled (``--pool``), each
line's dataset is one vector, (2P,) or (L + 1, 2P) with ``--all``, an empty line zeros; with ``--matrix`` the
vectors are instead the rows of one dataset ``embeddings`` (n_lines, ...), in input order, with their keys in
``keys`` (n_lines,): one read loads them all. The file's root attributes say what made the vectors (``model``,
``precision``, ``device``, ``initial_state``: :meth:`SentenceEmbedder.provenance`) and how it was run
(``embed_settings``: the parts manifest as JSON, which ``resume`` compares to tell a finished run of the same job).

How a file is processed: lines are read lazily in chunks of ``chunk_size``; the job's engine
(``elmo.embedding.engines``) embeds each chunk, batched by :func:`~elmo.embedding.contract.embed_unordered`, and
writes it as a part file (``elmo.embedding.parts``), which makes ``resume`` and ``torchrun`` ranks possible; the
parts are merged into the output at the end, atomically. The job takes any engine, or any
:class:`~elmo.embedding.contract.SentenceEmbedder` (a model here or a service), whose chunks then run here.

With ``output_format="parquet"`` (``--format parquet``) each chunk becomes a Parquet shard of an output directory
instead, listed in its manifest as it is finished (``elmo.embedding.parquet_output``; one process, no merge). The
job sees either only through :class:`~elmo.embedding.output_store.OutputStore`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from elmo.embedding.chunks import Chunk, ChunkEngine
from elmo.embedding.contract import ModelDescription, Progress, SentenceEmbedder, chunk_size
from elmo.embedding.embed_options import OutputOptions
from elmo.embedding.engines.local import LocalEngine
from elmo.embedding.output_store import OutputStore, output_store
from elmo.embedding.parts import sentence_key_problem
from elmo.embedding.selection import SELECTION_FIELDS, VectorSelection
from elmo.errors import ElmoError, InputFileError, UsageError
from elmo.runtime.distributed import DistInfo
from elmo.runtime.text_files import display_name, is_stream
from elmo.text.sentences import Line, count_sentences, read_sentences, resolve_input_format

log = logging.getLogger(__name__)


@dataclasses.dataclass
class EmbedFileJob:
    """Embed every sentence of a file with ``engine`` into one HDF5 file (or a directory of Parquet shards), as
    ``output`` says.

    ``engine``: what embeds the chunks and writes their files (``elmo.embedding.engines``); an embedder (the local
    :class:`~elmo.embedding.embedder.Embedder`, a service's) runs them here, one after another (``LocalEngine``).
    ``resume``: continue an interrupted run of the same job: only missing chunks are computed. ``ranks``: this
    process's share of a ``torchrun`` job (default: the only process).
    """

    engine: ChunkEngine
    output: OutputOptions = dataclasses.field(default_factory=OutputOptions)
    resume: bool = False
    ranks: DistInfo = dataclasses.field(default_factory=DistInfo)
    selection: VectorSelection = dataclasses.field(default_factory=VectorSelection)
    """Which layers, pooled or not, in which dtype (``elmo.embedding.selection``)."""
    was_complete: bool = dataclasses.field(default=False, init=False, repr=False)
    """Set by :meth:`run`: ``resume`` found the output finished by the same job, and nothing was written."""

    def __post_init__(self) -> None:
        if isinstance(self.engine, SentenceEmbedder):  # its batches run here, chunk after chunk
            self.engine = LocalEngine(self.engine)  # type: ignore[unreachable]

    def run(self, input_path: str | os.PathLike, output_path: str | os.PathLike,
            progress: Progress | None = None) -> int:
        """Embed ``input_path`` (UTF-8 text or CoNLL-U, plain or gzip; ``-`` or a pipe is read once, so it cannot
        resume) into ``output_path``; returns the number of sentences."""
        output, ranks, model = self.output, self.ranks, self.engine.model
        options = model.options
        if options.stateful and (self.resume or ranks.world_size > 1):
            raise ElmoError("--initial-state carry carries state through the whole file: it cannot --resume or use "
                            "torchrun")
        if output.matrix and not self.selection.pooled:
            raise UsageError("--matrix stores one vector per line: it needs --pool (mean, max or first-last)")
        self.selection.check_model(model.num_layers)
        input_path, output_path = Path(input_path), Path(output_path)
        check_output(input_path, output_path, output, self.resume, ranks)
        if is_stream(input_path) and (self.resume or ranks.world_size > 1):
            raise ElmoError(f"{display_name(input_path)} is read once, as it comes: --resume and torchrun need an "
                            "input file they can read again")
        store = output_store(output.output_format).for_job(output_path, self._manifest(input_path, model), output,
                                                           self.selection, model)
        self.was_complete = False
        count = store.prepare(self.resume, ranks.is_main)
        if count is not None:
            log.info("%s is complete: nothing to resume", output_path)
            self.was_complete = True
            return count
        ranks.barrier()
        if getattr(progress, "wants_total", False) and (total := self._to_embed(input_path, store)) is not None:
            progress.set_total(total)  # type: ignore[union-attr]
        seen_keys: dict[str, int] = {}  # sentence -> its line number
        read = {"lines": 0, "chunks": 0}
        lines = read_sentences(input_path, output.input_format, output.errors, what="input file",
                               advice="fix the file or pass --errors replace", tokens=output.tokens,
                               text_field=output.text_field, id_field=output.id_field)

        def to_do() -> Iterator[Chunk]:  # this rank's chunks not done yet; every chunk counted as it is read
            while block := list(islice(lines, chunk_size(options))):
                keys = [self._key(line, seen_keys, input_path) for line in block]
                index = read["chunks"]
                read["lines"] += len(block)
                read["chunks"] += 1
                if ranks.owns(index) and not store.done(index):
                    yield Chunk(index, [line.index for line in block], keys, [line.tokens for line in block])

        try:
            for chunk, receipt in self.engine.run(self.selection, store.writer, to_do(), progress):
                store.record(chunk.index, receipt)
        except InputFileError:
            if ranks.is_main:
                store.discard()  # the input must change, so these parts could never be resumed
            raise
        n_lines, n_chunks = read["lines"], read["chunks"]
        ranks.barrier()
        if ranks.is_main:
            if n_lines == 0:
                log.warning("%s is empty: %s holds no sentences", display_name(input_path), output_path)
            store.finish(n_chunks, n_lines)
        return n_lines

    def _to_embed(self, input_path: Path, store: OutputStore) -> int | None:
        """The sentences this rank will embed (its chunks not done yet), counted up front; None for a stream."""
        n = count_sentences(input_path, self.output.input_format)
        if n is None:
            return None
        size = chunk_size(self.engine.model.options)
        return sum(min(size, n - start) for chunk, start in enumerate(range(0, n, size))
                   if self.ranks.owns(chunk) and not store.done(chunk))

    def _manifest(self, input_path: Path, model: ModelDescription) -> dict:
        """What a resumed run must share with the run that wrote the output's first chunks (the output's format
        adds its own: :meth:`~elmo.embedding.output_store.OutputStore.for_job`)."""
        output = self.output
        stat = None if is_stream(input_path) else input_path.stat()  # a stream is never resumed
        return {
            "input": display_name(input_path) if stat is None else str(input_path.resolve()),
            "input_bytes": stat and stat.st_size, "input_mtime_ns": stat and stat.st_mtime_ns,
            **self.selection.describe(), **({"matrix": True} if output.matrix else {}),
            "sentence_keys": output.use_sentence_keys, "errors": output.errors,
            "chunk_size": model.options.chunk_size,
        } | _input_settings(input_path, output) | model.identity()

    def _key(self, line: Line, seen: dict[str, int], input_path: Path) -> str:
        """The dataset name of ``line``: the sentence with sentence keys, else the key the file gives (a FASTA
        record id) or the line index; an error says why a sentence or record id cannot be an HDF5 name."""
        if not self.output.use_sentence_keys:
            if line.key is None:
                return str(line.index)
            problem = sentence_key_problem(line.key, {}, self.output.forget_sentences)  # ids: unique by the reader
            if problem:
                raise InputFileError(f"{display_name(input_path)}, line {line.line_number}: cannot use the record id "
                                     f"{line.key!r} as a key: {problem}; rename the record")
            return line.key
        key = " ".join(line.tokens)
        problem = sentence_key_problem(key, seen, self.output.forget_sentences)
        if problem:
            raise InputFileError(
                f"{display_name(input_path)}, line {line.line_number}: cannot use the sentence as a key: {problem}; "
                "drop --use-sentence-keys"
            )
        seen[key] = line.line_number
        return key


def check_output(input_path: Path, output_path: Path, output: OutputOptions, resume: bool = False,
                 ranks: DistInfo | None = None) -> None:
    """Refuse unusable input and output paths before any work (the CLI calls this before the model loads): an HDF5
    file, or with ``--format parquet`` a directory of shards (:meth:`OutputStore.check`); an existing one only with
    ``force`` or ``resume``. The record fields of an input that has none are refused, not ignored."""
    read_as = resolve_input_format(input_path, output.input_format)
    if read_as not in ("jsonl", "parquet") and (output.text_field != "text" or output.id_field is not None):
        raise UsageError(f"--text-field and --id-field name fields of JSONL or Parquet records; "
                         f"{display_name(input_path)} is read as {read_as} (--input-format)")
    output_store(output.output_format).check(input_path, output_path, output, resume, ranks or DistInfo())


def _input_settings(input_path: Path, output: OutputOptions) -> dict:
    """The manifest's entries for how the input is read, where they differ from the defaults of plain text (so a
    text job's manifest is the same whether its format was given or found from the name)."""
    input_format = resolve_input_format(input_path, output.input_format)
    fields = {"text_field": output.text_field, "id_field": output.id_field} if input_format in ("jsonl", "parquet") \
        else {}
    return ({} if input_format == "text" else {"input_format": input_format}) | (
        {} if output.tokens == "words" else {"tokens": output.tokens}) | fields


def embed_file(
    embedder: SentenceEmbedder, input_path: str | os.PathLike, output_path: str | os.PathLike, *,
    resume: bool = False, ranks: DistInfo | None = None, progress: Progress | None = None, **output: object,
) -> int:
    """:class:`EmbedFileJob` in one call: ``output`` holds :class:`OutputOptions` and
    :class:`~elmo.embedding.selection.VectorSelection` fields (``embed_file(embedder, "in.txt", "out.hdf5",
    layer="top")``, ``pool="mean"``; ``output_format="parquet"``: ``output_path`` is a directory of shards);
    returns the number of sentences."""
    chosen = {k: output.pop(k) for k in list(output) if k in SELECTION_FIELDS}
    job = EmbedFileJob(embedder, OutputOptions(**output), resume, ranks or DistInfo(),  # type: ignore[arg-type]
                       VectorSelection(**chosen))  # type: ignore[arg-type]
    return job.run(input_path, output_path, progress)
