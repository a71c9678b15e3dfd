"""Content hashes, computed one way: of files (read in blocks), of bytes and text, of a model's tensors.

Several of these hex strings live in files users keep (the checksums of downloaded models and of task weights,
the weights fingerprint of a warm state, the biLM hash of an activation cache, the names of activation caches), so
each caller names its algorithm and the bytes it hashes never change: sha1 stays sha1 where a stored hash was sha1.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import BinaryIO

import torch

BLOCK = 1 << 20
"""Bytes read at a time: a file of any size is hashed in bounded memory."""


def digest_of(data: bytes | str | Iterable[bytes | str], algorithm: str = "sha256") -> str:
    """The hex digest of ``data``, or of its parts one after the other; text is hashed as UTF-8."""
    digest = hashlib.new(algorithm)
    for part in (data,) if isinstance(data, (bytes, str)) else data:
        digest.update(part.encode() if isinstance(part, str) else part)
    return digest.hexdigest()


def stream_sha256(source: BinaryIO, sink: Callable[[bytes], object] | None = None) -> str:
    """The sha256 of everything ``source`` still holds, read in blocks; each block also goes to ``sink`` (e.g. the
    ``write`` of the file a download is saved to), so the bytes are hashed as they pass."""
    digest = hashlib.sha256()
    while block := source.read(BLOCK):
        digest.update(block)
        if sink is not None:
            sink(block)
    return digest.hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return stream_sha256(f)


def tensor_fingerprint(state: Mapping[str, torch.Tensor], algorithm: str = "sha256", head: int | None = None) -> str:
    """The hex digest over each tensor's name, shape and values (as float32, in C order), in ``state``'s order
    (a state dict); ``head``: only each tensor's first ``head`` values (cheap, and any retraining changes them)."""
    return digest_of(_tensor_parts(state, head), algorithm)


def _tensor_parts(state: Mapping[str, torch.Tensor], head: int | None) -> Iterable[bytes | str]:
    for name, tensor in state.items():
        values = tensor.detach().reshape(-1)[:head]
        yield f"{name}:{tuple(tensor.shape)};"
        yield values.to("cpu", torch.float32).contiguous().numpy().tobytes()
