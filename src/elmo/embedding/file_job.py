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

How a file is processed: lines are read lazily in chunks of ``chunk_size``; each chunk is batched by
:func:`~elmo.embedding.contract.embed_unordered` and written as a part file (``elmo.embedding.parts``), which makes
``resume`` and ``torchrun`` ranks possible; the parts are merged into the output at the end, atomically. The job
takes any :class:`~elmo.embedding.contract.SentenceEmbedder`: a model here or a service.

With ``output_format="parquet"`` (``--format parquet``) each chunk becomes a Parquet shard of an output directory
instead, listed in its manifest as it is finished (``elmo.embedding.parquet_output``; one process, no merge).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from elmo.embedding.chunks import Chunk, ChunkEngine, local_engine
from elmo.embedding.contract import Progress, SentenceEmbedder, chunk_size
from elmo.embedding.embed_options import OutputOptions
from elmo.embedding.parquet_output import ParquetShards, ShardFiles, check_shard_directory
from elmo.embedding.parts import Parts, check_paths, complete_output, sentence_key_problem
from elmo.embedding.selection import SELECTION_FIELDS, VectorSelection
from elmo.errors import ElmoError, InputFileError, UsageError
from elmo.runtime.distributed import DistInfo
from elmo.runtime.text_files import display_name, is_stream
from elmo.sentences import Line, count_sentences, read_sentences, resolve_input_format

log = logging.getLogger(__name__)


@dataclasses.dataclass
class EmbedFileJob:
    """Embed every sentence of a file with ``embedder`` into one HDF5 file (or a directory of Parquet shards), as
    ``output`` says.

    ``resume``: continue an interrupted run of the same job: only missing chunks are computed. ``ranks``: this
    process's share of a ``torchrun`` job (default: the only process).
    """

    embedder: SentenceEmbedder
    output: OutputOptions = dataclasses.field(default_factory=OutputOptions)
    resume: bool = False
    ranks: DistInfo = dataclasses.field(default_factory=DistInfo)
    selection: VectorSelection = dataclasses.field(default_factory=VectorSelection)
    """Which layers, pooled or not, in which dtype (``elmo.embedding.selection``)."""
    engine: ChunkEngine = local_engine
    """What embeds the chunks and writes their files (``elmo.embedding.chunks``): here, or Ray actors."""
    was_complete: bool = dataclasses.field(default=False, init=False, repr=False)
    """Set by :meth:`run`: ``resume`` found the output finished by the same job, and nothing was written."""

    def run(self, input_path: str | os.PathLike, output_path: str | os.PathLike,
            progress: Progress | None = None) -> int:
        """Embed ``input_path`` (UTF-8 text or CoNLL-U, plain or gzip; ``-`` or a pipe is read once, so it cannot
        resume) into ``output_path``; returns the number of sentences."""
        output, ranks, options = self.output, self.ranks, self.embedder.options
        if options.stateful and (self.resume or ranks.world_size > 1):
            raise ElmoError("--initial-state carry carries state through the whole file: it cannot --resume or use "
                            "torchrun")
        if output.matrix and not self.selection.pooled:
            raise UsageError("--matrix stores one vector per line: it needs --pool (mean, max or first-last)")
        self.selection.check_model(self.embedder.num_layers)
        input_path, output_path = Path(input_path), Path(output_path)
        parquet = output.output_format == "parquet"
        if parquet and output.matrix:
            raise UsageError("--matrix is a layout of HDF5 output: --format parquet already stores one row per line")
        if parquet and ranks.world_size > 1:
            raise ElmoError("--format parquet is written by one process: run it without torchrun")
        check_output(input_path, output_path, output, self.resume)
        if is_stream(input_path) and (self.resume or ranks.world_size > 1):
            raise ElmoError(f"{display_name(input_path)} is read once, as it comes: --resume and torchrun need an "
                            "input file they can read again")
        manifest = self._manifest(input_path)
        self.was_complete = False
        if parquet:
            store: Parts | ParquetShards = self._shards(output_path, manifest)
            count = store.prepare(self.resume)
        else:
            count = complete_output(output_path, manifest) if self.resume else None
        if count is not None:
            log.info("%s is complete: nothing to resume", output_path)
            self.was_complete = True
            return count
        if not parquet:
            store = Parts(output_path, manifest)
            if ranks.is_main:
                store.prepare(self.resume)
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

        target = store.files if isinstance(store, ParquetShards) else store
        try:
            for chunk, entry in self.engine(self.embedder, self.selection, target, to_do(), progress):
                if isinstance(store, ParquetShards) and entry is not None:
                    store.record(chunk.index, entry)
        except InputFileError:
            if ranks.is_main:
                store.discard()  # the input must change, so these parts could never be resumed
            raise
        n_lines, n_chunks = read["lines"], read["chunks"]
        ranks.barrier()
        if ranks.is_main:
            if n_lines == 0:
                log.warning("%s is empty: %s holds no sentences", display_name(input_path), output_path)
            if isinstance(store, ParquetShards):
                store.finish(n_chunks, n_lines)
            else:
                store.merge(n_chunks, output.forget_sentences, self.embedder.provenance(), output.matrix)
        return n_lines

    def _shards(self, directory: Path, manifest: dict) -> ParquetShards:
        """The shard directory of ``--format parquet``; its settings name the format (the HDF5 parts' does not
        apply)."""
        settings = {k: v for k, v in manifest.items() if k != "parts_format"} | {"output_format": "parquet"}
        key_column = manifest.get("id_field") or "key"  # records input keeps its id field's name
        if key_column in ("line", "embedding"):
            raise UsageError(f"--id-field {key_column}: Parquet output has a column '{key_column}' of its own; "
                             "rename the field in the input")
        files = ShardFiles(directory, pooled=self.selection.pooled, all_layers=self.selection.layer == "all",
                           dim=self.embedder.output_dim, dtype=self.selection.dtype, key_column=key_column)
        return ParquetShards(files, settings, self.embedder.provenance())

    def _to_embed(self, input_path: Path, parts: Parts | ParquetShards) -> int | None:
        """The sentences this rank will embed (its chunks not done yet), counted up front; None for a stream."""
        n = count_sentences(input_path, self.output.input_format)
        if n is None:
            return None
        size = chunk_size(self.embedder.options)
        return sum(min(size, n - start) for chunk, start in enumerate(range(0, n, size))
                   if self.ranks.owns(chunk) and not parts.done(chunk))

    def _manifest(self, input_path: Path) -> dict:
        """What a resumed run must share with the run that wrote the parts."""
        output = self.output
        stat = None if is_stream(input_path) else input_path.stat()  # a stream is never resumed
        return {
            "input": display_name(input_path) if stat is None else str(input_path.resolve()),
            "input_bytes": stat and stat.st_size, "input_mtime_ns": stat and stat.st_mtime_ns,
            **self.selection.describe(), **({"matrix": True} if output.matrix else {}),
            "sentence_keys": output.use_sentence_keys, "errors": output.errors,
            "chunk_size": self.embedder.options.chunk_size,
            "parts_format": 2,  # 2: keys and sentences of a part stored as JSON
        } | _input_settings(input_path, output) | self.embedder.identity()

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


def check_output(input_path: Path, output_path: Path, output: OutputOptions, resume: bool = False) -> None:
    """Refuse unusable input and output paths before any work (the CLI calls this before the model loads): an HDF5
    file, or with ``--format parquet`` a directory of shards; an existing one only with ``force`` or ``resume``. The
    record fields of an input that has none are refused, not ignored."""
    read_as = resolve_input_format(input_path, output.input_format)
    if read_as not in ("jsonl", "parquet") and (output.text_field != "text" or output.id_field is not None):
        raise UsageError(f"--text-field and --id-field name fields of JSONL or Parquet records; "
                         f"{display_name(input_path)} is read as {read_as} (--input-format)")
    if output.output_format == "parquet":
        check_shard_directory(input_path, output_path, output.force, resume)
    else:
        check_paths(input_path, output_path, output.force, resume)


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
