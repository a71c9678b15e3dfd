"""Atomic file writes: write a temporary file beside the target, then rename it into place.

Readers (and a job resumed after a crash) see either the old file or the complete new one, never half a file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
