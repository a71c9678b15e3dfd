"""The bidirectional language model: a shared token encoder under a forward and a backward LSTM stack.

Mirrors bilm-tf ``BidirectionalLanguageModelGraph``: the backward stack reads each sentence reversed (only its real
tokens; padding stays at the end), and its outputs are reversed back, so position t of every layer describes
token t. The ELMo layers are::

    layer 0:      [x_t; x_t]                    token encoder output, duplicated to width 2P
    layer l>=1:   [h_t^fwd(l); h_t^bwd(l)]      LSTM layer l of each direction (with the residual, if any)

Stateless by default: the caller passes the state (or None for zeros) and gets the final state back.
:class:`StatefulBiLM` keeps it between calls the way the original inference code does.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from elmo.config import MAX_VOCABULARY, BiLMConfig, check_integer
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.lstm import LstmCellWithProjection, LstmStack, WordTable
from elmo.modules.manylangs_encoder import ManyLangsTokenEncoder
from elmo.modules.scalar_mix import TrainedMix
from elmo.modules.sequence import mask_from_ids, reverse_padded
from elmo.modules.token_embedding import TokenEmbedding
from elmo.runtime.side_by_side import side_by_side

BiLMState = tuple[torch.Tensor, torch.Tensor]
"""(h (2, L, B, P), c (2, L, B, C)); index 0 of the first axis is the forward direction."""


@dataclass
class BiLMOutput:
    layers: list[torch.Tensor]
    """L + 1 tensors (B, T, 2P), token layer first; zero at padded positions."""
    mask: torch.Tensor
    """(B, T) bool."""
    state: BiLMState
    """Final LSTM states, to start the next batch from (stateful use)."""


class PretrainedFolders(Protocol):
    """How a biLM goes into and comes out of a model folder. ``modules/`` knows no file format (nor imports
    ``formats/``), so :mod:`elmo.formats.hf_folders` registers the one implementation when it is imported:
    ``from elmo import BiLM`` and ``from elmo import load_bilm`` import it."""

    def save(self, bilm: BiLM, directory: str | os.PathLike, force: bool) -> Path: ...

    def load(self, model: str | os.PathLike) -> BiLM: ...


_pretrained_folders: PretrainedFolders | None = None


def register_pretrained_folders(folders: PretrainedFolders) -> None:
    """Install what :meth:`BiLM.save_pretrained` and :meth:`BiLM.from_pretrained` call (formats/ does, once)."""
    global _pretrained_folders
    _pretrained_folders = folders


def _folders() -> PretrainedFolders:
    if _pretrained_folders is None:  # BiLM imported from elmo.modules, and no model loaded yet
        raise RuntimeError("BiLM.save_pretrained/from_pretrained need the model formats: import BiLM as "
                           "`from elmo import BiLM` (or import elmo.formats.hf_folders first)")
    return _pretrained_folders


class BiLM(nn.Module):
    """Token encoder + forward and backward :class:`LstmStack`.

    Args:
        token_encoder: a module mapping ids (B, T, W) or (B, T) to (B, T, P), with ``output_dim``.
        forward_lstm, backward_lstm: stacks of the same shape.
        config: the architecture these were built from (kept so the model can be saved with its options).
    """

    def __init__(
        self,
        token_encoder: nn.Module,
        forward_lstm: LstmStack,
        backward_lstm: LstmStack,
        config: BiLMConfig | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = token_encoder
        self.forward_lstm = forward_lstm
        self.backward_lstm = backward_lstm
        self.default_mix: TrainedMix | None = None
        """The mix the model file ships with (a TF-Hub module's), where :class:`~elmo.modules.elmo.Elmo` starts."""
        self.warm_state: BiLMState | None = None
        """The start of ``initial_state="warm"`` read with the model (its ``warm_state.safetensors``), if any."""

    @property
    def num_layers(self) -> int:
        """L + 1."""
        return len(self.forward_lstm.layers) + 1

    @property
    def output_dim(self) -> int:
        """2P."""
        return 2 * self.token_encoder.output_dim

    def forward(self, ids: torch.Tensor, state: BiLMState | None = None) -> BiLMOutput:
        """Run both directions over a batch.

        Args:
            ids: (B, T, W) character ids or (B, T) token ids, +1 shifted, padding (0) at the end of rows.
                Sentence boundaries are whatever the ids contain (see ``sequence.add_sentence_boundaries``).
            state: initial state; None starts every row from zeros.
        """
        mask = mask_from_ids(ids)  # (B, T)
        return self.contextualize(self.token_encoder(ids), mask, state)

    def contextualize(self, tokens: torch.Tensor, mask: torch.Tensor, state: BiLMState | None = None,
                      words: WordTable | None = None) -> BiLMOutput:
        """Run both LSTM stacks over token vectors computed elsewhere (e.g. looked up in a cache).

        Args:
            tokens: (B, T, P) token-layer vectors; mask: (B, T) bool, padding at the end of rows.
            words: the same tokens as the batch's distinct words (``vectors[index]`` = ``tokens`` at real
                positions), where the caller has them: the first LSTM layer's input half is then computed once per
                word in inference (:class:`~elmo.modules.lstm.WordTable`); the same outputs.
        """
        lengths = mask.sum(dim=1)  # (B,)
        tokens = tokens * mask.unsqueeze(-1).to(tokens.dtype)
        fwd_state = bwd_state = None
        if state is not None:
            fwd_state = (state[0][0], state[1][0])
            bwd_state = (state[0][1], state[1][1])
        bwd_words = None if words is None else WordTable(words.vectors, reverse_padded(words.index, lengths))
        (fwd_layers, fwd_final), (bwd_layers, bwd_final) = side_by_side(  # on two cores when inference allows
            lambda: self.forward_lstm(tokens, mask, fwd_state, words),
            lambda: self.backward_lstm(reverse_padded(tokens, lengths), mask, bwd_state, bwd_words),
        )
        bwd_layers = [reverse_padded(x, lengths) for x in bwd_layers]
        float_mask = mask.unsqueeze(-1).to(tokens.dtype)  # (B, T, 1)
        layers = [torch.cat([tokens, tokens], dim=-1)]
        layers += [torch.cat([f, b], dim=-1) * float_mask for f, b in zip(fwd_layers, bwd_layers)]
        new_state = (torch.stack([fwd_final[0], bwd_final[0]]), torch.stack([fwd_final[1], bwd_final[1]]))
        return BiLMOutput(layers=layers, mask=mask, state=new_state)

    def save_pretrained(self, directory: str | os.PathLike, force: bool = False) -> Path:
        """Write a Hugging Face-style folder (``config.json``, ``model.safetensors``, ``README.md``), the same
        ``elmo convert --to hf`` writes; every tensor keeps its dtype, so :meth:`from_pretrained` gives back the
        same bits. An existing non-empty ``directory`` is refused unless ``force``, which replaces it whole."""
        return _folders().save(self, directory, force)

    @classmethod
    def from_pretrained(cls, model: str | os.PathLike) -> BiLM:
        """Any model spelling ``--model`` takes: a folder in any format, a model archive, a shipped or a
        published name; on the CPU, in eval mode."""
        return _folders().load(model)

    def zero_state(self, batch_size: int) -> BiLMState:
        first = self.forward_lstm.layers[0]
        weight = first.state_linearity.weight
        n_layers = len(self.forward_lstm.layers)
        h = weight.new_zeros(2, n_layers, batch_size, first.output_dim)
        c = weight.new_zeros(2, n_layers, batch_size, first.cell_dim)
        return h, c


class StatefulBiLM(nn.Module):
    """A :class:`BiLM` that carries LSTM states from call to call, row by row, like the original inference code.

    bilm-tf keeps one state per row (up to the largest batch seen); a batch of B rows starts row i from the final
    state of row i in the last batch that had an i-th row, and rows beyond B keep their state. Padding rows and
    rows of a smaller batch therefore never disturb other rows. States are detached between calls.
    """

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm = bilm
        self._h: torch.Tensor | None = None  # (2, L, B_max, P)
        self._c: torch.Tensor | None = None  # (2, L, B_max, C)

    def reset(self) -> None:
        """Forget all states (every row starts from zeros again)."""
        self._h = self._c = None

    def forward(self, ids: torch.Tensor) -> BiLMOutput:
        """ids (B, T, W) or (B, T), as :meth:`BiLM.forward`."""
        return self._carry(ids.shape[0], lambda state: self.bilm(ids, state))

    def contextualize(self, tokens: torch.Tensor, mask: torch.Tensor, words: WordTable | None = None) -> BiLMOutput:
        """Token vectors (B, T, P) and mask (B, T) (and ``words``), as :meth:`BiLM.contextualize`."""
        return self._carry(tokens.shape[0], lambda state: self.bilm.contextualize(tokens, mask, state, words))

    def _carry(self, batch: int, run) -> BiLMOutput:
        out = run(self.rows(batch))
        self.keep(out.state)
        return out

    def rows(self, batch: int) -> BiLMState:
        """The state the rows of a batch of ``batch`` rows start from (for a caller that runs the biLM itself, as
        :func:`~elmo.modules.long_sequences.contextualize_in_windows` does; then :meth:`keep` its final state)."""
        self._grow(batch)
        assert self._h is not None and self._c is not None
        return self._h[:, :, :batch], self._c[:, :, :batch]

    def keep(self, state: BiLMState) -> None:
        """Carry a batch's final state (h (2, L, B, P), c (2, L, B, C)); rows beyond B keep theirs."""
        assert self._h is not None and self._c is not None
        h, c = state
        batch = h.shape[2]
        self._h = torch.cat([h.detach(), self._h[:, :, batch:]], dim=2)
        self._c = torch.cat([c.detach(), self._c[:, :, batch:]], dim=2)

    def _grow(self, batch: int) -> None:
        have = 0 if self._h is None else self._h.shape[2]
        if batch <= have:
            return
        h, c = self.bilm.zero_state(batch - have)
        self._h = h if self._h is None else torch.cat([self._h, h], dim=2)
        self._c = c if self._c is None else torch.cat([self._c, c], dim=2)


class _NoInitOnMeta(TorchFunctionMode):
    """Skips ``torch.nn.init`` on meta tensors: there are no values to set, and torch's meta kernel of ``normal_``
    (an embedding's init) is a Python decomposition whose first use imports about 800 modules (75 MB, seconds)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            tensor = args[0] if args else kwargs.get("tensor")
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def build_bilm(
    config: BiLMConfig,
    token_vocab_size: int | None = None,
    dropout: float = 0.0,
    weight_dropout: float = 0.0,
    device: str | torch.device | None = None,
) -> BiLM:
    """Assemble an (untrained) biLM; with ``device="meta"`` only its shapes (no memory, no initialisation), which a
    reader then fills (:func:`elmo.formats.checked_reads.fill_by_module`) after checking the file against them.

    Args:
        config: architecture (checked when it was made: every size within the limits of :mod:`elmo.config`).
        token_vocab_size: build a token-input biLM (a table of ``token_vocab_size`` token vectors) instead of
            the char CNN; required when ``config.char_cnn`` is None.
        dropout: dropout on every LSTM layer input, active in training mode only (the original trainer's 0.1).
        weight_dropout: DropConnect on each LSTM layer's recurrent matrix, training mode only (not in the original).
        device: where the parameters are made (the default device when None).
    """
    meta = device is not None and torch.device(device).type == "meta"
    with torch.device(device) if device is not None else nullcontext(), _NoInitOnMeta() if meta else nullcontext():
        return _build_bilm(config, token_vocab_size, dropout, weight_dropout)


def _build_bilm(config: BiLMConfig, token_vocab_size: int | None, dropout: float, weight_dropout: float) -> BiLM:
    lstm = config.lstm
    if token_vocab_size is not None:
        token_vocab_size = check_integer(token_vocab_size, "token_vocab_size", 1, MAX_VOCABULARY)
        encoder = TokenEmbedding(token_vocab_size, lstm.projection_dim)
    elif config.manylangs is not None:
        encoder = ManyLangsTokenEncoder(config.manylangs, lstm.projection_dim)
    elif config.char_cnn is not None:
        encoder = CharCNNEncoder(config.char_cnn, lstm.projection_dim)
    else:
        raise ValueError("build_bilm: a config without char_cnn needs token_vocab_size")

    def stack() -> LstmStack:
        cells = [
            LstmCellWithProjection(
                input_dim=lstm.projection_dim,
                cell_dim=lstm.dim,
                projection_dim=lstm.projection_dim,
                cell_clip=lstm.cell_clip,
                proj_clip=lstm.proj_clip if lstm.has_projection else None,
                forget_bias=config.forget_bias,
                weight_dropout=weight_dropout,
            )
            for _ in range(lstm.n_layers)
        ]
        return LstmStack(cells, residual=lstm.use_skip_connections, dropout=dropout)

    return BiLM(encoder, stack(), stack(), config=config)
