"""Parity with the original TensorFlow implementation on its own test fixture (bilm-tf tests/test_model.py).

Protocol: 30 sentences fed statefully in 10 batches of 3 (batch i = sentence i of lists 0, 1, 2), LSTM states
carried from batch to batch row by row; the top layer must match within atol 1e-6.
"""

from __future__ import annotations

import h5py
import numpy as np
import torch

from elmo import StatefulBiLM, Vocabulary, batch_to_ids, batch_to_token_ids, load_bilm
from elmo.cli import main as cli_main
from elmo.embedding.token_table import dump_token_embeddings

ATOL = 1e-6


def _fixture_bilm(fixture_dir, **kwargs):
    return load_bilm(
        options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5", **kwargs
    )


def _check_top_layer(top: torch.Tensor, batch, i, expected) -> None:
    for k, sentence in enumerate(batch):
        n = len(sentence)
        np.testing.assert_allclose(top[k, :n].numpy(), expected[k][i], atol=ATOL, rtol=0)


def test_python_api_matches_original(fixture_dir, fixture_sentences, fixture_expected):
    bilm = StatefulBiLM(_fixture_bilm(fixture_dir))
    with torch.no_grad():
        for i in range(10):
            batch = [fixture_sentences[k][i] for k in range(3)]
            out = bilm(batch_to_ids(batch, add_sentence_boundaries=True))
            assert out.mask.sum(1).tolist() == [len(s) + 2 for s in batch]
            _check_top_layer(out.layers[-1][:, 1:], batch, i, fixture_expected)


def test_stateless_run_differs_from_stateful_reference(fixture_dir, fixture_sentences, fixture_expected):
    """The fixture really depends on carried state: zero states do not reproduce batches after the first."""
    bilm = _fixture_bilm(fixture_dir)
    batch = [fixture_sentences[k][1] for k in range(3)]
    with torch.no_grad():
        top = bilm(batch_to_ids(batch, add_sentence_boundaries=True)).layers[-1]
    n = len(batch[0])
    assert np.abs(top[0, 1 : n + 1].numpy() - fixture_expected[0][1]).max() > 1e-3


def test_cli_embed_all_stateful_matches_original(tmp_path, fixture_dir, fixture_sentences, fixture_expected):
    lines = [" ".join(fixture_sentences[k][i]) for i in range(10) for k in range(3)]
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    argv = ["embed", str(text), str(out), "--all", "--initial-state", "carry", "--batch-size", "3"]  # fp32: the default
    argv += ["--options-file", str(fixture_dir / "options.json"), "--weight-file", str(fixture_dir / "lm_weights.hdf5")]
    assert cli_main(argv) == 0
    with h5py.File(out, "r") as f:
        for i in range(10):
            for k in range(3):
                layers = f[str(3 * i + k)][...]
                assert layers.shape == (3, len(fixture_sentences[k][i]), 32)
                assert layers.dtype == np.float32
                np.testing.assert_allclose(layers[2], fixture_expected[k][i], atol=ATOL, rtol=0)


def test_token_inputs_match_original(tmp_path, fixture_dir, fixture_sentences, fixture_expected):
    """bilm-tf's token-input test: dump the token layer of every fixture word, then run the biLM from word ids."""
    words = sorted({"<S>", "</S>"} | {w for group in fixture_sentences for s in group for w in s})
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(words), encoding="utf-8")
    embeddings = tmp_path / "embeddings.hdf5"
    dump_token_embeddings(_fixture_bilm(fixture_dir), vocab_file, embeddings)
    with h5py.File(embeddings, "r") as f:
        assert f["embedding"].shape == (len(words), 16)
    bilm = StatefulBiLM(_fixture_bilm(fixture_dir, embedding_file=embeddings))
    vocab = Vocabulary.from_file(vocab_file)
    with torch.no_grad():
        for i in range(10):
            batch = [fixture_sentences[k][i] for k in range(3)]
            out = bilm(batch_to_token_ids(batch, vocab, add_sentence_boundaries=True))
            _check_top_layer(out.layers[-1][:, 1:], batch, i, fixture_expected)
