"""Atomic file writes: write a temporary file beside the target, then rename it into place.

Readers (and a job resumed after a crash) see either the old file or the complete new one, never half a file.
A directory a command writes as a whole (a converted or exported model, a task model) is built the same way:
:func:`replace_directory` fills a temporary sibling and swaps it into place, and refuses to replace an existing
non-empty directory unless asked (``force``, the commands' ``--force``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elmo.errors import ConfigError


def default_permissions(path: str | os.PathLike) -> None:
    """Give a ``mkstemp`` file (created 0600) the permissions a plain ``open`` would: 0666 minus the umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then move the finished file to ``path``; on any error nothing is left behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        default_permissions(tmp)
        os.replace(tmp, path)
    except BaseException:
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
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
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
