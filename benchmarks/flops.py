"""FLOPs of the biLM's work, counted the way each benchmark's fraction of the GEMM peak needs them.

Only the GEMMs count (2 FLOPs per multiply-add; elementwise work, a few percent, is left out), so a fraction of
the measured GEMM peak says how much faster the same arithmetic could still run. "Ours" counts what our code
actually computes: the char CNN and highway once per distinct word, the CNN's one fused kernel (the widest width
K) only at the positions 0..n that decide a word's max (n: where its padding starts; every position for words that
reach into the last K - 1 characters), the LSTMs only at real positions (inference skips padding), the first
layer's input half once per distinct word (a table row each, the padding's too). The CNN's
count is a lower bound: the code runs a chunk of words, sorted by length, to its longest word's n (in a batch of
real sentences a few percent more CNN work, under 1% of the total; benchmarks/roofline.py counts every product as
it runs).
"""

from __future__ import annotations

import torch

from elmo.modules.char_cnn import content_length


def token_layer_macs(encoder, char_ids: torch.Tensor) -> float:
    """Multiply-adds of our char CNN + highway + projection over the distinct words ``char_ids`` (N, W)."""
    k = max(w for w, _ in encoder.config.filters)
    runs = content_length(char_ids)
    positions = torch.where(runs + k <= char_ids.shape[1], runs + 1, char_ids.shape[1]).sum().item()
    cnn = positions * k * encoder.config.embedding_dim * encoder.config.n_filters
    return cnn + char_ids.shape[0] * dense_word_macs(encoder)


def reference_token_macs(encoder) -> float:
    """Multiply-adds per token of AllenNLP's encoder: every conv over all W positions, highway for every token."""
    width = encoder.config.max_characters_per_token
    cnn = sum(conv.weight.numel() * (width - w + 1) for conv, (w, _) in zip(encoder.convolutions,
                                                                           encoder.config.filters))
    return cnn + dense_word_macs(encoder)


def dense_word_macs(encoder) -> float:
    """Multiply-adds per word of the highway and projection layers."""
    return sum(p.numel() for n, p in encoder.named_parameters()
               if ("highway" in n or "projection" in n) and p.dim() == 2)


def lstm_macs_per_position(bilm) -> float:
    """Multiply-adds per token position of both LSTM stacks (input half, recurrence, projection of every layer)."""
    return sum(p.numel() for s in (bilm.forward_lstm, bilm.backward_lstm) for p in s.parameters() if p.dim() == 2)


def our_lstm_macs(bilm, positions: int, distinct_words: int) -> float:
    """Multiply-adds of both LSTM stacks as inference runs them on one batch: the first layer's input half once per
    row of the batch's word table (its distinct words and the padding's row), the rest at each real position."""
    from elmo.modules.lstm import WORD_GATES_BYTES

    first = bilm.forward_lstm.layers[0].input_linearity.weight  # (4C, P)
    rows = distinct_words + 1
    if rows >= positions or rows * first.shape[0] * first.element_size() > WORD_GATES_BYTES:
        return positions * lstm_macs_per_position(bilm)
    return positions * (lstm_macs_per_position(bilm) - 2 * first.numel()) + 2 * rows * first.numel()
