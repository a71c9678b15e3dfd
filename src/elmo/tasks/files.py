"""File helpers of the task models: checksums (atomic writes: elmo.runtime.atomic_files; reading text:
elmo.runtime.text_files)."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

