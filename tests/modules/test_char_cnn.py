"""The char-CNN encoder against the textbook computation: one Conv1d per width over all 50 positions."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo.config import CharCNNConfig
from elmo.modules.char_cnn import TOKENS_PER_CHUNK, CharCNNEncoder, MaxPool, content_length
from elmo.runtime.compile_switch import compile_setting
from elmo.text.char_encoding import batch_to_ids


def _encoder(seed: int = 0) -> CharCNNEncoder:
    torch.manual_seed(seed)
    encoder = CharCNNEncoder(CharCNNConfig(filters=[(1, 4), (2, 6), (3, 8), (7, 5)], embedding_dim=5, n_highway=1), 6)
    with torch.no_grad():
        for p in encoder.parameters():
            p.normal_()
    return encoder.eval()


def _textbook(encoder: CharCNNEncoder, char_ids: torch.Tensor) -> torch.Tensor:
    """(N, W) -> (N, P): every conv over all W positions, max, bias, activation, highway, projection."""
    x = encoder.char_embedding(char_ids).transpose(1, 2)  # (N, E, W)
    pooled = torch.cat([conv(x).max(dim=2).values for conv in encoder.convolutions], dim=1)  # TF max_pool
    x = encoder.highway(encoder.activation(pooled))
    return encoder.projection(x)


def test_content_length_finds_the_trailing_padding():
    ids = batch_to_ids([["a", "hello", "x" * 60]])[0]  # (3, 50): BOW chars EOW, then padding
    ids = torch.cat([ids, torch.zeros(1, 50, dtype=torch.long)])  # a masked token
    assert content_length(ids).tolist() == [3, 7, 49, 0]


def test_trimmed_positions_give_the_textbook_output_exactly():
    words = ["a", "the", "Tokenisation", "ünïcödé", "x" * 48, "y" * 70, "", "<S>", ",", "1984"]
    ids = batch_to_ids([words])[0]
    ids = torch.cat([ids, torch.zeros(1, 50, dtype=torch.long)])  # a masked (padding) token
    encoder = _encoder()
    with torch.no_grad():
        torch.testing.assert_close(encoder.encode_tokens(ids), _textbook(encoder, ids), rtol=1e-5, atol=1e-4)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=3 * TOKENS_PER_CHUNK))
def test_any_tokens_in_any_order_match_the_textbook(words):
    ids = batch_to_ids([words])[0]
    encoder = _encoder(1)
    with torch.no_grad():
        torch.testing.assert_close(encoder.encode_tokens(ids), _textbook(encoder, ids), rtol=1e-5, atol=1e-4)


def test_gradients_match_the_textbook():
    ids = batch_to_ids([["short", "a", "considerably-longer-token", "mid", "x" * 45] * 60])[0]
    a, b = _encoder(2).train(), _encoder(2).train()
    a.encode_tokens(ids).square().sum().backward()
    _textbook(b, ids).square().sum().backward()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        scale = pb.grad.abs().max()
        torch.testing.assert_close(pa.grad / scale, pb.grad / scale, rtol=0, atol=1e-4, msg=name)


def test_max_pool_gradient_goes_to_the_first_maximum_like_tf():
    x = torch.tensor([[[1.0, 5.0], [3.0, 5.0], [3.0, 2.0], [3.0, 5.0]]], requires_grad=True)  # (1, 4 positions, 2)
    values = MaxPool.apply(x)
    values.backward(torch.tensor([[10.0, 20.0]]))
    assert values.tolist() == [[3.0, 5.0]]
    assert x.grad.tolist() == [[[0.0, 20.0], [10.0, 0.0], [0.0, 0.0], [0.0, 0.0]]]  # first of the tied maxima


@pytest.mark.slow
def test_compiled_max_pool_gives_the_eager_values_and_gradients():
    """``compile``: the max and its first position from one compiled reduction, for chunks of any size (one
    dynamic-shape compilation), ties and -inf (masked windows) included."""
    from elmo.modules import compiled
    from elmo.modules.char_cnn import max_and_first_position

    torch.manual_seed(0)
    for shape in [(5, 9, 16), (3, 12, 16), (7, 4, 8)]:
        x = torch.randn(shape).round()  # rounded: many ties
        x[0, -1] = float("-inf")
        grad = torch.randn(shape[0], shape[2])
        results = []
        for use_compile in (False, True):
            leaf = x.clone().requires_grad_(True)
            with compile_setting(use_compile):
                values = MaxPool.apply(leaf)
            values.backward(grad)
            results.append((values.detach(), leaf.grad))
        assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert compiled.compiled(max_and_first_position)
