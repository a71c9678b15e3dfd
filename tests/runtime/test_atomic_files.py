"""Atomic writes on a full disk: one error naming the file, the earlier file intact, no temporary file; an HDF5 file
whose writes fail goes on to the end without an error of HDF5's own, and reads back what it wrote."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import elmo.runtime.atomic_files as atomic_files
from elmo.errors import OutputWriteError
from elmo.runtime.atomic_files import atomic_file, replace_directory, write_atomic


def _disk_full_after(monkeypatch, room: int) -> None:
    """``os.pwrite`` as on a disk with ``room`` bytes free."""
    real = os.pwrite
    left = [room]

    def pwrite(fd: int, data, offset: int) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, memoryview(data)[: left[0]], offset)
        left[0] -= n
        return n

    monkeypatch.setattr(atomic_files.os, "pwrite", pwrite)


def test_hdf5_through_a_kept_error_file_reads_back_what_it_wrote_and_raises_once(tmp_path, monkeypatch):
    path = tmp_path / "out.hdf5"
    path.write_bytes(b"an earlier file")
    _disk_full_after(monkeypatch, 6000)
    vectors = {str(i): np.full((3, 40, 16), i, dtype=np.float32) for i in range(20)}  # 7.7 kB each
    with pytest.raises(OSError) as raised, atomic_file(path) as file:
        with h5py.File(file, "w") as f:
            for key, value in vectors.items():
                f.create_dataset(key, data=value)
            assert file.error is not None and file.error.errno == errno.ENOSPC  # kept, HDF5 saw no failure
            for key, value in vectors.items():  # what HDF5 reads back is what it wrote
                np.testing.assert_array_equal(f[key][()], value)
        file.raise_kept()
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"an earlier file" and [p.name for p in tmp_path.iterdir()] == ["out.hdf5"]


def test_an_hdf5_file_with_room_is_complete(tmp_path):
    with atomic_file(tmp_path / "out.hdf5") as file, h5py.File(file, "w") as f:
        f.create_dataset("x", data=np.arange(10_000, dtype=np.float32))
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_array_equal(f["x"][()], np.arange(10_000, dtype=np.float32))
    assert [p.name for p in tmp_path.iterdir()] == ["out.hdf5"]


def test_write_atomic_names_the_file_not_its_temporary(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("earlier\n")

    def write(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tmp)

    with pytest.raises(OutputWriteError, match=rf"^{path}: cannot write \(No space left on device\)$") as raised:
        write_atomic(path, write)
    assert raised.value.errno == errno.ENOSPC
    assert path.read_text() == "earlier\n" and [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]


def test_a_directory_that_cannot_be_written_is_named_as_given(tmp_path):
    old = tmp_path / "model"
    old.mkdir()
    (old / "keep.txt").write_text("old")

    def build(tmp: Path) -> None:
        write_atomic(tmp / "weights.bin", lambda name: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))

    with pytest.raises(OutputWriteError, match=rf"^{old}: cannot write \(No space left on device\); {old} is as it"):
        replace_directory(old, build, force=True)
    assert [p.name for p in old.iterdir()] == ["keep.txt"] and [p.name for p in tmp_path.iterdir()] == ["model"]
