"""What every task head shares: the token input, ELMo at the input and optionally at the output, the BiLSTM.

    input:  [x_k; ELMo_k^in] -> dropout [-> ReLU feed-forward] -> BiLSTM -> h_k        (B, T, 2H)
    output: [g_k; ELMo_k^out], g_k being h_k or the head's further encoding of it     (B, T, E [+ D])

ELMo^in and ELMo^out are separate scalar mixes of the same frozen biLM layers (the ``elmo`` module, paper section
3.3). The heads subclass :class:`TaskEncoder` rather than hold one, so their parameters keep the names saved task
models use (``token_input.*``, ``elmo.*``, ``encoder.*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from elmo.modules.elmo import ElmoHead
from elmo.tasks.bilstm import BiLSTMEncoder
from elmo.tasks.elmo_features import elmo_representations
from elmo.tasks.task_batches import TaskBatch
from elmo.tasks.token_input import TokenInput

if TYPE_CHECKING:  # a type hint only: kinds.py imports the models, task_config.py imports kinds.py
    from elmo.tasks.model_config import ModelConfig


class TaskEncoder(nn.Module):
    """Base of the task heads: builds the shared part, then calls :meth:`build_head` for the head's own layers.

    Args:
        token_input: x_k.
        config: the BiLSTM's ``hidden_dim`` (per direction), ``num_layers`` and ``dropout`` (also on its input), and
            the head's own settings.
        labels: the tags or classes the head scores.
        elmo: :class:`~elmo.tasks.elmo_features.CachedElmo` or :class:`elmo.Elmo` with 1 (input) or 2 (input and
            output) representations; None for the baseline.
        elmo_dim: D, the width of one ELMo representation.
    """

    feed_forward_input = False
    """A ReLU layer of width ``hidden_dim`` between the input and the BiLSTM (the BCN's)."""

    def __init__(
        self,
        token_input: TokenInput,
        config: ModelConfig,
        labels: Sequence[str],
        elmo: ElmoHead | None = None,
        elmo_dim: int = 0,
    ) -> None:
        super().__init__()
        self.token_input = token_input
        self.elmo = elmo
        num_mixes = elmo.num_output_representations if elmo is not None else 0
        self.elmo_dim = elmo_dim if num_mixes else 0
        self.elmo_at_output = num_mixes == 2
        self.elmo_output_dim = self.elmo_dim if self.elmo_at_output else 0  # what ELMo^out adds to the features
        self.dropout = nn.Dropout(config.dropout)
        input_dim = token_input.output_dim + self.elmo_dim
        if self.feed_forward_input:
            self.pre_encode = nn.Linear(input_dim, config.hidden_dim)
            input_dim = config.hidden_dim
        self.encoder = BiLSTMEncoder(input_dim, config.hidden_dim, config.num_layers, config.dropout)
        self.build_head(config, labels)

    def build_head(self, config: ModelConfig, labels: Sequence[str]) -> None:
        """Create the head's own layers (after the shared ones, so that layers are created, and randomly
        initialised, in the order of the computation)."""
        raise NotImplementedError

    def encode(self, batch: TaskBatch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """-> BiLSTM states h (B, T, 2H) and the ELMo representations (each (B, T, D); none without ELMo)."""
        x = self.token_input(batch.words, batch.chars)  # (B, T, Dx)
        elmo = []
        if self.elmo is not None:
            elmo = elmo_representations(self.elmo, batch.mask, batch.elmo_ids, batch.elmo_layers)
            x = torch.cat([x, elmo[0]], dim=-1)  # (B, T, Dx + D)
        x = self.dropout(x)
        if self.feed_forward_input:
            x = torch.relu(self.pre_encode(x))  # (B, T, H)
        return self.encoder(x, batch.mask), elmo

    def with_elmo_output(self, h: torch.Tensor, elmo: list[torch.Tensor]) -> torch.Tensor:
        """h (B, T, E) -> [h; ELMo^out] (B, T, E + D) when ELMo is used at the output, else h."""
        return torch.cat([h, elmo[1]], dim=-1) if self.elmo_at_output else h
