"""The demo model shipped inside the package: small, loads offline, gives contextual vectors."""

from __future__ import annotations

import pytest
import torch

from elmo.formats.model_files import load_bilm
from elmo.formats.published import demo_model_dir
from elmo.text.char_encoding import batch_to_ids


@pytest.mark.slow
def test_demo_model_is_small_and_loads():
    directory = demo_model_dir()
    size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
    assert size <= 10 * 1024 * 1024
    bilm = load_bilm(directory)
    ids = batch_to_ids([["I", "sat", "by", "the", "river", "bank", "."], ["The", "bank", "lent", "money", "."]],
                       add_sentence_boundaries=True)
    with torch.no_grad():
        out = bilm(ids)
    top = out.layers[-1]  # (2, T, 2P)
    assert torch.isfinite(top).all()
    bank_river, bank_money = top[0, 6], top[1, 2]
    token_layer = out.layers[0]
    torch.testing.assert_close(token_layer[0, 6], token_layer[1, 2])  # same word, same token vector
    assert not torch.allclose(bank_river, bank_money, atol=1e-3)  # different contexts, different vectors
