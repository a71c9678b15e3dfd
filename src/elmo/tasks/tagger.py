"""Sequence tagger: char-CNN + word vectors + 2-layer BiLSTM + CRF, optionally with ELMo (paper section 4, NER).

    x_k = [word_k; charCNN_k]                        context-independent token representation
    input:  [x_k; ELMo_k^in]   -> dropout -> BiLSTM -> h_k
    output: [h_k; ELMo_k^out]  -> dropout -> linear -> CRF      (ELMo^out only with ``at_output``)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from elmo.tasks.crf import ConditionalRandomField, bio_allowed_transitions, is_bio
from elmo.tasks.task_batches import TaskBatch
from elmo.tasks.task_encoder import TaskEncoder

if TYPE_CHECKING:  # a type hint only: kinds.py imports the models, task_config.py imports kinds.py
    from elmo.tasks.model_config import ModelConfig


class CrfTagger(TaskEncoder):
    """BiLSTM-CRF tagger over the K tags ``labels``; with ``config.bio_constraints`` and BIO tags, the CRF never
    predicts an invalid transition (:func:`~elmo.tasks.crf.bio_allowed_transitions`)."""

    def build_head(self, config: ModelConfig, labels: Sequence[str]) -> None:
        allowed = bio_allowed_transitions(labels) if config.bio_constraints and is_bio(labels) else None
        self.emissions = nn.Linear(self.encoder.output_dim + self.elmo_output_dim, len(labels))
        self.crf = ConditionalRandomField(len(labels), allowed)

    def emission_scores(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, T, K) per-token tag scores."""
        h, elmo = self.encode(batch)  # (B, T, 2H)
        return self.emissions(self.dropout(self.with_elmo_output(h, elmo)))

    def forward(self, batch: TaskBatch) -> torch.Tensor:
        """Mean negative log-likelihood of ``batch.targets`` (B, T) over the batch's sentences."""
        return self.crf(self.emission_scores(batch), batch.targets, batch.mask).mean()

    def predict(self, batch: TaskBatch) -> list[list[int]]:
        """Viterbi tag ids per sentence."""
        return self.crf.viterbi_decode(self.emission_scores(batch), batch.mask)
