"""Sequence tagger: char-CNN + word vectors + 2-layer BiLSTM + CRF, optionally with ELMo (paper section 4, NER).

    x_k = [word_k; charCNN_k]                        context-independent token representation
    input:  [x_k; ELMo_k^in]   -> dropout -> BiLSTM -> h_k
    output: [h_k; ELMo_k^out]  -> dropout -> linear -> CRF      (ELMo^out only with ``at_output``)

ELMo^in and ELMo^out are separate scalar mixes of the same frozen biLM layers (the ``elmo`` module).
"""

from __future__ import annotations

import torch
from torch import nn

from elmo.tasks.batching import TaskBatch
from elmo.tasks.bilstm import BiLSTMEncoder
from elmo.tasks.crf import ConditionalRandomField
from elmo.tasks.elmo_features import elmo_representations, elmo_widths
from elmo.tasks.token_input import TokenInput


class CrfTagger(nn.Module):
    """BiLSTM-CRF tagger; pass ``elmo=None`` for the baseline.

    Args:
        token_input: x_k.
        num_tags: K.
        hidden_dim, num_layers, dropout: the BiLSTM (``hidden_dim`` per direction).
        elmo: :class:`~elmo.tasks.elmo_features.CachedElmo` or :class:`elmo.Elmo` with 1 (input) or 2 (input and
            output) representations.
        elmo_dim: D, the width of one ELMo representation.
        allowed_transitions: CRF constraints, see :func:`~elmo.tasks.crf.bio_allowed_transitions`.
    """

    def __init__(
        self,
        token_input: TokenInput,
        num_tags: int,
        hidden_dim: int,
        num_layers: int,
        dropout: float,
        elmo: nn.Module | None = None,
        elmo_dim: int = 0,
        allowed_transitions: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.token_input = token_input
        self.elmo = elmo
        elmo_in, elmo_out = elmo_widths(elmo, elmo_dim)
        self.elmo_at_output = elmo_out > 0
        self.dropout = nn.Dropout(dropout)
        input_dim = token_input.output_dim + elmo_in
        self.encoder = BiLSTMEncoder(input_dim, hidden_dim, num_layers, dropout)
        self.emissions = nn.Linear(self.encoder.output_dim + elmo_out, num_tags)
        self.crf = ConditionalRandomField(num_tags, allowed_transitions)

    def emission_scores(self, batch: TaskBatch) -> torch.Tensor:
        """-> (B, T, K) per-token tag scores."""
        x = self.token_input(batch.words, batch.chars)  # (B, T, Dx)
        elmo = []
        if self.elmo is not None:
            elmo = elmo_representations(self.elmo, batch.mask, batch.elmo_ids, batch.elmo_layers)  # each (B, T, D)
            x = torch.cat([x, elmo[0]], dim=-1)  # (B, T, Dx + D)
        h = self.encoder(self.dropout(x), batch.mask)  # (B, T, 2H)
        if self.elmo_at_output:
            h = torch.cat([h, elmo[1]], dim=-1)  # (B, T, 2H + D)
        return self.emissions(self.dropout(h))

    def forward(self, batch: TaskBatch) -> torch.Tensor:
        """Mean negative log-likelihood of ``batch.targets`` (B, T) over the batch's sentences."""
        return self.crf(self.emission_scores(batch), batch.targets, batch.mask).mean()

    def predict(self, batch: TaskBatch) -> list[list[int]]:
        """Viterbi tag ids per sentence."""
        return self.crf.viterbi_decode(self.emission_scores(batch), batch.mask)
