"""Alignment matrices of the aligned multilingual models: numpy arrays pickled by torch.save, read through a narrow
allowlist. Every file here is written by the test itself."""

from __future__ import annotations

import os
import pickletools
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.errors import WeightFileError
from elmo.formats.alignment import read_alignment

NUMPY1 = "numpy.core.multiarray _reconstruct"
NUMPY2 = "numpy._core.multiarray _reconstruct"


def _matrix(dim: int = 6, dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(dim, dim)).astype(dtype)


def _pickle_globals(path: Path) -> set[str]:
    """The GLOBAL opcodes of a torch.save file (zip or legacy format)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            streams = [z.read(name) for name in z.namelist() if name.endswith("data.pkl")]
    else:
        data = path.read_bytes()
        streams, start = [], 0
        while start < len(data):  # the legacy format is several pickles one after another
            end = start
            for _, _, pos in pickletools.genops(data[start:]):
                end = start + pos + 1
            streams.append(data[start:end])
            start = end
    found = set()
    for stream in streams:
        for op, arg, _ in pickletools.genops(stream):
            if op.name in ("GLOBAL", "INST"):
                found.add(arg)
    return found


def _save(array, path: Path, legacy: bool) -> Path:
    torch.save(array, path, _use_new_zipfile_serialization=not legacy)
    return path


def _save_as_numpy1(array: np.ndarray, path: Path, legacy: bool, monkeypatch) -> Path:
    """What numpy 1 wrote (the published files, 2019): the array rebuilt by ``numpy.core.multiarray._reconstruct``.

    numpy 2 pickles name ``numpy._core``; pickle writes a function's ``__module__``, so the test points it at the old
    module name (which numpy 2 still resolves) while saving."""
    reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]
    monkeypatch.setattr(reconstruct, "__module__", "numpy.core.multiarray")
    torch.save(array, path, _use_new_zipfile_serialization=not legacy)
    monkeypatch.undo()
    return path


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_numpy2_pickle_loads_exactly(tmp_path, legacy):
    w = _matrix()
    path = _save(w, tmp_path / "xx_best_mapping.pth", legacy)
    assert NUMPY2 in _pickle_globals(path)
    got = read_alignment(path, dim=6)
    assert got.dtype == torch.float32 and got.shape == (6, 6)
    np.testing.assert_array_equal(got.numpy(), w.astype(np.float32))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_numpy1_pickle_loads_exactly(tmp_path, legacy, monkeypatch):
    w = _matrix(dtype=np.float32)
    path = _save_as_numpy1(w, tmp_path / "es_best_mapping.pth", legacy, monkeypatch)
    names = _pickle_globals(path)
    assert NUMPY1 in names and NUMPY2 not in names
    np.testing.assert_array_equal(read_alignment(path, dim=6).numpy(), w)


class _Shell:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_pickle_calling_any_other_global_is_refused_unrun(tmp_path, legacy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _save([_matrix(), _Shell()], tmp_path / "evil.pth", legacy)
    with pytest.raises(WeightFileError) as e:
        read_alignment(path, dim=6)
    message = str(e.value)
    assert message.startswith(f"{path}: not a matrix saved with torch.save: refused global ")
    assert "system" in message and "\n" not in message
    assert not (tmp_path / "pwned.txt").exists()


def test_the_allowlist_is_only_in_force_during_the_read(tmp_path):
    before = set(torch.serialization.get_safe_globals())  # torch keeps a set: the list's order is arbitrary
    read_alignment(_save(_matrix(), tmp_path / "w.pth", legacy=False))
    assert set(torch.serialization.get_safe_globals()) == before
    with pytest.raises(Exception, match="Unsupported global"):  # a plain weights_only load still refuses numpy
        torch.load(tmp_path / "w.pth", weights_only=True)


def test_a_callers_own_allowlist_entries_survive_the_read(tmp_path):
    torch.serialization.add_safe_globals([np.ndarray])
    try:
        read_alignment(_save(_matrix(), tmp_path / "w.pth", legacy=False))
        assert np.ndarray in torch.serialization.get_safe_globals()
    finally:
        torch.serialization.clear_safe_globals()


@pytest.mark.parametrize(
    ("content", "dim", "expected"),
    [
        (np.zeros((6, 5)), None, "has shape (6, 5), expected a square (D, D) matrix"),
        (np.zeros(6), None, "has shape (6,), expected a square (D, D) matrix"),
        (np.eye(4), 6, "is 4x4, but the model's vectors have 6 dims"),
        (np.arange(36).reshape(6, 6), 6, "has dtype int64, expected a float dtype"),
        (np.full((6, 6), np.nan), 6, "contains NaN or Inf values"),
        ({"W": torch.eye(6)}, 6, "holds a dict, not a matrix"),
    ],
    ids=["not-square", "vector", "wrong-dim", "int", "nan", "dict"],
)
def test_matrices_that_do_not_fit_are_refused_with_one_line(tmp_path, content, dim, expected):
    path = _save(content, tmp_path / "w.pth", legacy=False)
    with pytest.raises(WeightFileError) as e:
        read_alignment(path, dim=dim)
    assert str(e.value).startswith(f"{path}: ") and expected in str(e.value) and "\n" not in str(e.value)


def test_a_torch_tensor_file_is_accepted_too(tmp_path):
    w = torch.from_numpy(_matrix(dtype=np.float32))
    torch.testing.assert_close(read_alignment(_save(w, tmp_path / "w.pth", legacy=False), 6), w, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", "not a readable torch.save file (EOFError)"), (b"nonsense", "not a matrix saved with torch.save: Unsup")],
)
def test_unreadable_and_missing_files(tmp_path, data, expected):
    path = tmp_path / "w.pth"
    path.write_bytes(data)
    with pytest.raises(WeightFileError) as e:
        read_alignment(path)
    assert str(e.value).startswith(f"{path}: {expected}") and "\n" not in str(e.value)
    with pytest.raises(WeightFileError, match="no such alignment file"):
        read_alignment(tmp_path / "missing.pth")
