"""Pooled sentence vectors and layer choices: `elmo embed --pool/--layer/--matrix` against the embedder's layers."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.embedding.embedder import Embedder
from elmo.embedding.selection import VectorSelection
from elmo.errors import ConfigError
from elmo.formats.model_files import load_bilm
from elmo.formats.published import demo_model_dir

LINES = ["the cat sat on the mat .", "", "a bank by the river", "light"]


@pytest.fixture(scope="module")
def layers():
    embedder = Embedder(load_bilm(demo_model_dir()), precision="fp32", device="cpu")
    return list(embedder.embed_sentences([line.split() for line in LINES]))  # (L + 1, n, 2P) each


def _embed(text, out, *flags):
    assert main(["embed", str(text), str(out), "--model", "demo", *flags]) == 0
    return h5py.File(out, "r")


def test_mean_pool_of_the_average_is_the_default_layer_of_pooled_output(text, tmp_path, layers):
    with _embed(text, tmp_path / "o.hdf5", "--pool", "mean") as f:
        for i, full in enumerate(layers):
            want = full.mean(0).mean(0) if full.shape[1] else np.zeros(full.shape[-1], np.float32)
            np.testing.assert_allclose(f[str(i)][()], want, rtol=1e-5, atol=1e-6)
        assert f[str(0)].shape == (layers[0].shape[-1],)


@pytest.mark.slow
@pytest.mark.parametrize("flags, pick", [
    (["--pool", "max", "--top"], lambda x: x[-1].max(0)),
    (["--pool", "mean", "--all"], lambda x: x.mean(1)),
    (["--pool", "mean", "--layer", "1"], lambda x: x[1].mean(0)),
    (["--pool", "first-last", "--layer", "2"],
     lambda x: np.concatenate([x[2][-1, : x.shape[-1] // 2], x[2][0, x.shape[-1] // 2:]])),
    (["--layer", "mix", "--mix-weights", "1,0,-1", "--mix-gamma", "2"],
     lambda x: 2 * np.tensordot(np.exp([1, 0, -1]) / np.exp([1, 0, -1]).sum(), x, axes=1)),
])
def test_layers_and_pools_equal_the_embedders_layers(text, tmp_path, layers, flags, pick):
    with _embed(text, tmp_path / "o.hdf5", *flags) as f:
        for i in (0, 2, 3):
            np.testing.assert_allclose(f[str(i)][()], pick(layers[i]), rtol=1e-5, atol=1e-5)


def test_matrix_layout_holds_every_line_in_order_with_its_key(text, tmp_path, layers):
    with _embed(text, tmp_path / "m.hdf5", "--pool", "mean", "--matrix", "--dtype", "float16",
                "--chunk-size", "2") as f:
        assert f["embeddings"].shape == (4, layers[0].shape[-1]) and f["embeddings"].dtype == np.float16
        assert list(f["keys"].asstr()[()]) == ["0", "1", "2", "3"]
        np.testing.assert_allclose(f["embeddings"][0], layers[0].mean(0).mean(0), atol=2e-3)


def test_pooled_python_api_equals_the_file(text, tmp_path, layers):
    embedder = Embedder(load_bilm(demo_model_dir()), precision="fp32", device="cpu")
    vectors = list(embedder.embed_sentences([line.split() for line in LINES], pool="mean", layer="top"))
    with _embed(text, tmp_path / "o.hdf5", "--pool", "mean", "--top") as f:
        for i, v in enumerate(vectors):
            np.testing.assert_array_equal(f[str(i)][()], v)


@pytest.mark.parametrize("flags, message", [
    ([], "say what to keep: --all, --top, --average or --layer N"),
    (["--all", "--matrix"], "--matrix stores one vector per line: it needs --pool"),
    (["--layer", "3"], "--layer 3 is not a layer of the model: it has layers 0 to 2"),
    (["--layer", "mix"], "--mix-weights must be given with layer mix"),
    (["--top", "--mix-weights", "0,0,0"], "--mix-weights is for layer mix"),
    (["--top", "--mix-gamma", "2"], "--mix-gamma is for layer mix (got layer top)"),  # not silently ignored
    (
        ["--layer", "mix", "--mix-weights", "0,0,0", "--mix-gamma", "1" + "0" * 400],
        "--mix-gamma: must be a finite number",
    ),
    (["--layer", "mix", "--mix-weights", "0,0"], "--mix-weights has 2 weights; the model has 3 layers"),
    (["--layer", "mix", "--mix-weights", "0,x,0"], "argument --mix-weights: must be numbers separated by commas"),
])
def test_bad_choices_are_one_line_before_any_output(text, tmp_path, capsys, flags, message):
    try:
        code = main(["embed", str(text), str(tmp_path / "o.hdf5"), "--model", "demo", *flags])
    except SystemExit as e:  # a value its flag refuses, as it is parsed
        code = e.code
    assert code in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(("elmo: error: ", "elmo embed: error: ")) and message in err[-1], err
    assert not (tmp_path / "o.hdf5").exists()


def test_selection_checks_in_python():
    with pytest.raises(ConfigError, match="pool must be one of none, mean, max, first-last"):
        VectorSelection(pool="sum")
    assert VectorSelection(layer=2).layer == "2"


def test_one_flat_vector_per_token_joins_the_layers_of_all_in_layer_order():
    """What Flair and spaCy take: one vector per token. `all` becomes token i's layer 0, then its layer 1, ...; every
    other layer is already one vector per token."""
    layers = np.arange(3 * 4 * 2, dtype=np.float32).reshape(3, 4, 2)  # (L + 1, n, 2P)
    everything = VectorSelection().flat(layers)
    assert everything.shape == (4, 6) and everything.flags.c_contiguous
    assert everything[1].tolist() == [2, 3, 10, 11, 18, 19]  # token 1 in layers 0, 1, 2
    np.testing.assert_array_equal(everything, np.concatenate(list(layers), axis=-1))
    assert VectorSelection().width(3, 2) == 6 and VectorSelection(layer="top").width(3, 2) == 2
    for layer in ("top", "average", "1"):
        np.testing.assert_array_equal(VectorSelection(layer=layer).flat(layers), VectorSelection(layer=layer)
                                      .apply(layers))
    assert VectorSelection().flat(layers[:, :0]).shape == (0, 6)  # a sentence without tokens
    np.testing.assert_array_equal(VectorSelection(pool="max").flat(layers), layers[:, -1].reshape(-1))
