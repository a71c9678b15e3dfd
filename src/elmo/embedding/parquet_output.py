"""``elmo embed --format parquet``: a directory of Parquet shards, one per chunk of input lines, and a manifest that
makes the directory resumable and checkable without reading the shards::

    OUTDIR/_manifest.json        the run's settings, its provenance, the finished shards, whether it is complete
    OUTDIR/part-00000.parquet    lines 0 .. chunk-1 (the chunk of --chunk-size lines: the unit of --resume)
    OUTDIR/part-00001.parquet    ...

The manifest's name starts with ``_`` so that ``pyarrow.parquet.read_table(OUTDIR)`` and ``pandas.read_parquet(OUTDIR)``
skip it (they skip names starting with ``_`` or ``.``, and would fail on a JSON file), as Spark's ``_SUCCESS`` is
skipped. A shard is written under a hidden temp name in OUTDIR and renamed; then the manifest is rewritten (also
atomically) with the shard's name, first line, rows and sha256. So a killed run leaves a manifest listing exactly the
shards that were finished; ``--resume`` keeps those whose bytes still hash to the manifest's sha256, deletes any other
shard (one renamed just before the kill, one damaged since) and embeds the missing chunks.

Columns, one row per input line, in line order within a shard (rows are computed sorted by length and buffered up
to 64 MiB of vectors, a row group: a shard of more token vectors than that is in line order within each row group,
so sort by ``line`` where order matters)::

    line        int64     the 0-based line (CoNLL-U sentence, FASTA record) index
    key         string    the dataset name the HDF5 output would use ("0", "1", ..., a sentence or a record id);
                          named after --id-field for JSONL or Parquet input with one (the source's ids, as text)
    embedding   pooled:          fixed_size_list<DTYPE>[2P]                                (2P,)
                pooled, --all:   fixed_size_list<fixed_size_list<DTYPE>[2P]>[L + 1]       (L + 1, 2P), nested
                tokens:          list<fixed_size_list<DTYPE>[2P]>                         (n, 2P)
                tokens, --all:   fixed_size_list<list<fixed_size_list<DTYPE>[2P]>>[L + 1] (L + 1, n, 2P)

DTYPE is float (float32) or halffloat (``--dtype float16``); nesting keeps the HDF5 output's axes, so
``np.array(row)`` of a pooled row has the HDF5 dataset's shape.

:class:`ParquetShards` is the ``--format parquet`` row of :data:`~elmo.embedding.embed_options.OUTPUT_FORMATS`; its
shards are written by :class:`ShardFiles`, the part that an engine's workers get.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from elmo.embedding.parts import HOW_PARTS_ARE_CUT, first_change
from elmo.errors import ElmoError, OutputWriteError, UsageError
from elmo.runtime.atomic_files import default_permissions, is_write_failure, sync_file, write_error, write_json_atomic
from elmo.runtime.extras import require
from elmo.runtime.hashing import sha256_file
from elmo.runtime.text_files import STDIN, check_input

if TYPE_CHECKING:
    from elmo.embedding.chunks import Chunk, ChunkRows, Receipt
    from elmo.embedding.contract import ModelDescription
    from elmo.embedding.embed_options import OutputOptions
    from elmo.embedding.selection import VectorSelection
    from elmo.runtime.distributed import DistInfo

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
LAYOUT = "elmo-embed-parquet"
"""The manifest's ``format``: tells a directory this module wrote (which a rerun may replace) from any other."""
WHAT = "elmo embed --format parquet"
SHARD = re.compile(r"part-\d{5,}\.parquet")
ROW_GROUP_BYTES = 64 << 20
"""Vectors buffered before a row group is written: a chunk's token vectors can be gigabytes, one group is bounded."""


def shard_name(chunk: int) -> str:
    return f"part-{chunk:05d}.parquet"


def _ours(directory: Path) -> list[Path]:
    """The files of this layout in ``directory``: shards, the manifest, and temp files a killed run left."""
    return [p for p in directory.iterdir() if SHARD.fullmatch(p.name) or p.name == MANIFEST
            or (p.name.startswith((".part-", f".{MANIFEST}.")) and p.name.endswith(".tmp"))]


def holds_output(directory: Path) -> bool:
    """Whether ``directory`` holds a manifest of this layout (an earlier run, which a rerun may replace)."""
    try:
        return json.loads((directory / MANIFEST).read_text(encoding="utf-8")).get("format") == LAYOUT
    except (OSError, ValueError, AttributeError):
        return False


def check_shard_directory(input_path: Path, directory: Path, force: bool = False, resume: bool = False) -> None:
    """Refuse, before any work, an output directory that cannot or must not be written: a file, or a non-empty
    directory, unless ``force`` (its ``part-*.parquet`` are then replaced) or, for an earlier run's shards,
    ``resume`` (which continues them)."""
    check_input(input_path, "input file")
    require("pyarrow.parquet", "parquet", WHAT)  # before a model loads
    if str(directory) == STDIN:
        raise ElmoError("-: --format parquet writes a directory of shards, not stdout; give a directory name")
    if directory.exists() and not directory.is_dir():
        raise ElmoError(f"{directory}: exists and is not a directory; --format parquet writes a directory of shards")
    if directory.is_dir():
        if str(input_path) != STDIN and input_path.exists() and input_path.resolve() in {
                p.resolve() for p in _ours(directory)}:
            raise ElmoError(f"{input_path}: the input is one of the output's files; writing would destroy it: give "
                            "another output directory")
        if not force and not (resume and holds_output(directory)) and any(directory.iterdir()):
            raise ElmoError(f"{directory} exists and is not empty; pass --force to replace it")
    existing = next(p for p in directory.absolute().parents if p.exists())
    if not existing.is_dir():
        raise ElmoError(f"{existing}: is a file, not a directory: {directory} cannot be created")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputWriteError(f"{directory}: cannot create the output directory ({e.strerror})") from e
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputWriteError(f"{directory}: cannot write there (permission denied)")


def embedding_column(pa: Any, vectors: Sequence[np.ndarray], pooled: bool, all_layers: bool, dim: int,
                     dtype: str) -> Any:
    """The ``embedding`` column of rows whose vectors are ``vectors`` (each a :meth:`VectorSelection.apply`
    result), in the nesting of the module's docstring."""
    value_type = pa.float16() if dtype == "float16" else pa.float32()
    dim = vectors[0].shape[-1] if vectors else dim  # the vectors' own (an --align matrix could change it)

    def flat(arrays: Sequence[np.ndarray]) -> Any:  # (..., 2P) blocks -> fixed_size_list<DTYPE>[2P], row-major
        values = np.concatenate([a.reshape(-1) for a in arrays]) if arrays else np.zeros(0, dtype)
        return pa.FixedSizeListArray.from_arrays(pa.array(values.astype(dtype, copy=False), type=value_type), dim)

    if pooled:
        column = flat(vectors)  # rows (* (L + 1)) of (2P,)
        return pa.FixedSizeListArray.from_arrays(column, vectors[0].shape[0]) if all_layers and vectors else column
    lengths = [v.shape[-2] for v in vectors for _ in range(v.shape[0] if all_layers else 1)]  # tokens per list
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)  # a row group holds < 2**31 tokens
    lists = pa.ListArray.from_arrays(pa.array(offsets), flat(vectors))  # per row (and layer with --all): (n, 2P)
    return pa.FixedSizeListArray.from_arrays(lists, vectors[0].shape[0]) if all_layers and vectors else lists


@dataclass(frozen=True)
class ShardFiles:
    """Writes the shard files of a directory, not the manifest (:class:`~elmo.embedding.chunks.ChunkWriter`);
    :class:`ParquetShards` lists what it wrote.

    ``pooled``, ``all_layers``, ``dim``, ``dtype``: the shape of the ``embedding`` column (module docstring);
    ``key_column``: the name of the keys' column (``--id-field`` of records input, else ``key``).
    """

    directory: Path
    pooled: bool
    all_layers: bool
    dim: int
    dtype: str
    key_column: str = "key"

    def absolute(self) -> ShardFiles:
        return replace(self, directory=self.directory.absolute())

    def write(self, chunk: Chunk, rows: ChunkRows) -> Receipt:
        """The chunk's shard; returns its manifest entry (:meth:`entry`)."""
        with self._writing(chunk.index, chunk.lines, chunk.keys) as add:
            for i, vectors in rows:
                add(i, vectors)
        return self.entry(chunk.index, chunk.lines)

    @contextmanager
    def _writing(self, chunk: int, lines: Sequence[int], keys: Sequence[str]) -> Iterator[Callable[[int, Any], None]]:
        """``add(i, vectors)`` for row ``i`` of the chunk (line ``lines[i]``, key ``keys[i]``), in any order
        (memory: one row group); the shard gets its name only when the block finishes without an error."""
        pq = require("pyarrow.parquet", "parquet", WHAT)
        path = self.directory / shard_name(chunk)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=self.directory)
        os.close(fd)
        tmp = Path(name)
        buffered: list[tuple[int, np.ndarray]] = []
        writer = None
        size = 0  # bytes buffered

        def flush() -> None:
            nonlocal writer, size
            size = 0
            if buffered:
                buffered.sort(key=lambda row: row[0])  # line order within a row group
                table = self._table([i for i, _ in buffered], [v for _, v in buffered], lines, keys)
                writer = writer or pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)  # one row group
                buffered.clear()

        def add(i: int, vectors: np.ndarray) -> None:
            nonlocal size
            buffered.append((i, vectors))
            size += vectors.nbytes
            if size >= ROW_GROUP_BYTES:
                flush()

        try:
            try:
                yield add
                flush()
            finally:
                if writer is not None:
                    writer.close()
            sync_file(tmp)
            default_permissions(tmp)
            os.replace(tmp, path)
        except Exception as e:
            if not is_write_failure(e):
                raise
            raise write_error(path, e, _kept(self.directory)) from e
        finally:
            tmp.unlink(missing_ok=True)

    def entry(self, chunk: int, lines: Sequence[int]) -> dict:
        """The manifest's entry of a finished shard: its file, first line, rows and sha256."""
        path = self.directory / shard_name(chunk)
        return {"file": path.name, "first_line": min(lines, default=0), "rows": len(lines),
                "sha256": sha256_file(path)}

    def embedding_type(self) -> str:
        """The column's type in words, for a reader of the manifest (the shards hold the exact schema)."""
        axes = ("L + 1, " if self.all_layers else "") + ("" if self.pooled else "n, ") + str(self.dim)
        return f"{self.dtype} ({axes})"

    def _table(self, rows: Sequence[int], vectors: Sequence[np.ndarray], lines: Sequence[int],
               keys: Sequence[str]) -> Any:
        pa = require("pyarrow", "parquet", WHAT)
        return pa.table({
            "line": pa.array([lines[i] for i in rows], type=pa.int64()),
            self.key_column: pa.array([keys[i] for i in rows], type=pa.string()),
            "embedding": embedding_column(pa, vectors, self.pooled, self.all_layers, self.dim, self.dtype),
        })


class ParquetShards:
    """The shard directory of one run and its manifest: ``--format parquet``
    (:class:`~elmo.embedding.output_store.OutputStore`), kept by one process (``torchrun`` ranks are refused); the
    shards are written by ``writer``, here or in the workers of an engine.

    Args:
        writer: the directory and the shape of its ``embedding`` column.
        settings: the run's settings, as the HDF5 output stores them in ``embed_settings``; a resume must match.
        provenance: what made the vectors (model, precision, device, initial state), kept in the manifest.
    """

    kind = "directory"

    def __init__(self, writer: ShardFiles, settings: dict, provenance: dict[str, str]) -> None:
        self.writer = writer
        self.directory = writer.directory
        self.settings = json.loads(json.dumps(settings))  # as stored: tuples are lists
        self.provenance = provenance
        self.shards: dict[int, dict] = {}  # chunk -> its manifest entry
        require("pyarrow.parquet", "parquet", WHAT)

    @classmethod
    def check(cls, input_path: Path, directory: Path, options: OutputOptions, resume: bool, ranks: DistInfo) -> None:
        if options.matrix:
            raise UsageError("--matrix is a layout of HDF5 output: --format parquet already stores one row per line")
        if ranks.world_size > 1:
            raise ElmoError("--format parquet is written by one process: run it without torchrun")
        check_shard_directory(input_path, directory, options.force, resume)

    @classmethod
    def for_job(cls, directory: Path, manifest: dict, options: OutputOptions, selection: VectorSelection,
                model: ModelDescription) -> ParquetShards:
        """The settings name the format; the keys' column is named after ``--id-field`` (records input)."""
        key_column = manifest.get("id_field") or "key"
        if key_column in ("line", "embedding"):
            raise UsageError(f"--id-field {key_column}: Parquet output has a column '{key_column}' of its own; "
                             "rename the field in the input")
        writer = ShardFiles(directory, pooled=selection.pooled, all_layers=selection.layer == "all",
                            dim=model.output_dim, dtype=selection.dtype, key_column=key_column)
        return cls(writer, manifest | {"output_format": "parquet"}, model.provenance())

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    def prepare(self, resume: bool, main: bool = True) -> int | None:
        """Start the directory: with ``resume`` keep the earlier run's intact shards (settings must match), else
        replace its files. Returns the number of lines when ``resume`` finds the run complete (nothing to do).
        ``main`` is always this one process."""
        self.directory.mkdir(parents=True, exist_ok=True)
        earlier = self._read_manifest() if resume and self.manifest_path.is_file() else None
        if earlier is not None:
            count = self._keep_intact(earlier)
            if count is not None:
                return count
        else:
            if old := _ours(self.directory):
                log.warning("replacing %d files of an earlier run in %s%s", len(old), self.directory,
                            "" if resume else " (use --resume to continue it)")
                for path in old:
                    path.unlink()
            self.shards = {}
        self._write_manifest(complete=False)
        return None

    def _read_manifest(self) -> dict:
        redo = "rerun without --resume to replace it"
        try:
            earlier = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ElmoError(f"--resume: {self.manifest_path}: cannot read the earlier run's manifest ({e}); {redo}") \
                from None
        if not isinstance(earlier, dict) or earlier.get("format") != LAYOUT or not isinstance(
                earlier.get("embed_settings"), dict) or not isinstance(earlier.get("shards"), list):
            raise ElmoError(f"--resume: {self.manifest_path}: is not the manifest of an elmo Parquet output; {redo}")
        return earlier

    def _keep_intact(self, earlier: dict) -> int | None:
        """Check the earlier run's settings, keep its shards that hash as the manifest says and delete every other
        shard; the line count when nothing is left to do."""
        complete = earlier.get("complete") is True
        stored = earlier["embed_settings"]
        ignored = HOW_PARTS_ARE_CUT if complete else ()  # a finished output's vectors do not depend on its chunks
        k = first_change({k: v for k, v in stored.items() if k not in ignored},
                         {k: v for k, v in self.settings.items() if k not in ignored})
        if k is not None:
            self._refuse(k, stored, "complete run," if complete else "interrupted run,")
        intact, listed = {}, set()
        for entry in earlier["shards"]:
            try:
                chunk = int(SHARD.fullmatch(entry["file"]).group()[5:-8])  # type: ignore[union-attr]
                path = self.directory / entry["file"]
                listed.add(path.name)
                if path.is_file() and sha256_file(path) == entry["sha256"]:
                    intact[chunk] = entry
            except (AttributeError, KeyError, TypeError, ValueError):
                raise ElmoError(f"--resume: {self.manifest_path}: a damaged shard entry {entry!r}; rerun without "
                                "--resume to replace the output") from None
        if complete and len(intact) == len(earlier["shards"]):
            return int(earlier.get("lines", sum(e["rows"] for e in intact.values())))
        if (k := first_change(stored, self.settings)) is not None:  # shards to redo must be cut the same way
            self._refuse(k, stored, "run whose damaged shards are to be redone,")
        self.shards = intact
        for path in _ours(self.directory):
            if path.name != MANIFEST and path.name not in {e["file"] for e in intact.values()}:
                log.warning("removing %s: %s", path, "missing or damaged (it does not match its sha256 in the "
                            "manifest): it is embedded again" if path.name in listed else "not a finished shard")
                path.unlink()
        log.info("resuming: %d finished shards in %s", len(self.shards), self.directory)
        return None

    def _refuse(self, k: str, stored: dict, run: str) -> None:
        raise ElmoError(f"--resume: {self.directory}: setting '{k}' was {stored.get(k)!r} in the {run} now "
                        f"{self.settings.get(k)!r}; rerun with the same settings, or without --resume to replace it")

    def done(self, chunk: int) -> bool:
        return chunk in self.shards

    def record(self, chunk: int, receipt: Receipt) -> None:
        """List a finished shard (:meth:`ShardFiles.entry`) in the manifest."""
        self.shards[chunk] = receipt  # type: ignore[assignment]
        self._write_manifest(complete=False)

    def finish(self, n_chunks: int, n_lines: int) -> None:
        """Mark the output complete: every chunk 0 .. n_chunks-1 has its shard."""
        missing = [c for c in range(n_chunks) if not self.done(c)]
        if missing:
            raise ElmoError(f"{self.directory}: chunk {missing[0]} is missing ({len(missing)} in all); rerun with "
                            "--resume")
        for path in _ours(self.directory):  # a retried chunk's temp file, left by a worker that was killed
            if path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
        self._write_manifest(complete=True, lines=n_lines)

    def discard(self) -> None:
        """Remove this layout's files: for runs that cannot be resumed (the input has an error)."""
        for path in _ours(self.directory):
            path.unlink(missing_ok=True)

    def _write_manifest(self, complete: bool, lines: int | None = None) -> None:
        manifest = {
            "format": LAYOUT, "version": 1, "complete": complete, **({"lines": lines} if complete else {}),
            "embed_settings": self.settings, "provenance": self.provenance,
            "columns": {"line": "int64", self.writer.key_column: "string", "embedding": self.writer.embedding_type()},
            "shards": [self.shards[c] for c in sorted(self.shards)],
        }
        try:
            write_json_atomic(self.manifest_path, manifest)
        except OSError as e:
            raise write_error(self.manifest_path, e, _kept(self.directory)) from e


def _kept(directory: Path) -> str:
    return f"the finished shards in {directory} are kept: free space and rerun with --resume"
