"""The language model's training window (hand-written BPTT, fused loss) against its evaluation path."""

from __future__ import annotations

import torch

from elmo.training.presets import load_preset
from elmo.training.run_files import build_language_model

VOCAB = 40


def _model():
    config, train = load_preset("tiny", {"dropout": 0.0, "sample_softmax": False})
    torch.manual_seed(0)
    lm = build_language_model(config, train, VOCAB).train().double()  # the inference path's cells stay float32
    with torch.no_grad():  # weights large enough that both clips act somewhere
        for stack in (lm.bilm.forward_lstm, lm.bilm.backward_lstm):
            for p in stack.parameters():
                p.mul_(4.0)
    return lm


def _batch(rows: int = 3, steps: int = 6, words: int = 9):
    g = torch.Generator().manual_seed(1)
    chars = torch.randint(1, 262, (words, 50), generator=g)
    index = [torch.randint(0, words, (rows, steps), generator=g) for _ in range(2)]
    targets = [torch.randint(0, VOCAB, (rows, steps), generator=g) for _ in range(2)]
    return chars, index, targets


def _state(lm, rows: int = 3):
    g = torch.Generator().manual_seed(2)
    h, c = lm.bilm.zero_state(rows)
    return torch.randn(h.shape, generator=g).double(), torch.randn(c.shape, generator=g).double() * 2


def test_without_gradients_the_window_gives_the_same_loss_and_state():
    lm = _model()
    chars, index, targets = _batch()
    state = _state(lm)
    train = lm(chars, *index, *targets, state)
    with torch.no_grad():
        evaluation = lm(chars, *index, *targets, state)  # each stack's inference path
    assert type(train.loss.grad_fn).__name__ == "FusedSoftmaxLossBackward"
    assert (train.state[1].abs() == 3.0).any(), "the cell clip must be exercised"
    torch.testing.assert_close(evaluation.loss.double(), train.loss.detach(), rtol=1e-6, atol=0)  # eval sums in fp32
    torch.testing.assert_close(evaluation.state[0], train.state[0].detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(evaluation.state[1], train.state[1].detach(), rtol=1e-5, atol=1e-5)
