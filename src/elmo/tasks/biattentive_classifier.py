"""Biattentive classification network (BCN; McCann et al., 2017), the SST model of the ELMo paper (section 4).

For one sentence both BCN inputs are the same sentence, so the biattention is self-attention over the encoding:

    x:  [x_k; ELMo_k^in] -> ReLU feed-forward -> BiLSTM encoder -> X               (B, T, 2H)
    attention:  A = softmax_j(X_k . X_j)  (masked)  ->  C = A X                      (B, T, 2H)
    integrate:  [X; X - C; X * C] -> BiLSTM integrator -> Xy [; ELMo_k^out]           (B, T, 2H [+ D])
    pool:       [max; min; mean; self-attentive] over k -> dropout -> ReLU layer -> linear -> class scores

Simplification: the original's final maxout network is a ReLU feed-forward layer here.
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.tasks.batching import TaskBatch
from elmo.tasks.bilstm import BiLSTMEncoder
from elmo.tasks.elmo_features import elmo_representations, elmo_widths
from elmo.tasks.token_input import TokenInput


class BiattentiveClassifier(nn.Module):
    """Args: as :class:`~elmo.tasks.classifier.MaxPoolClassifier` (``num_layers`` is per BiLSTM)."""

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
        self.pre_encode = nn.Linear(input_dim, hidden_dim)
        self.encoder = BiLSTMEncoder(hidden_dim, hidden_dim, num_layers, dropout)
        self.integrator = BiLSTMEncoder(3 * self.encoder.output_dim, hidden_dim, num_layers, dropout)
        pooled_dim = self.integrator.output_dim + elmo_out
        self.attention_scores = nn.Linear(pooled_dim, 1)
        self.hidden = nn.Linear(4 * pooled_dim, classifier_hidden_dim)
        self.output = nn.Linear(classifier_hidden_dim, num_classes)

    def logits(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, C) class scores."""
        mask = batch.mask  # (B, T)
        x = self.token_input(batch.words, batch.chars)  # (B, T, Dx)
        elmo = []
        if self.elmo is not None:
            elmo = elmo_representations(self.elmo, mask, batch.elmo_ids, batch.elmo_layers)  # each (B, T, D)
            x = torch.cat([x, elmo[0]], dim=-1)
        x = torch.relu(self.pre_encode(self.dropout(x)))  # (B, T, H)
        encoded = self.encoder(x, mask)  # (B, T, 2H)
        scores = encoded @ encoded.transpose(1, 2)  # (B, T, T)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        context = torch.softmax(scores, dim=-1) @ encoded  # (B, T, 2H)
        integrated = torch.cat([encoded, encoded - context, encoded * context], dim=-1)  # (B, T, 6H)
        h = self.integrator(self.dropout(integrated), mask)  # (B, T, 2H)
        if self.elmo_at_output:
            h = torch.cat([h, elmo[1]], dim=-1)  # (B, T, 2H + D)
        pooled = self.dropout(_pool(h, mask, self.attention_scores(h).squeeze(-1)))  # (B, 4 * (2H [+ D]))
        return self.output(self.dropout(torch.relu(self.hidden(pooled))))

    def forward(self, batch: TaskBatch) -> torch.Tensor:
        """Mean cross-entropy of ``batch.targets`` (B,)."""
        return nn.functional.cross_entropy(self.logits(batch), batch.targets)

    def predict(self, batch: TaskBatch) -> list[int]:
        return self.logits(batch).argmax(dim=-1).tolist()


def _pool(h: torch.Tensor, mask: torch.Tensor, attention_scores: torch.Tensor) -> torch.Tensor:
    """h (B, T, D), mask (B, T), scores (B, T) -> [max; min; mean; attention-weighted sum] (B, 4D) over real steps."""
    keep = mask.unsqueeze(-1)  # (B, T, 1)
    max_pool = h.masked_fill(~keep, float("-inf")).amax(dim=1)
    min_pool = h.masked_fill(~keep, float("inf")).amin(dim=1)
    mean_pool = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)
    weights = torch.softmax(attention_scores.masked_fill(~mask, float("-inf")), dim=1)  # (B, T)
    attended = (weights.unsqueeze(-1) * h).sum(dim=1)
    return torch.cat([max_pool, min_pool, mean_pool, attended], dim=-1)
