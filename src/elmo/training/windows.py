"""Packing sentences into B independent row streams for truncated BPTT (bilm-tf ``_get_batch``).

Every row is its own stream of sentences wrapped in ``<S> ... </S>``; each batch takes the next ``T`` input tokens
of every row, and a sentence that does not fit continues in the same row of the next batch::

    row 0:  <S> the cat sat . | </S> is never an input; the next sentence starts: <S> a dog ...
    inputs   <S>  the  cat  sat  .   <S>  a    dog        (T = 8)
    targets  the  cat  sat  .   </S> a    dog  barks

The backward LM reads the same sentences reversed (``</S> w_n ... w_1 <S>``), so its rows are packed identically
and the two directions share one :class:`PackerState`. Rows are filled in order, row 0 first, each pulling
sentences from one shared :class:`~elmo.training.corpus.SentenceStream`, exactly like the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids
from elmo.text.vocab import Vocabulary
from elmo.training.corpus import SentencePosition, SentenceStream


@dataclass
class PackerState:
    """Everything needed to continue packing exactly: the stream position and each row's current sentence."""

    position: SentencePosition = field(default_factory=SentencePosition)
    rows: list[tuple[list[str], int]] = field(default_factory=list)
    """Row b's current sentence (with ``<S>``/``</S>``) and the offset of its next input token."""

    def to_dict(self) -> dict:
        return {"position": self.position.to_dict(), "rows": [[list(t), o] for t, o in self.rows]}

    @classmethod
    def from_dict(cls, data: dict) -> PackerState:
        return cls(SentencePosition.from_dict(data["position"]), [(list(t), int(o)) for t, o in data["rows"]])


@dataclass
class LMBatch:
    """One training batch for both directions.

    The char CNN runs once per distinct word: ``words`` holds their char ids and the index tensors say which word
    sits at each position.
    """

    word_char_ids: torch.Tensor  # (U, W) +1-shifted char ids of the distinct input words
    forward_index: torch.Tensor  # (B, T) position -> row of word_char_ids
    backward_index: torch.Tensor  # (B, T)
    forward_targets: torch.Tensor  # (B, T) vocabulary ids (OOV -> <UNK>)
    backward_targets: torch.Tensor  # (B, T)

    @property
    def num_tokens(self) -> int:
        return self.forward_targets.numel()

    def rows(self, start: int, stop: int) -> LMBatch:
        """Rows [start, stop) (a rank's or a micro-batch's share); the word table is kept whole."""
        return LMBatch(
            self.word_char_ids,
            self.forward_index[start:stop],
            self.backward_index[start:stop],
            self.forward_targets[start:stop],
            self.backward_targets[start:stop],
        )


Window = list[tuple[str, str]]
"""T (input token, target token) pairs of one row."""


class RowPacker:
    """Turns a sentence stream into (B, T) windows of B independent rows, for both directions.

    Args:
        stream: where sentences come from (shared by all rows).
        batch_size: B, the number of rows (all ranks and micro-batches together).
        unroll_steps: T, the truncated-BPTT window.
        state: a saved :class:`PackerState` to resume from.
    """

    def __init__(
        self, stream: SentenceStream, batch_size: int, unroll_steps: int, state: PackerState | None = None
    ) -> None:
        self.stream = stream
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.rows: list[tuple[list[str], int]] = [([], 0) for _ in range(batch_size)]
        if state is not None:
            if len(state.rows) != batch_size:
                raise ValueError(f"the saved data position has {len(state.rows)} rows, this run uses {batch_size}")
            stream.position = SentencePosition(**state.position.to_dict())
            self.rows = [(list(t), o) for t, o in state.rows]

    def state(self) -> PackerState:
        return PackerState(SentencePosition(**self.stream.position.to_dict()), [(list(t), o) for t, o in self.rows])

    def next_windows(self) -> tuple[list[Window], list[Window]] | None:
        """Forward and backward windows of every row, or None when a single pass runs out of sentences."""
        forward, backward = [], []
        for b in range(self.batch_size):
            fwd: Window = []
            bwd: Window = []
            while len(fwd) < self.unroll_steps:
                tokens, offset = self.rows[b]
                if len(tokens) - offset <= 1:  # only </S> left: it is never an input
                    sentence = self.stream.next_sentence()
                    if sentence is None:
                        return None  # the incomplete last batch is dropped, as in the original
                    tokens, offset = [BOS_TOKEN, *sentence, EOS_TOKEN], 0
                take = min(len(tokens) - 1 - offset, self.unroll_steps - len(fwd))
                rev = tokens[::-1]
                fwd.extend(zip(tokens[offset : offset + take], tokens[offset + 1 : offset + take + 1]))
                bwd.extend(zip(rev[offset : offset + take], rev[offset + 1 : offset + take + 1]))
                self.rows[b] = (tokens, offset + take)
            forward.append(fwd)
            backward.append(bwd)
        return forward, backward


def windows_to_batch(
    forward: Sequence[Window], backward: Sequence[Window], vocab: Vocabulary, max_characters_per_token: int
) -> LMBatch:
    """Tensors for a batch: (input, target) pairs of both directions -> :class:`LMBatch`."""
    words: dict[str, int] = {}

    def encode(windows: Sequence[Window]) -> tuple[torch.Tensor, torch.Tensor]:
        index = np.array([[words.setdefault(x, len(words)) for x, _ in w] for w in windows], dtype=np.int64)
        targets = np.array([[vocab.index(y) for _, y in w] for w in windows], dtype=np.int64)
        return torch.from_numpy(index), torch.from_numpy(targets)

    forward_index, forward_targets = encode(forward)
    backward_index, backward_targets = encode(backward)
    char_ids = shifted_char_ids(words, max_characters_per_token)  # (U, W)
    return LMBatch(torch.from_numpy(char_ids), forward_index, backward_index, forward_targets, backward_targets)
