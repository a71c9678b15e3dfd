"""``Embedder(alignment=...)`` and ``elmo embed --align FILE``: every output vector x becomes x @ W.T."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo.cli import main as cli_main
from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm

SENTENCES = [["the", "cat", "sat"], [], ["über", "naïve", "東京", "."]]


def _w(dim: int = 16) -> np.ndarray:
    return np.random.default_rng(3).normal(size=(dim, dim))  # float64, not symmetric, as torch.save'd by numpy


def test_embedder_aligns_every_layer_of_every_sentence():
    bilm = random_bilm()
    w = _w()
    plain = list(Embedder(bilm).embed_sentences(SENTENCES))
    aligned = list(Embedder(bilm, alignment=torch.from_numpy(w)).embed_sentences(SENTENCES))
    for x, y in zip(plain, aligned):
        assert y.shape == x.shape and y.dtype == np.float32
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layers", ["--all", "--top", "--average"])
def test_elmo_embed_align_writes_the_aligned_vectors(tmp_path: Path, layers: str):
    model = save_bilm(random_bilm(), tmp_path / "model")
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    w = _w()
    torch.save(w, tmp_path / "xx_best_mapping.pth")
    plain, aligned = tmp_path / "plain.hdf5", tmp_path / "aligned.hdf5"
    assert cli_main(["embed", str(text), str(plain), layers, "--model", str(model)]) == 0
    align = ["--align", str(tmp_path / "xx_best_mapping.pth")]
    argv = ["embed", str(text), str(aligned), layers, "--model", str(model), *align]
    assert cli_main(argv) == 0
    with h5py.File(plain, "r") as p, h5py.File(aligned, "r") as a:
        for key in ("0", "1", "2"):
            np.testing.assert_allclose(a[key][...], p[key][...] @ w.T, rtol=1e-5, atol=1e-5)


def test_elmo_embed_align_refuses_a_matrix_of_another_size(tmp_path: Path, capsys):
    model = save_bilm(random_bilm(), tmp_path / "model")
    text = tmp_path / "in.txt"
    text.write_text("the cat\n", encoding="utf-8")
    torch.save(np.eye(1024), tmp_path / "en_best_mapping.pth")
    out = tmp_path / "out.hdf5"
    align = ["--align", str(tmp_path / "en_best_mapping.pth")]
    argv = ["embed", str(text), str(out), "--all", "--model", str(model), *align]
    assert cli_main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"elmo: error: {tmp_path / 'en_best_mapping.pth'}: alignment matrix is 1024x1024, but the model's " \
        "vectors have 16 dims"
    assert not out.exists()


def test_align_is_refused_with_server(tmp_path: Path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat\n", encoding="utf-8")
    argv = ["embed", str(text), str(tmp_path / "o.hdf5"), "--all", "--align", "w.pth", "--server", "http://127.0.0.1:9"]
    assert cli_main(argv) == 1
    assert capsys.readouterr().err.strip() == (
        "elmo: error: --align maps the vectors of a model run here; it cannot be combined with --server"
    )
