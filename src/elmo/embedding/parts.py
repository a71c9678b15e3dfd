"""Crash-safe, resumable, multi-writer HDF5 output: one part file per chunk of input lines, merged at the end.

An HDF5 file killed in the middle of a write can be left unreadable, so a run never appends to its output.
Instead each finished chunk of lines becomes its own small HDF5 file in ``OUTPUT.parts/``, written to a temp
name and renamed, so a part either exists completely or not at all::

    out.hdf5.parts/manifest.json        the settings of the run (a resume must use the same ones)
    out.hdf5.parts/part-00000000.hdf5   datasets of lines 0 .. chunk-1, plus the keys and sentences in order
    out.hdf5.parts/part-00000001.hdf5   ...

``--resume`` skips chunks whose part exists; several processes fill disjoint chunks of the same directory; and the
final :meth:`Parts.merge` copies the parts in order into a temp file that is renamed over the output (atomic).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import h5py

from elmo.errors import ElmoError, OutputWriteError
from elmo.runtime.atomic_files import errno_of, write_failure

log = logging.getLogger(__name__)

KEYS = "__keys__"
SENTENCES = "__sentences__"
MANIFEST = "manifest.json"


def parts_dir(output: Path) -> Path:
    return output.with_name(output.name + ".parts")


class Parts:
    """The parts directory of one output file.

    Args:
        output: the final HDF5 file.
        manifest: the run's settings; a resumed run must match them exactly.
    """

    def __init__(self, output: str | os.PathLike, manifest: dict) -> None:
        self.output = Path(output)
        self.directory = parts_dir(self.output)
        self.manifest = manifest

    def prepare(self, resume: bool) -> None:
        """Create the directory (one process only); with ``resume`` keep its parts if the settings match."""
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
        (self.directory / MANIFEST).write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")

    def _check_manifest(self) -> None:
        path = self.directory / MANIFEST
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ElmoError(f"{path}: cannot read the earlier run's settings ({e}); delete {self.directory}") from e
        changed = sorted(k for k in set(earlier) | set(self.manifest) if earlier.get(k) != self.manifest.get(k))
        if changed:
            k = changed[0]
            raise ElmoError(
                f"--resume: setting '{k}' was {earlier.get(k)!r} in the interrupted run, now {self.manifest.get(k)!r}; "
                f"rerun with the same settings or delete {self.directory}"
            )

    def path(self, chunk: int) -> Path:
        return self.directory / f"part-{chunk:08d}.hdf5"

    def done(self, chunk: int) -> bool:
        return self.path(chunk).is_file()

    @contextmanager
    def writing(self, chunk: int, keys: Sequence[str], sentences: Sequence[str]) -> Iterator[h5py.File]:
        """An open part file to add the chunk's datasets to, as they are computed (memory: one batch).

        The part gets its final name only when the block finishes without an error.
        """
        tmp = self.path(chunk).with_suffix(".tmp")
        try:
            with h5py.File(tmp, "w") as f:
                yield f
                # JSON, not HDF5 string arrays: a sentence may hold a NUL character, which HDF5 strings cannot
                f.create_dataset(KEYS, data=json.dumps(list(keys)), dtype=h5py.string_dtype())
                f.create_dataset(SENTENCES, data=json.dumps(list(sentences)), dtype=h5py.string_dtype())
            os.replace(tmp, self.path(chunk))
        except (OSError, RuntimeError) as e:
            if errno_of(e) is None:  # not a failed write (e.g. an error of the computation in the block)
                raise
            raise OutputWriteError(
                f"{tmp}: cannot write ({write_failure(e)}); the finished parts in {self.directory} are kept: free "
                "space and rerun with --resume"
            ) from e
        finally:
            tmp.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove the directory: for runs that cannot be resumed (e.g. the input has an error)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def merge(self, n_chunks: int, forget_sentences: bool) -> None:
        """Copy parts 0 .. n_chunks-1 in order into the output (atomically), then remove the directory."""
        missing = [c for c in range(n_chunks) if not self.done(c)]
        if missing:
            raise ElmoError(
                f"{self.directory}: chunk {missing[0]} is missing ({len(missing)} in all); rerun with --resume"
            )
        tmp = self.output.with_name(f".{self.output.name}.tmp")
        sentence_to_index: dict[str, str] = {}
        try:
            with h5py.File(tmp, "w") as out:
                for chunk in range(n_chunks):
                    with h5py.File(self.path(chunk), "r") as part:
                        keys = json.loads(part[KEYS].asstr()[()])
                        for key in keys:
                            part.copy(part[key], out, name=key)
                        if not forget_sentences:
                            texts = json.loads(part[SENTENCES].asstr()[()])
                            sentence_to_index.update(zip(texts, keys))
                if not forget_sentences:
                    dataset = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
                    dataset[0] = json.dumps(sentence_to_index)
            os.replace(tmp, self.output)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if isinstance(e, (OSError, RuntimeError)) and errno_of(e) is not None:  # h5py: some as RuntimeError
                raise OutputWriteError(
                    f"{self.output}: cannot write ({write_failure(e)}); the finished parts in {self.directory} are "
                    "kept: free space and rerun with --resume"
                ) from e
            raise
        shutil.rmtree(self.directory)
