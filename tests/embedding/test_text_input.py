"""What ``elmo embed`` reads: a byte-order mark, gzip, stdin and pipes give the vectors of the plain file."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import embed_file
from elmo.formats.model_files import load_bilm, save_bilm
from tests.conftest import random_bilm

SRC = Path(__file__).resolve().parents[2] / "src"
TEXT = "the cat sat .\n\nüber 東京 ,\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def plain(model_dir, tmp_path_factory) -> dict[str, np.ndarray]:
    directory = tmp_path_factory.mktemp("plain")
    (directory / "in.txt").write_text(TEXT, encoding="utf-8")
    embed_file(Embedder(load_bilm(model_dir)), directory / "in.txt", directory / "out.hdf5")
    return _read(directory / "out.hdf5")


def _read(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k].asstr()[0] if k == "sentence_to_index" else f[k][()] for k in f}


def _assert_same(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


@pytest.mark.parametrize("form", ["bom", "gzip", "gzip-with-bom"])
def test_bom_and_gzip_give_the_vectors_of_the_plain_file(model_dir, plain, tmp_path, form):
    data = (("\ufeff" if "bom" in form else "") + TEXT).encode()
    path = tmp_path / ("in.txt.gz" if "gzip" in form else "in.txt")
    path.write_bytes(gzip.compress(data) if "gzip" in form else data)
    embed_file(Embedder(load_bilm(model_dir)), path, tmp_path / "out.hdf5")
    _assert_same(_read(tmp_path / "out.hdf5"), plain)


def _elmo_in_bash(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", "-c", command.replace("ELMO", f"{sys.executable} -m elmo -q")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_stdin_dev_stdin_and_process_substitution(model_dir, plain, tmp_path):
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    model = f"--top --model {model_dir}"
    done = _elmo_in_bash(f"cat in.txt | ELMO embed - dash.hdf5 {model} && ELMO embed /dev/stdin dev.hdf5 {model} "
                         f"< <(cat in.txt) && ELMO embed <(gzip -c in.txt) subst.hdf5 {model}", tmp_path)
    assert done.returncode == 0, done.stderr
    top = {k: v if k == "sentence_to_index" else v[-1] for k, v in plain.items()}
    for name in ("dash", "dev", "subst"):
        _assert_same(_read(tmp_path / f"{name}.hdf5"), top)
