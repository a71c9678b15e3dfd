"""Character-CNN token encoder (Kim et al., 2016; bilm-tf ``_build_word_char_embeddings``).

    char ids (B, T, W) -> distinct tokens (U, W) -> char embeddings (U, W, E)
      -> for each (width, n): conv over the W positions (VALID) -> max over positions -> + bias -> activation
      -> concat (U, F) -> highway layers -> linear projection to P (only when F != P) -> back to (B, T, P)

Speed: a token's vector depends on its characters only, so each distinct token of a batch is encoded once
(a batch of 64 sentences repeats "the", ",", "." and padding many times). All widths run as ONE GEMM: kernels
are zero-padded to the widest width K, every position gets a window of K characters (the sequence is padded by
K - 1 at the end), and positions a narrower filter could not reach in a VALID conv are set to -inf before the
max. The bias is added after the max (max(x + b) = max(x) + b), as one (U, F) add instead of one per position.
The weights stay in the ``nn.Conv1d`` modules, so names and shapes match the original files.

Most of the W = 50 positions are padding. Every row ends in a run of one repeated id (padding, or 0 for a masked
token), and all windows inside that run give the same response, so the max is unchanged when each row keeps only
its first ``n + K`` positions (n: where its trailing run starts). Tokens are sorted by n and each chunk runs at the
width its longest token needs: for typical text about a third of the positions, with identical results.
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.config import N_CHARACTERS_INFERENCE, CharCNNConfig
from elmo.modules.highway import Highway
from elmo.modules.threads import gemm_threads

TOKENS_PER_CHUNK = 128
"""Tokens per conv GEMM: bounds the (chunk, W, F) activation (~50 MB for the 2048-filter CNN in float32)."""


def content_length(char_ids: torch.Tensor) -> torch.Tensor:
    """(N, W) -> (N,): where each row's trailing run of one repeated id (its padding) starts."""
    same = char_ids == char_ids[:, -1:]  # (N, W)
    trailing = same.flip(1).int().cumprod(1).sum(1)  # length of the run that ends the row
    return char_ids.shape[1] - trailing


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
        distinct, index = torch.unique(char_ids.reshape(-1, width), dim=0, return_inverse=True)  # (U, W), (B*T,)
        vectors = self.encode_tokens(distinct)  # (U, P)
        return vectors[index].view(batch, time, -1)

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, W) long -> (N, P): the token layer of N tokens."""
        width = char_ids.shape[1]
        kernel = self._fused_kernel()  # (K*E, F)
        k = kernel.shape[0] // self.config.embedding_dim
        needed = (content_length(char_ids) + k).clamp(max=width)  # (N,) positions that decide each row's max
        sort = char_ids.shape[0] > TOKENS_PER_CHUNK
        order = torch.argsort(needed) if sort else torch.arange(char_ids.shape[0], device=char_ids.device)
        parts = []
        for rows in order.split(TOKENS_PER_CHUNK):
            keep = int(needed[rows].max())
            x = self.char_embedding(char_ids[rows, :keep]).to(kernel.dtype)  # (n, keep, E)
            parts.append(self._max_over_positions(x, kernel, self._invalid_positions(keep)))
        pooled = torch.cat(parts)  # (N, F) in the order of `order`
        if sort:
            pooled = pooled[torch.argsort(order)]
        x = self.activation(pooled + self._bias().to(pooled.dtype))
        if self.highway is not None:
            x = self.highway(x)
        if self.projection is not None:
            with gemm_threads(x.shape[0] * self.projection.weight.numel()):
                x = self.projection(x)  # (N, P)
        return x

    @staticmethod
    def _max_over_positions(x: torch.Tensor, kernel: torch.Tensor, invalid: torch.Tensor) -> torch.Tensor:
        """x (n, W, E) -> max over the W positions of every filter's response, (n, F), without the bias."""
        n, width, dim = x.shape
        k = kernel.shape[0] // dim
        padded = nn.functional.pad(x, (0, 0, 0, k - 1))  # (n, W + K - 1, E)
        windows = padded.unfold(1, k, 1)  # (n, W, E, K): position p sees characters p .. p + K - 1
        with gemm_threads(n * width * kernel.numel()):
            responses = torch.matmul(windows.reshape(n * width, dim * k), kernel).view(n, width, -1)  # (n, W, F)
        responses.masked_fill_(invalid, float("-inf"))
        return responses.amax(dim=1)

    def _fused_kernel(self) -> torch.Tensor:
        """All conv weights as one (K*E, F) matrix, zero-padded to the widest K."""
        k = max(w for w, _ in self.config.filters)
        parts = [nn.functional.pad(conv.weight, (0, k - conv.kernel_size[0])) for conv in self.convolutions]
        return torch.cat(parts).flatten(1).t()  # (E*K, F), matching the (E, K) order of unfold's windows

    def _invalid_positions(self, width: int) -> torch.Tensor:
        """(W, F): True where a filter's VALID conv over W positions has no window."""
        device = self.char_embedding.weight.device
        positions = torch.arange(width, device=device).unsqueeze(1)  # (W, 1)
        return torch.cat([(positions > width - conv.kernel_size[0]).expand(width, conv.out_channels)
                          for conv in self.convolutions], dim=1)

    def _bias(self) -> torch.Tensor:
        return torch.cat([conv.bias for conv in self.convolutions])  # (F,)
