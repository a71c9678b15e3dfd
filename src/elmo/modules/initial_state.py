"""Where each sentence's LSTM state starts at inference: the three modes of ``initial_state``.

* ``zero``: every sentence starts from zeros (the default): its vectors depend on nothing else.
* ``carry``: the original's stateful inference (:class:`~elmo.modules.bilm.StatefulBiLM`): each row starts where
  the same row of the previous batch ended, so a sentence's vectors depend on what came before it.
* ``warm``: every sentence starts from one fixed state, the state the ``carry`` mode holds after reading a short
  neutral text (:func:`stream_state`; the text ships with the package, the state can be stored with the model:
  ``elmo.formats.warm_state``). Deterministic like ``zero``, and closer to what a model trained with carried
  states saw in training: a non-zero state that has just read ordinary text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from elmo.modules.bilm import BiLM, BiLMOutput, BiLMState
from elmo.modules.lstm import WordTable


@torch.no_grad()
def stream_state(bilm: BiLM, sentences: Sequence[Sequence[str]], encode_words: Callable[[list[str]], torch.Tensor],
                 boundary_tokens: tuple[str, str]) -> BiLMState:
    """The state after reading ``sentences`` one after another from zeros, ``<S> sentence </S>`` each, one row: what
    the original's stateful inference holds after embedding them in order with batch size 1.

    ``encode_words`` maps distinct words to their token-layer vectors (U, P). Returns h (2, L, 1, P), c (2, L, 1, C).
    """
    bos, eos = boundary_tokens
    state: BiLMState | None = None
    for sentence in sentences:
        row = [bos, *sentence, eos]
        words = list(dict.fromkeys(row))
        vectors = encode_words(words)  # (U, P)
        tokens = vectors[torch.tensor([words.index(w) for w in row], device=vectors.device)].unsqueeze(0)  # (1, T, P)
        mask = torch.ones(1, len(row), dtype=torch.bool, device=vectors.device)  # (1, T)
        state = bilm.contextualize(tokens, mask, state).state
    if state is None:
        raise ValueError("stream_state: no sentences")
    return state


def check_state(bilm: BiLM, state: BiLMState, source: str) -> BiLMState:
    """``state`` if it is one row's finite float state of ``bilm``'s shape, h (2, L, 1, P) and c (2, L, 1, C);
    ValueError naming ``source`` otherwise."""
    zero_h, zero_c = bilm.zero_state(1)
    for name, value, want in (("h", state[0], zero_h), ("c", state[1], zero_c)):
        if tuple(value.shape) != tuple(want.shape):
            raise ValueError(f"{source}: '{name}' has shape {tuple(value.shape)}, this model's state is "
                             f"{tuple(want.shape)}")
        if not value.is_floating_point() or not torch.isfinite(value).all():
            raise ValueError(f"{source}: '{name}' must hold finite floats")
    return state


class WarmStartBiLM(nn.Module):
    """A :class:`BiLM` whose every row starts from one fixed state (``initial_state="warm"``): no state is carried,
    so a sentence's vectors do not depend on its batch, as with zeros.

    Args:
        bilm: the model; state: one row's state, h (2, L, 1, P) and c (2, L, 1, C), moved to the model's device and
            dtype at each call.
    """

    def __init__(self, bilm: BiLM, state: BiLMState) -> None:
        super().__init__()
        self.bilm = bilm
        self.state = check_state(bilm, state, "WarmStartBiLM")

    def forward(self, ids: torch.Tensor) -> BiLMOutput:
        """ids (B, T, W) or (B, T), as :meth:`BiLM.forward`."""
        return self.bilm(ids, self.rows(ids.shape[0]))

    def contextualize(self, tokens: torch.Tensor, mask: torch.Tensor, words: WordTable | None = None) -> BiLMOutput:
        """Token vectors (B, T, P) and mask (B, T) (and ``words``), as :meth:`BiLM.contextualize`."""
        return self.bilm.contextualize(tokens, mask, self.rows(tokens.shape[0]), words)

    def rows(self, batch: int) -> BiLMState:
        """The state every row of a batch of ``batch`` rows starts from."""
        weight = self.bilm.forward_lstm.layers[0].state_linearity.weight
        h, c = (x.to(weight.device, weight.dtype).expand(-1, -1, batch, -1).contiguous() for x in self.state)
        return h, c
