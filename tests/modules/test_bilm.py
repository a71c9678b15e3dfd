from __future__ import annotations

import torch

from elmo.modules.bilm import StatefulBiLM
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.text.char_encoding import batch_to_ids
from tests.conftest import random_bilm, tiny_config

SENTENCES = [["The", "bank", "raised", "rates", "."], ["Hi"], [], ["Ünïcödé", "tokens", "work", "too"]]


def _layers(bilm, sentences):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences, add_sentence_boundaries=True)).layers


def test_layer_shapes_and_token_layer_duplication():
    bilm = random_bilm()
    layers = _layers(bilm, SENTENCES)
    assert len(layers) == 3
    assert all(x.shape == (4, 7, 16) for x in layers)
    torch.testing.assert_close(layers[0][..., :8], layers[0][..., 8:])
    assert layers[2][1, 3:].eq(0).all()  # padding after "<S> Hi </S>"


def test_stateless_sentence_vectors_do_not_depend_on_the_batch():
    """Identical up to float32 rounding (GEMM kernels differ with the batch size); nothing leaks between rows."""
    bilm = random_bilm()
    together = _layers(bilm, SENTENCES)
    _layers(bilm, [["something", "else", "first"]])  # a stateless model keeps nothing between calls
    for b, sentence in enumerate(SENTENCES):
        alone = _layers(bilm, [sentence])
        n = len(sentence) + 2
        for layer_together, layer_alone in zip(together, alone):
            torch.testing.assert_close(layer_together[b, :n], layer_alone[0, :n], rtol=1e-5, atol=1e-6)


def test_directions_side_by_side_on_two_cores_equal_one_after_the_other():
    bilm = random_bilm()
    sequential = _layers(bilm, SENTENCES)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with small_ops_on_one_thread("cpu"):  # as the Embedder runs it: the two directions on two threads
            concurrent = _layers(bilm, SENTENCES)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(sequential, concurrent):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_the_model_code_never_sets_the_thread_count(monkeypatch):
    """Only entry points set process-wide switches: inference, with or without gradients, leaves torch's thread
    count alone outside the policy the embedder enters."""
    bilm = random_bilm()

    def refused(n):
        raise AssertionError(f"the model code set torch's thread count to {n}")

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # where the policy would have something to set
    try:
        with monkeypatch.context() as patch:
            patch.setattr(torch, "set_num_threads", refused)
            _layers(bilm, SENTENCES)  # the inference path
            bilm(batch_to_ids(SENTENCES, add_sentence_boundaries=True))  # with gradients
    finally:
        torch.set_num_threads(before)


def test_backward_direction_reads_the_sentence_reversed():
    bilm = random_bilm(tiny_config(residual=False))
    sentence = ["a", "b", "c", "d"]
    ids = batch_to_ids([sentence], add_sentence_boundaries=True)  # (1, 6, 50)
    with torch.no_grad():
        layers = bilm(ids).layers
        tokens = bilm.token_encoder(ids.flip(1))  # the whole row is real, so reversal is a flip
        backward, _ = bilm.backward_lstm(tokens)
    torch.testing.assert_close(layers[2][..., 8:], backward[-1].flip(1))


def test_stateful_rows_carry_their_own_state():
    bilm = random_bilm()
    stateful = StatefulBiLM(bilm)
    first, second = [["a", "b"], ["c"]], [["d", "e", "f"]]
    with torch.no_grad():
        out1 = stateful(batch_to_ids(first, add_sentence_boundaries=True))
        out2 = stateful(batch_to_ids(second, add_sentence_boundaries=True))
        # row 0 of the second batch starts from row 0's final state of the first batch
        h, c = out1.state
        expected = bilm(batch_to_ids(second, add_sentence_boundaries=True), (h[:, :, :1], c[:, :, :1]))
    for a, b in zip(out2.layers, expected.layers):
        torch.testing.assert_close(a, b)
    # row 1 was not in the second batch, so it keeps its state from the first batch
    torch.testing.assert_close(stateful._h[:, :, 1], h[:, :, 1])
    stateful.reset()
    with torch.no_grad():
        fresh = stateful(batch_to_ids(second, add_sentence_boundaries=True))
    torch.testing.assert_close(fresh.layers[-1], _layers(bilm, second)[-1])
