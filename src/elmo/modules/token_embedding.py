"""Token-layer vectors looked up per vocabulary word instead of computed from characters.

The original code can dump the char-CNN output of every vocabulary word (``dump_token_embeddings``) and run the
biLM from word ids; models trained with token inputs have such a table too. Ids are shifted by +1 so 0 pads.
"""

from __future__ import annotations

import torch
from torch import nn


class TokenEmbedding(nn.Module):
    """(B, T) word ids (+1 shifted, 0 = padding) -> (B, T, P) token vectors."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size + 1, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)
