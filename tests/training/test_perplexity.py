"""Perplexity: a continuous stream with one end-of-sentence prediction per line, checked by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from elmo.text.char_encoding import batch_to_ids
from elmo.text.vocab import Vocabulary
from elmo.training.perplexity import perplexity, split_rows
from elmo.training.presets import load_preset
from elmo.training.run_files import build_language_model

SENTENCES = [["the", "cat", "sat"], ["a", "dog"], ["the", "unknownword", "ran", "far", "away"]]
VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat", "sat", "a", "dog", "ran", "far", "away"])


def _tiny_lm():
    config, train = load_preset("tiny")
    return build_language_model(config, train, len(VOCAB)).eval()


def _by_hand(lm, sentences, backward: bool) -> tuple[float, int]:
    """Mean CE of one direction: the whole stream through the stack in one call, from zero state."""
    inputs, targets = [], []
    for s in sentences:
        tokens = ["<S>", *s, "</S>"]
        if backward:
            tokens.reverse()
        inputs += tokens[:-1]
        targets += [VOCAB.index(w) for w in tokens[1:]]
    with torch.no_grad():
        x = lm.bilm.token_encoder(batch_to_ids([inputs]))  # (1, N, P)
        stack = lm.bilm.backward_lstm if backward else lm.bilm.forward_lstm
        top = stack(x)[0][-1][0]  # (N, P)
        logp = F.log_softmax(top @ lm.softmax.weight.T + lm.softmax.bias, dim=-1)
        nll = -logp[torch.arange(len(targets)), torch.tensor(targets)]
    return nll.mean().item(), len(targets)


@pytest.mark.parametrize("softmax_positions", [1, 4, 1024])  # scored per window, every 2 windows, all at once
def test_perplexity_equals_a_hand_computation(softmax_positions):
    lm = _tiny_lm()
    result = perplexity(lm, VOCAB, SENTENCES, rows=1, unroll_steps=3, softmax_positions=softmax_positions)
    fwd, n = _by_hand(lm, SENTENCES, backward=False)
    bwd, _ = _by_hand(lm, SENTENCES, backward=True)
    assert result.tokens == n == 10 + 3  # words + one end of sentence per line
    assert result.forward == pytest.approx(math.exp(fwd), rel=1e-5)
    assert result.backward == pytest.approx(math.exp(bwd), rel=1e-5)
    assert result.geometric_mean == pytest.approx(math.exp((fwd + bwd) / 2), rel=1e-5)
    assert result.arithmetic_mean == pytest.approx((math.exp(fwd) + math.exp(bwd)) / 2, rel=1e-5)


def test_rows_are_contiguous_streams():
    lm = _tiny_lm()
    pieces = split_rows(SENTENCES, 2)
    assert [s for p in pieces for s in p] == SENTENCES and len(pieces) == 2
    result = perplexity(lm, VOCAB, SENTENCES, rows=2, unroll_steps=2)
    losses = [_by_hand(lm, p, backward=False) for p in pieces]
    mean = sum(loss * n for loss, n in losses) / sum(n for _, n in losses)
    assert result.forward == pytest.approx(math.exp(mean), rel=1e-5)
    assert result.tokens == 13


def _each_sentence_by_hand(lm, sentences, backward: bool, start=None) -> float:
    """Mean CE of one direction with every sentence run on its own from ``start`` (zeros if None)."""
    total, count = 0.0, 0
    for sentence in sentences:
        tokens = ["<S>", *sentence, "</S>"]
        if backward:
            tokens.reverse()
        with torch.no_grad():
            x = lm.bilm.token_encoder(batch_to_ids([tokens[:-1]]))  # (1, n, P)
            stack = lm.bilm.backward_lstm if backward else lm.bilm.forward_lstm
            state = None if start is None else (start[0][int(backward)], start[1][int(backward)])  # (L, 1, .)
            top = stack(x, None, state)[0][-1][0]  # (n, P)
            logp = F.log_softmax(top @ lm.softmax.weight.T + lm.softmax.bias, dim=-1)
            targets = torch.tensor([VOCAB.index(w) for w in tokens[1:]])
            total += -logp[torch.arange(len(targets)), targets].sum().item()
            count += len(targets)
    return total / count


def test_zero_and_warm_score_each_sentence_from_its_own_start():
    from elmo.formats.warm_state import warm_state_for

    lm = _tiny_lm()
    carry = perplexity(lm, VOCAB, SENTENCES, unroll_steps=2)
    zero = perplexity(lm, VOCAB, SENTENCES, unroll_steps=2, initial_state="zero", sentences_per_batch=2)
    assert zero.forward == pytest.approx(math.exp(_each_sentence_by_hand(lm, SENTENCES, False)), rel=1e-5)
    assert zero.backward == pytest.approx(math.exp(_each_sentence_by_hand(lm, SENTENCES, True)), rel=1e-5)
    assert zero.tokens == carry.tokens == 13 and zero.forward != pytest.approx(carry.forward, rel=1e-5)
    warm = perplexity(lm, VOCAB, SENTENCES, unroll_steps=2, initial_state="warm")
    start = warm_state_for(lm.bilm, None, ("<S>", "</S>"))  # computed by the call above, kept on the model
    assert float(start[1].abs().max()) > 0
    assert warm.forward == pytest.approx(math.exp(_each_sentence_by_hand(lm, SENTENCES, False, start)), rel=1e-5)
    assert warm.backward == pytest.approx(math.exp(_each_sentence_by_hand(lm, SENTENCES, True, start)), rel=1e-5)
    with pytest.raises(ValueError, match="initial_state must be one of"):
        perplexity(lm, VOCAB, SENTENCES, initial_state="cold")
