"""Sentence classifiers: the shared classification layers, and BiLSTM with max-pooling (a simpler stand-in for the
paper's BCN, :mod:`elmo.tasks.biattentive_classifier`).

    input:  [x_k; ELMo_k^in]   -> dropout -> BiLSTM -> h_k
    output: [h_k; ELMo_k^out]  -> max over k -> dropout -> ReLU layer -> dropout -> linear -> class scores

ELMo^out (its own scalar mix) is present only with ``at_output``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from elmo.tasks.task_batches import TaskBatch
from elmo.tasks.task_encoder import TaskEncoder

if TYPE_CHECKING:  # a type hint only: kinds.py imports the models, task_config.py imports kinds.py
    from elmo.tasks.model_config import ModelConfig


class SentenceClassifier(TaskEncoder):
    """A task encoder that pools each sentence into one vector, then scores the classes ``labels`` with
    dropout -> ReLU layer (``config.classifier_hidden_dim``) -> dropout -> linear.

    Subclasses define :meth:`build_pooling` and :meth:`pool`.
    """

    def build_head(self, config: ModelConfig, labels: Sequence[str]) -> None:
        pooled_dim = self.build_pooling(config)
        self.hidden = nn.Linear(pooled_dim, config.classifier_hidden_dim)
        self.output = nn.Linear(config.classifier_hidden_dim, len(labels))

    def build_pooling(self, config: ModelConfig) -> int:
        """Create the pooling's own layers; -> P, the pooled width."""
        raise NotImplementedError

    def pool(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, P), one vector per sentence."""
        raise NotImplementedError

    def logits(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, C) class scores."""
        return self.output(self.dropout(torch.relu(self.hidden(self.dropout(self.pool(batch))))))

    def forward(self, batch: TaskBatch) -> torch.Tensor:
        """Mean cross-entropy of ``batch.targets`` (B,)."""
        return nn.functional.cross_entropy(self.logits(batch), batch.targets)

    def predict(self, batch: TaskBatch) -> list[int]:
        return self.logits(batch).argmax(dim=-1).tolist()


class MaxPoolClassifier(SentenceClassifier):
    """Max-pooling BiLSTM classifier."""

    def build_pooling(self, config: ModelConfig) -> int:
        return self.encoder.output_dim + self.elmo_output_dim

    def pool(self, batch: TaskBatch) -> torch.Tensor:
        h, elmo = self.encode(batch)  # (B, T, 2H)
        h = self.with_elmo_output(h, elmo)  # (B, T, 2H [+ D])
        return h.masked_fill(~batch.mask.unsqueeze(-1), float("-inf")).amax(dim=1)  # (B, 2H [+ D])
