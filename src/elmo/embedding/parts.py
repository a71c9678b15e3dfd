"""Crash-safe, resumable, multi-writer HDF5 output: one part file per chunk of input lines, merged at the end.

An HDF5 file killed in the middle of a write can be left unreadable, so a run never appends to its output.
Instead each finished chunk of lines becomes its own small HDF5 file in ``OUTPUT.parts/``, written to a temp
name and renamed, so a part either exists completely or not at all::

    out.hdf5.parts/manifest.json        the settings of the run (a resume must use the same ones)
    out.hdf5.parts/part-00000000.hdf5   datasets of lines 0 .. chunk-1, plus the keys and sentences in order
    out.hdf5.parts/part-00000001.hdf5   ...

``--resume`` skips chunks whose part exists; several processes fill disjoint chunks of the same directory; and the
final :meth:`Parts.finish` copies the parts in order into a temp file that is renamed over the output (atomic).
:class:`Parts` is the ``--format hdf5`` row of :data:`~elmo.embedding.embed_options.OUTPUT_FORMATS`; its parts are
written by :class:`PartFiles`, the part that an engine's workers get.

Every HDF5 file here is written through :func:`~elmo.runtime.atomic_files.atomic_file` (h5py's ``fileobj``
driver): HDF5 itself never sees a failed write, which on a full disk makes it crash or flood stderr; the failure is
raised between datasets, as one line naming the file, and the temporary file is removed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np

from elmo.errors import ElmoError, OutputWriteError
from elmo.runtime.atomic_files import atomic_file, first_line, is_write_failure, write_error, write_text_atomic
from elmo.runtime.text_files import STDIN, check_input

if TYPE_CHECKING:
    from elmo.embedding.chunks import Chunk, ChunkRows, Receipt
    from elmo.embedding.contract import ModelDescription
    from elmo.embedding.embed_options import OutputOptions
    from elmo.embedding.selection import VectorSelection
    from elmo.runtime.distributed import DistInfo

log = logging.getLogger(__name__)

KEYS = "__keys__"
SENTENCES = "__sentences__"
MANIFEST = "manifest.json"
SENTENCE_TO_INDEX = "sentence_to_index"
PARTS_FORMAT = 2
"""How a part stores its keys and sentences (2: as JSON bytes, :func:`_json_bytes`); a resume needs the same."""
EMBED_SETTINGS = "embed_settings"
"""The output's root attribute that holds the run's manifest (JSON), so ``--resume`` can tell a finished run of the
same job from one with a changed input or settings."""


def parts_dir(output: Path) -> Path:
    return output.with_name(output.name + ".parts")


def check_paths(input_path: Path, output: Path, force: bool = False, resume: bool = False) -> None:
    """Refuse a missing input, or an output that cannot or must not be written, before any work, so that a long
    run never ends in an error it could have given at once. An existing file is replaced only with ``force`` (with
    ``resume``, an HDF5 file is the run's finished output, which the resume checks), and never the input itself
    (also through a link)."""
    check_input(input_path, "input file")
    if str(output) == STDIN:
        raise ElmoError("-: an HDF5 file cannot be written to stdout (it needs a seekable file); give a file name")
    if output.is_dir():
        raise ElmoError(f"{output}: is a directory; give the HDF5 file to write, e.g. {output / 'embeddings.hdf5'}")
    if output.exists():
        if str(input_path) != STDIN and input_path.exists() and os.path.samefile(input_path, output):
            raise ElmoError(f"{output}: is the input file; writing to it would destroy the text: give another name")
        if not force and not (resume and h5py.is_hdf5(output)):
            raise ElmoError(f"{output} exists; pass --force to replace it")
    existing = next(p for p in output.absolute().parents if p.exists())
    if not existing.is_dir():
        raise ElmoError(f"{existing}: is a file, not a directory: {output} cannot be created")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputWriteError(f"{output.parent}: cannot create the output's directory ({e.strerror})") from e
    if not os.access(output.parent, os.W_OK | os.X_OK):
        raise OutputWriteError(f"{output.parent}: cannot write there (permission denied)")


def sentence_key_problem(key: str, seen: dict[str, int], forget_sentences: bool) -> str | None:
    """Why the sentence ``key`` cannot name a dataset of the output (None: it can); ``seen``: sentence -> line."""
    if key == "":
        return "the line is empty (an HDF5 name cannot be empty)"
    if key in seen:
        return f"it repeats line {seen[key]} (keys must be unique)"
    if "/" in key:
        return "it contains '/', which HDF5 reads as a group separator"
    if "\x00" in key:
        return "it contains a NUL character, which an HDF5 name cannot hold"
    if key == ".":
        return "'.' is HDF5's name for the file's root group"
    if key in (KEYS, SENTENCES) or (key == SENTENCE_TO_INDEX and not forget_sentences):
        return f"'{key}' names the output's own bookkeeping dataset"
    return None


HOW_PARTS_ARE_CUT = ("chunk_size", "parts_format")
"""Manifest keys that matter to unfinished parts only, not to a finished output's vectors."""


def first_change(earlier: dict, now: dict) -> str | None:
    """The first setting (by name) whose value differs between two manifests; None when they agree."""
    return min((k for k in set(earlier) | set(now) if earlier.get(k) != now.get(k)), default=None)


def complete_output(output: Path, manifest: dict) -> int | None:
    """For ``--resume``: the number of sentences of ``output`` when it is a finished run of the job that ``manifest``
    describes (nothing to resume); None when there is work to do (no output yet, or its parts are left). An output
    of another input or other settings, or one that records no settings, is one error line."""
    if parts_dir(output).exists() or not output.is_file() or not h5py.is_hdf5(output):
        return None
    redo = "rerun with --force instead of --resume to replace it"
    try:
        with h5py.File(output, "r") as f:
            stored = f.attrs.get(EMBED_SETTINGS)
            matrix = f.get(MATRIX) if MATRIX_KEYS in f else None
            index = f.get(SENTENCE_TO_INDEX)
            bookkeeping = isinstance(index, h5py.Dataset) and index.dtype.kind == "O"
            count = matrix.shape[0] if isinstance(matrix, h5py.Dataset) and matrix.ndim else len(f) - bookkeeping
    except HDF5_READ_ERRORS as e:
        raise ElmoError(f"--resume: {output}: cannot read the finished output ({first_line(e)}); {redo}") from e
    try:
        earlier = json.loads(stored)
        if not isinstance(earlier, dict):
            raise TypeError("not a JSON object")
    except (TypeError, ValueError, RecursionError):
        raise ElmoError(f"--resume: {output} is complete but records no settings of an elmo embed run (an earlier "
                        f"version or another program wrote it), so it cannot be checked; {redo}") from None
    now = json.loads(json.dumps(manifest))  # compared as stored: tuples are lists
    k = first_change({k: v for k, v in earlier.items() if k not in HOW_PARTS_ARE_CUT},
                     {k: v for k, v in now.items() if k not in HOW_PARTS_ARE_CUT})
    if k is not None:
        raise ElmoError(f"--resume: {output} is complete, but setting '{k}' was {earlier.get(k)!r} when it was "
                        f"written, now {manifest.get(k)!r}; {redo}")
    return count


def write_sentence_to_index(out: h5py.File, sentence_to_index: dict[str, str]) -> None:
    """The dataset ``allennlp elmo`` readers look for: (1,) string, a JSON object sentence -> dataset name."""
    dataset = out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
    dataset[0] = json.dumps(sentence_to_index)


@dataclass(frozen=True)
class PartFiles:
    """Writes the part files of a parts directory (:class:`~elmo.embedding.chunks.ChunkWriter`)."""

    directory: Path

    def path(self, chunk: int) -> Path:
        return self.directory / f"part-{chunk:08d}.hdf5"

    def absolute(self) -> PartFiles:
        return replace(self, directory=self.directory.absolute())

    def write(self, chunk: Chunk, rows: ChunkRows) -> Receipt:
        """Each row's vectors as a dataset named by its key, then the chunk's keys and sentences in order. A failed
        write (a full disk) stops the rows at the next one."""
        path = self.path(chunk.index)
        try:
            with atomic_file(path) as file, h5py.File(file, "w") as part:
                for i, vectors in rows:
                    part.create_dataset(chunk.keys[i], data=vectors)
                    file.raise_kept()
                # JSON, not HDF5 string arrays: a sentence may hold a NUL character, which HDF5 strings cannot
                part.create_dataset(KEYS, data=_json_bytes(list(chunk.keys)))
                part.create_dataset(SENTENCES, data=_json_bytes([" ".join(s) for s in chunk.sentences]))
        except Exception as e:
            if not is_write_failure(e):  # not a failed write (e.g. an error of the computation in the rows)
                raise
            raise write_error(path, e, _kept(self.directory)) from e
        return None  # the part is its own record


class Parts:
    """The parts directory of one output file: ``--format hdf5``
    (:class:`~elmo.embedding.output_store.OutputStore`).

    Args:
        output: the final HDF5 file.
        manifest: the run's settings; a resumed run must match them exactly.
        attributes: what made the vectors, written as the output's root attributes.
        forget_sentences: write no ``sentence_to_index`` dataset.
        matrix: the vectors of every line as the rows of one dataset, ``embeddings`` (n_lines, ...), their keys in
            ``keys``.
    """

    kind = "file"

    def __init__(self, output: str | os.PathLike, manifest: dict, attributes: dict[str, str] | None = None,
                 forget_sentences: bool = False, matrix: bool = False) -> None:
        self.output = Path(output)
        self.directory = parts_dir(self.output)
        self.manifest = manifest
        self.attributes = attributes or {}
        self.forget_sentences = forget_sentences
        self.matrix = matrix
        self.writer = PartFiles(self.directory)

    @classmethod
    def check(cls, input_path: Path, output: Path, options: OutputOptions, resume: bool, ranks: DistInfo) -> None:
        check_paths(input_path, output, options.force, resume)

    @classmethod
    def for_job(cls, output: Path, manifest: dict, options: OutputOptions, selection: VectorSelection,
                model: ModelDescription) -> Parts:
        return cls(output, manifest | {"parts_format": PARTS_FORMAT}, model.provenance(), options.forget_sentences,
                   options.matrix)

    def prepare(self, resume: bool, main: bool = True) -> int | None:
        """With ``resume``, the number of sentences of a finished output of this job (nothing to do); else create
        the directory (``main``: the one process of several that does), keeping its parts with ``resume`` if the
        settings match."""
        count = complete_output(self.output, self.manifest) if resume else None
        if count is None and main:
            self._prepare_directory(resume)
        return count

    def _prepare_directory(self, resume: bool) -> None:
        if self.directory.exists() and resume:
            self._check_manifest()
            finished = len(list(self.directory.glob("part-*.hdf5")))
            log.info("resuming: %d finished chunks in %s", finished, self.directory)
            return
        if self.directory.exists():
            log.warning("removing the parts of an earlier, unfinished run in %s (use --resume to continue it)",
                        self.directory)
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True)
        try:
            write_text_atomic(self.directory / MANIFEST, json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)  # a parts directory without settings cannot resume
            raise

    def _check_manifest(self) -> None:
        path = self.directory / MANIFEST
        try:
            earlier = json.loads(path.read_text())
            if not isinstance(earlier, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError, RecursionError) as e:
            raise ElmoError(f"{path}: cannot read the earlier run's settings ({first_line(e)}); delete "
                            f"{self.directory}") from e
        k = first_change(earlier, self.manifest)
        if k is not None:
            raise ElmoError(
                f"--resume: setting '{k}' was {earlier.get(k)!r} in the interrupted run, now {self.manifest.get(k)!r}; "
                f"rerun with the same settings or delete {self.directory}"
            )

    def path(self, chunk: int) -> Path:
        return self.writer.path(chunk)

    def done(self, chunk: int) -> bool:
        return self.path(chunk).is_file()

    def record(self, chunk: int, receipt: Receipt) -> None:
        """Nothing to do: a part that exists is finished."""

    def discard(self) -> None:
        """Remove the directory: for runs that cannot be resumed (e.g. the input has an error)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def finish(self, n_chunks: int, n_lines: int) -> None:
        """Copy parts 0 .. n_chunks-1 in order into the output (atomically), then remove the directory."""
        missing = [c for c in range(n_chunks) if not self.done(c)]
        if missing:
            raise ElmoError(
                f"{self.directory}: chunk {missing[0]} is missing ({len(missing)} in all); rerun with --resume"
            )
        forget_sentences = self.forget_sentences
        sentence_to_index: dict[str, str] = {}
        try:
            with atomic_file(self.output) as file, h5py.File(file, "w") as out:
                out.attrs.update(self.attributes)
                settings = json.dumps(self.manifest, sort_keys=True).encode("utf-8")  # fixed length: see _json_bytes
                out.attrs.create(EMBED_SETTINGS, settings, dtype=h5py.string_dtype("utf-8", len(settings)))
                rows = Rows(out) if self.matrix else None
                for chunk in range(n_chunks):
                    keys, texts = self._copy_part(chunk, out, rows, forget_sentences)
                    if not forget_sentences:
                        sentence_to_index.update(zip(texts, keys))
                    file.raise_kept()
                if not forget_sentences:
                    write_sentence_to_index(out, sentence_to_index)
        except Exception as e:
            if not is_write_failure(e):
                raise
            raise write_error(self.output, e, _kept(self.directory)) from e
        shutil.rmtree(self.directory)

    def _copy_part(self, chunk: int, out: h5py.File, rows: Rows | None, forget_sentences: bool) -> tuple[
            list[str], list[str]]:
        """Copy part ``chunk``'s vectors into ``out``; returns its keys and sentences. The output's writes never
        fail here (they are kept: :class:`~elmo.runtime.atomic_files.KeptErrorFile`), so any error is the part's:
        one line naming it."""
        path = self.path(chunk)
        try:
            with h5py.File(path, "r") as part:
                keys = _strings(part, KEYS)
                if rows is not None:
                    rows.append(keys, [_dataset(part, key)[()] for key in keys])
                else:
                    for key in keys:
                        part.copy(_dataset(part, key), out, name=key)
                texts = [] if forget_sentences else _strings(part, SENTENCES)
        except HDF5_READ_ERRORS as e:
            raise ElmoError(f"{path}: cannot read this finished part ({first_line(e)}); delete it and rerun with "
                            "--resume to embed its lines again") from e
        return keys, texts


def _kept(directory: Path) -> str:
    return f"the finished parts in {directory} are kept: free space and rerun with --resume"


HDF5_READ_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, RecursionError)
"""What h5py raises for a damaged file (its C library's failures surface as any of these), and json for the
bookkeeping datasets a part or an output holds."""


def _dataset(part: h5py.File, name: str) -> h5py.Dataset:
    found = part.get(name)
    if not isinstance(found, h5py.Dataset):
        raise ValueError(f"no dataset '{name}'")
    return found


def _json_bytes(value: object) -> np.ndarray:
    """``value`` as JSON in bytes (uint8), as a part stores its keys and sentences (and the output its settings, as
    a fixed-length string): reading them back never goes through HDF5's global heap, which variable-length strings
    use and in which one damaged byte makes libhdf5 loop forever (found by tests/faults/test_fuzz_readers.py)."""
    return np.frombuffer(json.dumps(value).encode("utf-8"), dtype=np.uint8)


def _strings(part: h5py.File, name: str) -> list[str]:
    """A part's keys or sentences: a JSON list of strings (:func:`_json_bytes`; a variable-length string in parts of
    earlier versions)."""
    dataset = _dataset(part, name)
    if dataset.dtype == np.uint8 and dataset.ndim == 1:
        text = dataset[()].tobytes().decode("utf-8")
    elif dataset.dtype.kind == "O" and dataset.shape == ():
        text = dataset.asstr()[()]
    else:
        raise ValueError(f"'{name}' is not JSON text")
    values = json.loads(text)
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise ValueError(f"'{name}' is not a JSON list of strings")
    return values


MATRIX = "embeddings"
MATRIX_KEYS = "keys"


class Rows:
    """The ``--matrix`` layout: pooled vectors as the rows of one resizable dataset, the keys beside them."""

    def __init__(self, out: h5py.File) -> None:
        self.out = out

    def append(self, keys: list[str], vectors: list) -> None:
        if not keys:
            return
        block = np.stack(vectors)  # (rows, ...) of one part
        if MATRIX not in self.out:
            self.out.create_dataset(MATRIX, shape=(0, *block.shape[1:]), maxshape=(None, *block.shape[1:]),
                                    dtype=block.dtype, chunks=(min(4096, max(1, len(block))), *block.shape[1:]))
            self.out.create_dataset(MATRIX_KEYS, shape=(0,), maxshape=(None,), dtype=h5py.string_dtype())
        matrix, names = self.out[MATRIX], self.out[MATRIX_KEYS]
        start = matrix.shape[0]
        matrix.resize(start + len(block), axis=0)
        names.resize(start + len(block), axis=0)
        matrix[start:] = block
        names[start:] = keys
