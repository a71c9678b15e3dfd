"""The biLM as a language model: what bilm-tf ``LanguageModel`` trains.

    word char ids (U, W) --char CNN (shared)--> (U, P) --index--> forward inputs (B, T, P), backward inputs (B, T, P)
    forward inputs  --forward LSTM stack-->  (B, T, P) --dropout--> shared softmax --> CE vs forward targets
    backward inputs --backward LSTM stack--> (B, T, P) --dropout--> shared softmax --> CE vs backward targets
    loss = (mean forward CE + mean backward CE) / 2

The backward stack reads its own stream (sentences reversed, ``</S> w_n ... w_1 <S>``), left to right, with its
own carried state, exactly as the original trainer feeds it. Dropout on every LSTM layer input lives in the stacks
(``build_bilm(dropout=...)``); the dropout on the LSTM output before the softmax lives here.

Speed, without changing the arithmetic: the two stacks run in lockstep (one batched op per step for both
directions, :func:`~elmo.modules.lstm.run_stacks_in_lockstep`), and the softmax head takes both directions in one
fused call with a single weight gradient (:func:`~elmo.modules.softmax.head_losses`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from elmo.modules.bilm import BiLM, BiLMState
from elmo.modules.lstm import run_stacks_in_lockstep
from elmo.modules.softmax import LogUniformSampler, Softmax, head_losses


@dataclass
class LMOutput:
    loss: torch.Tensor
    """Scalar: the mean of the two directions' mean token losses (sampled-softmax loss when sampling)."""
    forward_loss: torch.Tensor
    """Scalars without gradient (for logging): each direction's mean token loss."""
    backward_loss: torch.Tensor
    state: BiLMState
    """Final LSTM states (h (2, L, B, P), c (2, L, B, C)), still attached to the graph."""


class BiLMLanguageModel(nn.Module):
    """A :class:`BiLM` plus the shared softmax; ``num_sampled=None`` trains with the full softmax.

    Args:
        bilm: token encoder and the two stacks (char-CNN encoder).
        softmax: the shared output layer over the frequency-sorted vocabulary.
        output_dropout: dropout on the top LSTM output before the softmax (0.1 in the original).
        num_sampled: negatives per batch for the sampled softmax, or None.
    """

    def __init__(
        self, bilm: BiLM, softmax: Softmax, num_sampled: int | None, output_dropout: float = 0.0,
    ):
        super().__init__()
        self.bilm = bilm
        self.softmax = softmax
        self.output_dropout = nn.Dropout(output_dropout)
        self.sampler = None if num_sampled is None else LogUniformSampler(softmax.vocab_size, num_sampled)

    def encode_words(self, word_char_ids: torch.Tensor) -> torch.Tensor:
        """(U, W) +1-shifted char ids of distinct words -> (U, P) token vectors (the char CNN runs once per word)."""
        return self.bilm.token_encoder.encode_tokens(word_char_ids)

    def direction_hidden(
        self, direction: int, inputs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Top-layer outputs of one direction (0 forward, 1 backward): (B, T, P) -> (B, T, P), final (h, c)."""
        stack = self.bilm.forward_lstm if direction == 0 else self.bilm.backward_lstm
        layers, final = stack(inputs, mask, state)
        return layers[-1], final

    def forward(
        self,
        word_char_ids: torch.Tensor,
        forward_index: torch.Tensor,
        backward_index: torch.Tensor,
        forward_targets: torch.Tensor,
        backward_targets: torch.Tensor,
        state: BiLMState,
        samples: Sequence[tuple[torch.Tensor, int]] | None = None,
    ) -> LMOutput:
        """One truncated-BPTT window of both directions.

        Args:
            word_char_ids: (U, W); forward_index, backward_index: (B, T) rows of it at each position.
            forward_targets, backward_targets: (B, T) vocabulary ids.
            state: (h (2, L, B, P), c (2, L, B, C)) carried from the previous window.
            samples: when training with the sampled softmax, the negatives (ids (S,), number of draws) of each
                direction; like bilm-tf, each direction's loss draws its own S negatives per batch.
        """
        words = self.encode_words(word_char_ids)  # (U, P)
        index = torch.stack([forward_index, backward_index]).transpose(1, 2)  # (2, T, B)
        stacks = (self.bilm.forward_lstm, self.bilm.backward_lstm)
        inputs = nn.functional.embedding(index, words)  # (2, T, B, P)
        tops, final = run_stacks_in_lockstep(stacks, inputs, state)  # (2, T, B, P)
        hiddens = []
        for direction in range(2):
            top = self.output_dropout(tops[direction].transpose(0, 1))  # (B, T, P)
            hiddens.append(top.reshape(-1, top.shape[-1]))  # (B*T, P)
        targets = [forward_targets.reshape(-1), backward_targets.reshape(-1)]
        loss, losses = head_losses(self.softmax, self.sampler, hiddens, targets, samples)
        return LMOutput(loss, losses[0], losses[1], final)
