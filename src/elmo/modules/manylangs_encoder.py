"""ELMoForManyLangs' token encoder (its ``ConvTokenEmbedder``), computed op for op as the original does:

    token row (1 + W ids, :mod:`elmo.text.manylangs_vocab`) -> word vector (word_dim)          [if word_dim > 0]
                                                       -> char vectors (W, char_dim)
      -> for each (width, n): Conv1d over the W positions -> max over positions -> activation
      -> concat (F) -> highway layers (AllenNLP's form, always relu) -> (F)                  [if char_dim > 0]
    [word vector; char CNN output] -> linear projection (always present) -> (P)

The highway is AllenNLP's ``y = g * x + (1 - g) * relu(A x)`` with ``g = sigmoid(B x)``, A and B stacked in one
(2F, F) matrix, A first: not bilm-tf's form (:mod:`elmo.modules.highway`), so it is written out here with the
original's weights and arithmetic. The convolutions run as ``nn.Conv1d`` over all W positions like the original's
(not the fused GEMM of :mod:`elmo.modules.char_cnn`), so the token layer matches it bit for bit; each distinct token
is encoded once per batch.
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.config import ManyLangsTokenConfig
from elmo.text.manylangs_vocab import BOS_TOKEN, EOS_TOKEN, ManyLangsLexicon

TOKENS_PER_CHUNK = 256
"""Tokens per convolution call: bounds the (chunk, F, W) activation (~100 MB for 2048 filters in float32)."""


class ManyLangsTokenEncoder(nn.Module):
    """(B, T, 1 + W) or (N, 1 + W) +1-shifted ids -> (B, T, P) / (N, P).

    Args:
        config: the token embedder's architecture and table sizes.
        output_dim: P, the LSTM's projection size.
        lexicon: the model's dictionaries, which map tokens to the ids this module reads (kept here so the biLM
            carries them; the module itself only reads tensors).
    """

    boundary_tokens = (BOS_TOKEN, EOS_TOKEN)
    """What the original wraps every sentence in (bilm-tf's are ``<S>``/``</S>``)."""

    def __init__(self, config: ManyLangsTokenConfig, output_dim: int, lexicon: ManyLangsLexicon | None = None) -> None:
        super().__init__()
        self.config = config
        self.lexicon = lexicon
        self.output_dim = output_dim
        self.word_embedding = nn.Embedding(config.n_words, config.word_dim) if config.word_dim > 0 else None
        self.char_embedding = None
        if config.char_dim > 0:
            self.char_embedding = nn.Embedding(config.n_characters, config.char_dim)
            self.convolutions = nn.ModuleList(
                nn.Conv1d(config.char_dim, num, kernel_size=width) for width, num in config.filters
            )
            n_filters = config.n_filters
            self.highway = nn.ModuleList(nn.Linear(n_filters, 2 * n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.input_dim, output_dim)
        self.activation = torch.relu if config.activation == "relu" else torch.tanh

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T, 1 + W) long -> (B, T, P); all-zero rows (padding) give some vector, which the biLM masks."""
        batch, time, width = ids.shape
        distinct, index = torch.unique(ids.reshape(-1, width), dim=0, return_inverse=True)  # (U, 1+W), (B*T,)
        return self.encode_tokens(distinct).index_select(0, index).view(batch, time, -1)

    def encode_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """(N, 1 + W) long -> (N, P): the token layer of N tokens."""
        ids = (ids - 1).clamp_(min=0)  # back to the dictionaries' ids; padding rows become id 0
        parts = []
        if self.word_embedding is not None:
            parts.append(self.word_embedding(ids[:, 0]))  # (N, word_dim)
        if self.char_embedding is not None:
            parts.append(torch.cat([self._char_features(rows) for rows in ids[:, 1:].split(TOKENS_PER_CHUNK)]))
        return self.projection(torch.cat(parts, dim=-1))  # (N, P)

    def _char_features(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(n, W) -> (n, F): convolutions, max over positions, activation, highway."""
        x = self.char_embedding(char_ids).transpose(1, 2)  # (n, E, W)
        x = torch.cat([self.activation(torch.max(conv(x), dim=-1)[0]) for conv in self.convolutions], dim=-1)
        n_filters = x.shape[-1]
        for layer in self.highway:
            projected = layer(x)  # (n, 2F): the candidate, then the gate
            candidate = torch.relu(projected[:, :n_filters])
            gate = torch.sigmoid(projected[:, n_filters:])
            x = gate * x + (1 - gate) * candidate
        return x
