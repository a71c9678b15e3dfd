"""The context-independent token representation x_k that ELMo is concatenated to: word vector [+ char-CNN]."""

from __future__ import annotations

import torch
from torch import nn

from elmo.config import CharCNNConfig
from elmo.modules.char_cnn import CharCNNEncoder


class TokenInput(nn.Module):
    """words (B, T) + chars (B, T, W) -> x (B, T, word_dim + char_filters).

    Args:
        word_vectors: initial embedding matrix (V, word_dim); row 0 is padding.
        freeze: keep the word vectors fixed.
        char_cnn: a char-CNN config (its filters are concatenated without projection), or None for words only.
    """

    def __init__(self, word_vectors: torch.Tensor, freeze: bool, char_cnn: CharCNNConfig | None) -> None:
        super().__init__()
        self.words = nn.Embedding.from_pretrained(word_vectors, freeze=freeze, padding_idx=0)
        self.chars = CharCNNEncoder(char_cnn, char_cnn.n_filters) if char_cnn is not None else None
        self.output_dim = word_vectors.shape[1] + (char_cnn.n_filters if char_cnn is not None else 0)

    def forward(self, words: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        x = self.words(words)  # (B, T, Dw)
        if self.chars is not None:
            x = torch.cat([x, self.chars(chars)], dim=-1)  # (B, T, Dw + F)
        return x
