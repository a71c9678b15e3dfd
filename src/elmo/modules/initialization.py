"""Initialise a fresh biLM the way bilm-tf ``LanguageModel`` does, so training starts from the same distribution.

* char embedding: uniform(-1, 1) (row 0, our padding id, stays zero);
* convolutions: uniform(-0.05, 0.05) for relu (Kim et al.), normal(0, sqrt(1 / (width * E))) for tanh; bias 0;
* highway: W_carry, W_transform normal(0, sqrt(1 / F)); b_carry -2, b_transform 0;
* CNN projection: normal(0, sqrt(1 / F)), bias 0;
* LSTM: TF's default glorot-uniform over the full [in + P, 4C] kernel and the [C, P] projection; bias 0.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.lstm import LstmCellWithProjection


@torch.no_grad()
def init_like_original(bilm: BiLM) -> None:
    encoder = bilm.token_encoder
    if isinstance(encoder, CharCNNEncoder):
        _init_char_cnn(encoder)
    for stack in (bilm.forward_lstm, bilm.backward_lstm):
        for cell in stack.layers:
            _init_lstm_cell(cell)


def _init_char_cnn(encoder: CharCNNEncoder) -> None:
    config = encoder.config
    encoder.char_embedding.weight.uniform_(-1.0, 1.0)
    encoder.char_embedding.weight[0] = 0.0
    for conv, (width, _) in zip(encoder.convolutions, config.filters):
        if config.activation == "relu":
            conv.weight.uniform_(-0.05, 0.05)
        else:
            conv.weight.normal_(0.0, math.sqrt(1.0 / (width * config.embedding_dim)))
        conv.bias.zero_()
    std = math.sqrt(1.0 / config.n_filters)
    if encoder.highway is not None:
        for carry, transform in zip(encoder.highway.carry, encoder.highway.transform):
            carry.weight.normal_(0.0, std)
            carry.bias.fill_(-2.0)
            transform.weight.normal_(0.0, std)
            transform.bias.zero_()
    if encoder.projection is not None:
        encoder.projection.weight.normal_(0.0, std)
        encoder.projection.bias.zero_()


def _init_lstm_cell(cell: LstmCellWithProjection) -> None:
    fan_in = cell.input_dim + cell.output_dim  # the TF kernel is [in + P, 4C]
    limit = math.sqrt(6.0 / (fan_in + 4 * cell.cell_dim))
    cell.input_linearity.weight.uniform_(-limit, limit)
    cell.state_linearity.weight.uniform_(-limit, limit)
    cell.input_linearity.bias.zero_()
    if cell.projection is not None:
        nn.init.xavier_uniform_(cell.projection.weight)
