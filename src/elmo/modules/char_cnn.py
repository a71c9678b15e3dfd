"""Character-CNN token encoder (Kim et al., 2016; bilm-tf ``_build_word_char_embeddings``).

    char ids (B, T, W) -> distinct tokens (U, W) -> char embeddings (U, W, E)
      -> for each (width, n): conv over the W positions (VALID) -> max over positions -> + bias -> activation
      -> concat (U, F) -> highway layers -> linear projection to P (only when F != P) -> back to (B, T, P)

Speed: a token's vector depends on its characters only, so each distinct token of a batch is encoded once (a batch
of 64 sentences repeats "the", ",", "." and padding many times). All widths run as ONE GEMM: kernels are zero-padded
to the widest width K and every position gets a window of K characters. The bias is added after the max (max(x + b)
= max(x) + b), as one (U, F) add instead of one per position. The weights stay in the ``nn.Conv1d`` modules, so
names and shapes match the original files.

Most of the W = 50 positions are padding. Every row ends in a run of one repeated id (padding, or 0 for a masked
token) starting at n, and every window that starts inside that run sees the same characters as the one at n, so
the windows at positions 0..n decide the max (when the one at n fits: n + K <= W; longer rows keep all W positions
and mask the windows a narrower filter could not have). Tokens are sorted by n and each chunk runs with the
positions its longest token needs: 8-9 of the 50 for typical English words, with identical results.

The max is TF's ``max_pool`` (what bilm-tf trains with): its gradient goes to the first position holding the
maximum (:class:`MaxPool`). In training with compiling on (:mod:`elmo.modules.compiled`), the max and its first
position come from one ``torch.compile``'d reduction (:func:`max_and_first_position`) instead of four eager passes.
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.config import N_CHARACTERS_INFERENCE, CharCNNConfig
from elmo.modules.compiled import compile_enabled, run_compiled
from elmo.modules.highway import Highway
from elmo.modules.shape_buckets import bucket_rows, buckets_shapes

TOKENS_PER_CHUNK = 128
"""Tokens per conv GEMM: bounds the (chunk, W, F) activation (~50 MB for the 2048-filter CNN in float32)."""


class MaxPool(torch.autograd.Function):
    """(n, positions, F) -> (n, F), the max over positions, with TF ``max_pool``'s gradient: all of it to the first
    position holding the maximum. (``amax`` splits it among ties; ``max(dim)`` finds the same position as this, but
    eagerly on CPU both it and ``amax``'s backward are much slower than this.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        if compile_enabled():
            result = run_compiled(max_and_first_position, "the char CNN's max-pool", x, dynamic=True)
            if result is not None:
                values, first = result
                ctx.save_for_backward(first)
                return values
        values = x.amax(dim=1)  # (n, F)
        positions = x.shape[1]
        # weight position p by positions - p: the largest weight among the maxima marks the first of them
        small = torch.uint8 if positions < 256 else torch.int32
        weights = torch.arange(positions, 0, -1, dtype=small, device=x.device).view(1, -1, 1)
        maxima = x == values.unsqueeze(1)  # (n, positions, F) bool
        maxima = maxima.view(torch.uint8) if small == torch.uint8 else maxima.to(small)  # bool -> uint8: no copy
        first = positions - maxima.mul_(weights).amax(dim=1)  # (n, F)
        first.clamp_(max=positions - 1)  # a NaN equals nothing: its column gets the last position, not one past it
        ctx.save_for_backward(first)
        return values

    @staticmethod
    def backward(ctx, grad):
        (first,) = ctx.saved_tensors
        return grad.new_zeros(ctx.shape).scatter_(1, first.long().unsqueeze(1), grad.unsqueeze(1))


def max_and_first_position(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, positions, F) -> the max over positions and the first position holding it, (n, F) each: ``max(dim)``'s
    contract, for ``torch.compile`` (one fused pass; eager, it is the slow path :class:`MaxPool` avoids)."""
    return torch.max(x, dim=1)


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
        return vectors.index_select(0, index).view(batch, time, -1)

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, W) long -> (N, P): the token layer of N tokens."""
        width = char_ids.shape[1]
        kernel = self._fused_kernel()  # (K*E, F)
        k = kernel.shape[0] // self.config.embedding_dim
        count = char_ids.shape[0]
        bucketed = buckets_shapes(kernel.dtype, char_ids.device)
        if bucketed and bucket_rows(count) > count:  # copies of the last row, dropped at the end
            char_ids = torch.cat([char_ids, char_ids[-1:].expand(bucket_rows(count) - count, -1)])  # (N', W)
        runs = content_length(char_ids)  # (N,) where each row's trailing run starts
        sort = char_ids.shape[0] > TOKENS_PER_CHUNK
        order = torch.argsort(runs) if sort else torch.arange(char_ids.shape[0], device=char_ids.device)
        parts = []
        for rows in order.split(TOKENS_PER_CHUNK):
            n = int(runs[rows].max())
            if bucketed and n + k <= width:  # more positions of the trailing run: the same max, fewer shapes
                n = min(-(-n // 8) * 8, width - k)
            if n + k <= width:  # windows at positions 0..n, all inside the row
                x = self.char_embedding(char_ids[rows, : n + k]).to(kernel.dtype)  # (rows, n + K, E)
                parts.append(self._max_over_positions(x.unfold(1, k, 1), kernel))
            else:  # every position; windows padded past the row's end, and masked where a filter has none
                x = self.char_embedding(char_ids[rows]).to(kernel.dtype)  # (rows, W, E)
                windows = nn.functional.pad(x, (0, 0, 0, k - 1)).unfold(1, k, 1)  # (rows, W, E, K)
                parts.append(self._max_over_positions(windows, kernel, self._invalid_positions(width)))
        pooled = torch.cat(parts)  # (N, F) in the order of `order`
        if sort:
            pooled = pooled.index_select(0, torch.argsort(order))
        x = self.activation(pooled + self._bias().to(pooled.dtype))
        if self.highway is not None:
            x = self.highway(x)
        if self.projection is not None:
            x = self.projection(x)  # (N, P)
        return x[:count]

    @staticmethod
    def _max_over_positions(windows: torch.Tensor, kernel: torch.Tensor, invalid: torch.Tensor | None = None):
        """windows (n, positions, E, K) -> max over the positions of every filter's response, (n, F), no bias."""
        n, positions, dim, k = windows.shape
        responses = torch.matmul(windows.reshape(n * positions, dim * k), kernel)  # (n * positions, F)
        responses = responses.view(n, positions, -1)
        if invalid is not None:
            responses.masked_fill_(invalid, float("-inf"))
        return MaxPool.apply(responses) if responses.requires_grad else responses.amax(dim=1)

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
