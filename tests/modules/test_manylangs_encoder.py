"""ELMoForManyLangs' token encoder against the original's ConvTokenEmbedder, on the same weights and ids."""

from __future__ import annotations

import pytest
import torch

from elmo.formats.model_files import load_bilm
from tests.formats.manylangs_files import write_manylangs_model

oracle_package = pytest.importorskip("elmoformanylangs", reason="the test extra installs the oracle")


def test_token_layer_is_the_originals_bit_for_bit(tmp_path, monkeypatch):
    from elmoformanylangs.elmo import read_list
    from elmoformanylangs.frontend import create_one_batch

    directory = write_manylangs_model(tmp_path / "m", n_highway=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    oracle = oracle_package.Embedder(str(directory))
    encoder = load_bilm(directory).token_encoder
    sentences = [["café", "中文", "x" * 60], ["the", "cat", "sat", "on", "zzz☃"]]
    rows, _ = read_list(sentences, 50)
    words, chars, lengths, _ = create_one_batch(rows, oracle.word_lexicon, oracle.char_lexicon, oracle.config,
                                                sort=False)
    with torch.no_grad():
        expected = oracle.model.token_embedder(words, chars, tuple(words.shape))  # (B, T, P)
        ids = torch.stack([torch.from_numpy(encoder.lexicon.token_ids(row + ["<pad>"] * (words.shape[1] - len(row))))
                           for row in rows])  # (B, T, 1 + W)
        mask = torch.arange(words.shape[1]).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        every_row = encoder.encode_tokens(ids.view(-1, ids.shape[-1])).view(*words.shape, -1)
        distinct_once = encoder(ids)
    assert torch.equal(every_row[mask], expected[mask])
    assert torch.allclose(distinct_once[mask], expected[mask], rtol=0, atol=1e-6)


def test_padding_rows_and_shapes(tmp_path):
    encoder = load_bilm(write_manylangs_model(tmp_path / "m")).token_encoder
    ids = torch.from_numpy(encoder.lexicon.token_ids(["<bos>", "cat", "<eos>"])).unsqueeze(0)  # (1, 3, 51)
    padded = torch.cat([ids, torch.zeros_like(ids[:, :2])], dim=1)  # two padding tokens
    with torch.no_grad():
        out, alone = encoder(padded), encoder(ids)
    assert out.shape == (1, 5, 16) and torch.isfinite(out).all()
    assert torch.allclose(out[:, :3], alone, rtol=0, atol=1e-6)  # GEMMs of another row count round differently
