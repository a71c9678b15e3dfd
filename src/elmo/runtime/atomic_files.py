"""Atomic file writes: write a temporary file beside the target, sync it, then rename it into place.

Readers (and a job resumed after a crash) see either the old file or the complete new one, never half a file.
A write that fails (a full disk, a file-size limit) removes its temporary file and is one
:class:`~elmo.errors.OutputWriteError` naming the file the user asked for (``out.txt: cannot write (No space left on
device)``), never the temporary name. A library that cannot survive a failed write (HDF5) writes through
:func:`atomic_file` instead, whose file object keeps the failure until the writer asks for it.
A directory a command writes as a whole (a converted or exported model, a task model) is built the same way:
:func:`replace_directory` fills a temporary sibling and swaps it into place, and refuses to replace an existing
non-empty directory unless asked (``force``, the commands' ``--force``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from elmo.errors import ConfigError, ElmoError, OutputWriteError


def default_permissions(path: str | os.PathLike) -> None:
    """Give a ``mkstemp`` file (created 0600) the permissions a plain ``open`` would: 0666 minus the umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then sync the finished file and move it to ``path``; on any error nothing is left
    behind, and a failed write is one :class:`OutputWriteError` naming ``path``."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        sync_file(tmp)
        default_permissions(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if is_write_failure(e):
            raise write_error(path, e) from e
        raise


def sync_file(path: str | os.PathLike) -> None:
    """Flush a written file to the disk before it is renamed into place: a delayed write error (ENOSPC or EIO on a
    network file system) surfaces here instead of being lost, and a crash never leaves a renamed but empty file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class KeptErrorFile(io.RawIOBase):
    """A new binary file for a library that cannot survive a failed write of its own.

    HDF5 (h5py) crashes (a segmentation fault) or prints hundreds of "Exception ignored" lines when its buffered
    writes fail on a full disk, because the failure comes back inside its flushes and finalizers. Written through
    this file object (h5py's ``fileobj`` driver), a write that fails is kept, not raised: the library carries on as
    if it had succeeded, every byte from then on is held in memory so that what it reads back is what it wrote, and
    the writer raises the kept error (:meth:`raise_kept`) at a point it controls, between its own steps and before
    the file is renamed into place. Memory after a failure grows only by what the library writes until then.
    """

    def __init__(self, fd: int, name: str) -> None:
        super().__init__()
        self.fd = fd
        self.name = name
        self.error: OSError | None = None
        """The first failed write (None: every byte reached the file)."""
        self._position = 0
        self._size = 0
        self._held: list[tuple[int, bytes]] = []  # (offset, bytes) written since the failure, in order

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self.error is None:
            done = 0
            try:
                while done < len(view):
                    done += os.pwrite(self.fd, view[done:], self._position + done)
            except OSError as e:
                self.error = e
        if self.error is not None:
            self._held.append((self._position, bytes(view)))
        self._position += len(view)
        self._size = max(self._size, self._position)
        return len(view)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._size - self._position))
        data = bytearray(os.pread(self.fd, n, self._position)) if n else bytearray()
        data.extend(bytes(n - len(data)))  # never written, or never reached the disk: zeros, then the held bytes
        for offset, held in self._held:
            start, stop = max(offset, self._position), min(offset + len(held), self._position + n)
            if start < stop:
                data[start - self._position : stop - self._position] = held[start - offset : stop - offset]
        view[:n] = data
        self._position += n
        return n

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if self.error is None:
            try:
                os.ftruncate(self.fd, size)
            except OSError as e:
                self.error = e
        self._size = size
        self._held = [(offset, held[: size - offset]) for offset, held in self._held if offset < size]
        return size

    def raise_kept(self) -> None:
        """Raise the failed write, if one failed."""
        if self.error is not None:
            raise self.error

    def sync(self) -> None:
        """Raise a kept failure, else flush the file to the disk (where a delayed write error surfaces)."""
        self.raise_kept()
        os.fsync(self.fd)

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[KeptErrorFile]:
    """A new file at ``path``, written through a :class:`KeptErrorFile` in the block: when the block ends, a kept
    write failure is raised, else the file is synced and renamed into place. On any error the temporary file is
    removed and ``path`` is as it was; the caller turns a failed write into its own one-line message
    (:func:`write_error`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    file = KeptErrorFile(fd, tmp)
    try:
        yield file
        file.sync()
        file.close()
        default_permissions(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            file.close()
        Path(tmp).unlink(missing_ok=True)
        raise


def check_destination(path: str | os.PathLike, force: bool = False) -> None:
    """Refuse (one line naming ``--force``) a destination that exists and is not an empty directory, unless
    ``force``; a file where a directory is to go is refused even with ``force``."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} exists and is not a directory")
    if not force and path.is_dir() and any(path.iterdir()):
        raise ConfigError(f"{path} exists and is not empty; pass --force to replace it")


def replace_directory(path: str | os.PathLike, build: Callable[[Path], Any], force: bool = False) -> Path:
    """Make the directory ``path`` as a whole: ``build(tmp)`` fills a new temporary sibling (same parent, so the
    renames are atomic), which then takes ``path``'s place: the old directory is renamed away, the new one renamed
    in, and the old one deleted, so no file of the old directory survives. An existing non-empty ``path`` is
    refused (:func:`check_destination`) unless ``force``. On any error in ``build`` the temporary directory is
    removed and ``path`` is untouched; a process killed during the swap leaves the old directory or the new one
    (between the two renames, the old one inside the hidden sibling ``.NAME.*.old/``)."""
    path = Path(path)
    check_destination(path, force)
    existed = path.is_dir() and any(path.iterdir())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; a plain mkdir would not
        build(tmp)
        check_destination(path, force)  # again: something may have written there while ``build`` ran
        old = None
        if os.path.lexists(path):
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            try:
                os.rename(path, old / path.name)
            except BaseException:
                old.rmdir()
                raise
        try:
            os.rename(tmp, path)
        except BaseException:
            if old is not None:
                os.rename(old / path.name, path)
                old.rmdir()
            raise
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_write_failure(e):  # named as the user gave it, not by the temporary sibling it failed in
            raise write_error(path, e, f"{path} is as it was" if existed else "nothing was written") from e
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomic(path, write)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def errno_of(error: BaseException) -> int | None:
    """The OS error number behind a failed write, also where a library reports it only in its message
    (h5py: ``errno = 27``, safetensors: ``os error 27``)."""
    code = getattr(error, "errno", None)
    if code:
        return code
    found = re.search(r"errno = (\d+)|os error (\d+)|\[Errno (\d+)\]", str(error))
    return int(next(g for g in found.groups() if g)) if found else None


def first_line(error: BaseException) -> str:
    """An exception's message as one line (library messages can span many)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def write_failure(error: BaseException) -> str:
    """A one-line reason for a failed write ("File too large", "No space left on device", ...)."""
    code = errno_of(error)
    return os.strerror(code) if code else first_line(error)


def is_write_failure(error: BaseException) -> bool:
    """Whether ``error`` is a failed write to report as such: an OS error (also one a library reports in its message:
    h5py, safetensors), or an :class:`OutputWriteError` raised further in; not the project's other errors, and not
    an interruption."""
    if isinstance(error, OutputWriteError):
        return True
    return isinstance(error, Exception) and not isinstance(error, ElmoError) and errno_of(error) is not None


def write_error(path: str | os.PathLike, error: BaseException, advice: str = "") -> OutputWriteError:
    """The one line of a failed write of ``path``: ``PATH: cannot write (No space left on device); ADVICE``, with
    the error number kept (``errno``) for callers that tell the reasons apart."""
    failure = OutputWriteError(f"{path}: cannot write ({write_failure(error)})" + (f"; {advice}" if advice else ""))
    failure.errno = errno_of(error)
    return failure
