"""Sentence classifier: BiLSTM with max-pooling, optionally with ELMo (a simpler stand-in for the paper's BCN).

    input:  [x_k; ELMo_k^in]   -> dropout -> BiLSTM -> h_k
    output: [h_k; ELMo_k^out]  -> max over k -> dropout -> ReLU layer -> dropout -> linear -> class scores

ELMo^out (its own scalar mix) is present only with ``at_output``.
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.tasks.batching import TaskBatch
from elmo.tasks.bilstm import BiLSTMEncoder
from elmo.tasks.elmo_features import elmo_representations, elmo_widths
from elmo.tasks.token_input import TokenInput


class MaxPoolClassifier(nn.Module):
    """Max-pooling BiLSTM classifier; pass ``elmo=None`` for the baseline.

    Args: as :class:`~elmo.tasks.tagger.CrfTagger`, plus ``num_classes`` and the feed-forward layer's width
    ``classifier_hidden_dim``.
    """

    def __init__(
        self,
        token_input: TokenInput,
        num_classes: int,
        hidden_dim: int,
        num_layers: int,
        dropout: float,
        classifier_hidden_dim: int,
        elmo: nn.Module | None = None,
        elmo_dim: int = 0,
    ) -> None:
        super().__init__()
        self.token_input = token_input
        self.elmo = elmo
        elmo_in, elmo_out = elmo_widths(elmo, elmo_dim)
        self.elmo_at_output = elmo_out > 0
        self.dropout = nn.Dropout(dropout)
        input_dim = token_input.output_dim + elmo_in
        self.encoder = BiLSTMEncoder(input_dim, hidden_dim, num_layers, dropout)
        pooled_dim = self.encoder.output_dim + elmo_out
        self.hidden = nn.Linear(pooled_dim, classifier_hidden_dim)
        self.output = nn.Linear(classifier_hidden_dim, num_classes)

    def logits(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, C) class scores."""
        x = self.token_input(batch.words, batch.chars)  # (B, T, Dx)
        elmo = []
        if self.elmo is not None:
            elmo = elmo_representations(self.elmo, batch.mask, batch.elmo_ids, batch.elmo_layers)  # each (B, T, D)
            x = torch.cat([x, elmo[0]], dim=-1)
        h = self.encoder(self.dropout(x), batch.mask)  # (B, T, 2H)
        if self.elmo_at_output:
            h = torch.cat([h, elmo[1]], dim=-1)  # (B, T, 2H + D)
        h = h.masked_fill(~batch.mask.unsqueeze(-1), float("-inf")).amax(dim=1)  # (B, 2H [+ D])
        h = self.dropout(torch.relu(self.hidden(self.dropout(h))))  # (B, Hc)
        return self.output(h)

    def forward(self, batch: TaskBatch) -> torch.Tensor:
        """Mean cross-entropy of ``batch.targets`` (B,)."""
        return nn.functional.cross_entropy(self.logits(batch), batch.targets)

    def predict(self, batch: TaskBatch) -> list[int]:
        return self.logits(batch).argmax(dim=-1).tolist()
