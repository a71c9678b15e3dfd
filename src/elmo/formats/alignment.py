"""Alignment matrices of the aligned multilingual ELMo models (Schuster et al., NAACL 2019).

Each language's ``<lang>_best_mapping.pth`` is a (D, D) numpy array written with ``torch.save`` (a pickle). The
original applies it as a bias-free linear layer whose weight is the matrix, ``aligned = x @ W.T``, to the ELMo
representation after the scalar mix (docs/formats.md, "Aligned multilingual").

The pickle is read with ``torch.load(weights_only=True)`` and, for the duration of the call only, an allowlist of
exactly what rebuilding a numpy array takes: ``_reconstruct`` under its numpy-2 name and its numpy-1 name
(``numpy.core.multiarray``, what the published files, written in 2019, name), ``ndarray``, ``dtype`` and the numeric
dtype classes. Any other global (beyond what ``weights_only`` always allows: tensors and plain containers) is
refused before anything is called.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.errors import WeightFileError

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct
except ImportError:  # pragma: no cover - numpy 1
    from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

_NUMERIC_DTYPES = (
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_,
)
"""Integer and bool dtypes are allowed to load only so that the dtype check below can name them."""

ARRAY_GLOBALS: list[Any] = [
    (_reconstruct, "numpy._core.multiarray._reconstruct"),  # pickles written under numpy 2
    (_reconstruct, "numpy.core.multiarray._reconstruct"),  # under numpy 1
    np.ndarray,
    np.dtype,
    *dict.fromkeys(type(np.dtype(t)) for t in _NUMERIC_DTYPES),  # numpy.dtypes.Float32DType, ... (numpy 2)
]
"""What unpickling one numpy array needs, and all that :func:`read_alignment` allows."""


def read_alignment(path: str | os.PathLike, dim: int | None = None) -> torch.Tensor:
    """The (D, D) float32 matrix W of an alignment file; ``aligned = x @ W.T``. ``dim``: the model's output dim
    (2P), which D must equal. Errors are one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"{path}: no such alignment file")
    value = _load_array_pickle(path)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise WeightFileError(f"{path}: holds a {type(value).__name__}, not a matrix (a numpy array from torch.save)")
    if value.ndim != 2 or value.shape[0] != value.shape[1]:
        raise WeightFileError(f"{path}: alignment matrix has shape {value.shape}, expected a square (D, D) matrix")
    if dim is not None and value.shape[0] != dim:
        raise WeightFileError(
            f"{path}: alignment matrix is {value.shape[0]}x{value.shape[1]}, but the model's vectors have {dim} dims"
        )
    if not np.issubdtype(value.dtype, np.floating):
        raise WeightFileError(f"{path}: alignment matrix has dtype {value.dtype}, expected a float dtype")
    if not np.isfinite(value).all():
        raise WeightFileError(f"{path}: alignment matrix contains NaN or Inf values")
    return torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))


def _load_array_pickle(path: Path) -> Any:
    # Only the globals not already allowed process-wide: leaving the context removes what it added, and must not
    # remove what the caller had allowed for itself.
    already = set(map(_key, torch.serialization.get_safe_globals()))
    extra = [g for g in ARRAY_GLOBALS if _key(g) not in already]
    try:
        with torch.serialization.safe_globals(extra):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise WeightFileError(f"{path}: not a matrix saved with torch.save: {_refusal(e)}") from e
    except Exception as e:  # noqa: BLE001 - any other failure means an unreadable file
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        detail = f"{type(e).__name__}: {first}" if first else type(e).__name__
        raise WeightFileError(f"{path}: not a readable torch.save file ({detail})") from e


def _key(entry: Any) -> Any:
    return entry if isinstance(entry, tuple) else (entry, f"{entry.__module__}.{entry.__qualname__}")


def _refusal(error: Exception) -> str:
    """torch's many-line weights_only message -> what was refused, in a few words."""
    text = str(error)
    found = re.search(r"GLOBAL (\S+)", text)
    if found:
        return f"refused global {found.group(1)} (only numpy array reconstruction is allowed)"
    found = re.search(r"but got <class '([^']+)'>", text)
    if found:
        return f"refused {found.group(1)} (only numpy array reconstruction is allowed)"
    found = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    if found:
        return found.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
