"""Biattentive classification network (BCN; McCann et al., 2017), the SST model of the ELMo paper (section 4).

For one sentence both BCN inputs are the same sentence, so the biattention is self-attention over the encoding:

    x:  [x_k; ELMo_k^in] -> ReLU feed-forward -> BiLSTM encoder -> X               (B, T, 2H)
    attention:  A = softmax_j(X_k . X_j)  (masked)  ->  C = A X                      (B, T, 2H)
    integrate:  [X; X - C; X * C] -> BiLSTM integrator -> Xy [; ELMo_k^out]           (B, T, 2H [+ D])
    pool:       [max; min; mean; self-attentive] over k -> dropout -> ReLU layer -> dropout -> linear -> scores

Simplification: the original's final maxout network is a ReLU feed-forward layer here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from elmo.tasks.bilstm import BiLSTMEncoder
from elmo.tasks.classifier import SentenceClassifier
from elmo.tasks.task_batches import TaskBatch

if TYPE_CHECKING:  # a type hint only: kinds.py imports the models, task_config.py imports kinds.py
    from elmo.tasks.model_config import ModelConfig


class BiattentiveClassifier(SentenceClassifier):
    """BCN sentence classifier (``config.num_layers`` is per BiLSTM)."""

    feed_forward_input = True

    def build_pooling(self, config: ModelConfig) -> int:
        integrator_input = 3 * self.encoder.output_dim  # [X; X - C; X * C]
        self.integrator = BiLSTMEncoder(integrator_input, config.hidden_dim, config.num_layers, config.dropout)
        pooled_dim = self.integrator.output_dim + self.elmo_output_dim
        self.attention_scores = nn.Linear(pooled_dim, 1)
        return 4 * pooled_dim

    def pool(self, batch: TaskBatch) -> torch.Tensor:
        mask = batch.mask  # (B, T)
        encoded, elmo = self.encode(batch)  # (B, T, 2H)
        scores = encoded @ encoded.transpose(1, 2)  # (B, T, T)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        context = torch.softmax(scores, dim=-1) @ encoded  # (B, T, 2H)
        integrated = torch.cat([encoded, encoded - context, encoded * context], dim=-1)  # (B, T, 6H)
        h = self.with_elmo_output(self.integrator(self.dropout(integrated), mask), elmo)  # (B, T, 2H [+ D])
        return _masked_pools(h, mask, self.attention_scores(h).squeeze(-1))  # (B, 4 * (2H [+ D]))


def _masked_pools(h: torch.Tensor, mask: torch.Tensor, attention_scores: torch.Tensor) -> torch.Tensor:
    """h (B, T, D), mask (B, T), scores (B, T) -> [max; min; mean; attention-weighted sum] (B, 4D) over real steps."""
    keep = mask.unsqueeze(-1)  # (B, T, 1)
    max_pool = h.masked_fill(~keep, float("-inf")).amax(dim=1)
    min_pool = h.masked_fill(~keep, float("inf")).amin(dim=1)
    mean_pool = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)
    weights = torch.softmax(attention_scores.masked_fill(~mask, float("-inf")), dim=1)  # (B, T)
    attended = (weights.unsqueeze(-1) * h).sum(dim=1)
    return torch.cat([max_pool, min_pool, mean_pool, attended], dim=-1)
