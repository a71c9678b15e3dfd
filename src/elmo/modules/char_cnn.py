"""Character-CNN token encoder (Kim et al., 2016; bilm-tf ``_build_word_char_embeddings``).

    char ids (B, T, W) -> char embeddings (B*T, W, E)
      -> for each (width, n): conv over the W positions (VALID) -> max over positions -> activation
      -> concat (B*T, F) -> highway layers -> linear projection to P (only when F != P) -> (B, T, P)
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.config import N_CHARACTERS_INFERENCE, CharCNNConfig
from elmo.modules.highway import Highway


class CharCNNEncoder(nn.Module):
    """Maps +1-shifted character ids to one vector per token.

    Args:
        config: the ``char_cnn`` options.
        output_dim: P, the LSTM projection dim; a projection layer exists only when it differs from F.
    """

    def __init__(self, config: CharCNNConfig, output_dim: int) -> None:
        super().__init__()
        self.config = config
        # Row 0 is padding: it stays zero, so padded tokens see only the conv biases.
        self.char_embedding = nn.Embedding(N_CHARACTERS_INFERENCE, config.embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, num, kernel_size=width) for width, num in config.filters
        )
        n_filters = config.n_filters
        self.highway = Highway(n_filters, config.n_highway) if config.n_highway > 0 else None
        self.projection = nn.Linear(n_filters, output_dim) if n_filters != output_dim else None
        self.activation = torch.relu if config.activation == "relu" else torch.tanh
        self.output_dim = output_dim

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, W) long -> (B, T, P)."""
        batch, time, width = char_ids.shape
        x = self.char_embedding(char_ids.reshape(-1, width))  # (B*T, W, E)
        x = x.transpose(1, 2)  # (B*T, E, W)
        # Max before the activation, as the original does (identical for monotone relu/tanh, cheaper).
        pooled = [conv(x).amax(dim=-1) for conv in self.convolutions]  # each (B*T, n_i)
        x = self.activation(torch.cat(pooled, dim=-1))  # (B*T, F)
        if self.highway is not None:
            x = self.highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (B*T, P)
        return x.view(batch, time, -1)
