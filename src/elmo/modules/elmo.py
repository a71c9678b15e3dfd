"""The ELMo layer: a (frozen) biLM and one or more independent scalar mixes of its layers.

Peters et al. (2018), section 3.2-3.3. Typical use in a task model, with ELMo at the input and the output::

    elmo = Elmo(load_bilm("model_dir"), num_output_representations=2)
    out = elmo(batch_to_ids(sentences))          # sentences without <S>/</S>: Elmo adds them
    x = torch.cat([word_vectors, out.representations[0]], -1)
    loss = task_loss + elmo.scalar_mix_penalty(0.001)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from elmo.modules.bilm import BiLM, BiLMState, StatefulBiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.initial_state import WarmStartBiLM
from elmo.modules.scalar_mix import ScalarMix
from elmo.modules.sequence import add_sentence_boundaries, mask_from_ids, remove_sentence_boundaries
from elmo.shared_settings import INITIAL_STATES
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids


@dataclass
class ElmoOutput:
    representations: list[torch.Tensor]
    """``num_output_representations`` tensors (B, T, 2P)."""
    mask: torch.Tensor
    """(B, T) bool."""


def checked_alignment(alignment: torch.Tensor, dim: int) -> torch.Tensor:
    """A (dim, dim) float alignment matrix W as float32 (applied as ``x @ W.T``); ValueError otherwise."""
    if alignment.dim() != 2 or tuple(alignment.shape) != (dim, dim) or not alignment.is_floating_point():
        raise ValueError(f"alignment must be a float ({dim}, {dim}) matrix, got {alignment.dtype} "
                         f"{tuple(alignment.shape)}")
    return alignment.detach().float()


class ElmoHead(nn.Module):
    """The trainable part of ELMo: independent scalar mixes of the biLM layers, each followed by dropout.

    :class:`Elmo` runs it on a live biLM's layers and :class:`~elmo.tasks.elmo_features.CachedElmo` on stored
    ones. Both are subclasses, so their mixes have the same parameter names (``scalar_mixes.{i}.*``) and a task
    checkpoint loads into either.

    Args:
        num_layers: L + 1, the biLM layers mixed.
        num_output_representations: number of independent scalar mixes (e.g. 2 for task input and output).
        scalar_mix_parameters: fixed pre-softmax weights, e.g. ``[-9e10, 1, -9e10]``; the mixes are then frozen.
        do_layer_norm: the original's masked-batch layer norm before mixing.
        dropout: applied to each representation (AllenNLP's default 0.5).
    """

    def __init__(
        self,
        num_layers: int,
        num_output_representations: int = 1,
        *,
        scalar_mix_parameters: Sequence[float] | None = None,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(
                num_layers,
                do_layer_norm=do_layer_norm,
                initial_weights=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
            )
            for _ in range(num_output_representations)
        )
        self.dropout = nn.Dropout(dropout)

    @property
    def num_output_representations(self) -> int:
        return len(self.scalar_mixes)

    def mix(self, layers: Sequence[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
        """L + 1 tensors (B, T, D) and mask (B, T) -> ``num_output_representations`` tensors (B, T, D)."""
        return [self.dropout(mix(layers, mask)) for mix in self.scalar_mixes]

    def scalar_mix_penalty(self, coefficient: float) -> torch.Tensor:
        """lambda * sum over mixes of ||w||^2 on the pre-softmax weights (paper section 3.3; bilm-tf ``l2_coef``)."""
        total = sum((mix.scalar_parameters**2).sum() for mix in self.scalar_mixes)
        return coefficient * torch.as_tensor(total)


class Elmo(ElmoHead):
    """ELMo representations for batches of +1-shifted ids without sentence boundaries (``batch_to_ids`` output).

    Args:
        bilm: the pretrained biLM.
        num_output_representations, dropout, do_layer_norm, scalar_mix_parameters: as :class:`ElmoHead`. Without
            ``scalar_mix_parameters``, a biLM loaded from a TF-Hub module starts each (trainable) mix from the
            module's own trained weights and scale (``bilm.default_mix``), not from a uniform average.
        requires_grad: fine-tune the biLM too (default: frozen, run under no_grad, kept in eval mode).
        keep_sentence_boundaries: keep the ``<S>``/``</S>`` positions in the output (T + 2 steps).
        initial_state: where each sentence's LSTM state starts (:mod:`elmo.modules.initial_state`): ``zero`` (the
            default: a sentence always gets the same vectors), ``carry`` (from batch to batch, row by row, like
            the original) or ``warm`` (one fixed state: ``warm_state``, else the one :func:`elmo.load_bilm` read
            from the model's directory).
        warm_state: one row's state (h, c) for ``initial_state="warm"``
            (:func:`elmo.formats.warm_state.model_warm_state` computes it).
        token_boundary_ids: for a token-input biLM, the (+1 shifted) ids of ``<S>`` and ``</S>``.
        alignment: a (2P, 2P) matrix W mapping each representation into a shared cross-lingual space,
            ``x @ W.T`` after the mix and its dropout, as the aligned multilingual ELMo code does (Schuster et al.
            2019; read a ``<lang>_best_mapping.pth`` with :func:`elmo.formats.alignment.read_alignment`). Its models
            were aligned on LSTM layer 1: pair it with ``scalar_mix_parameters=[-9e10, 1, -9e10]``.
    """

    def __init__(
        self,
        bilm: BiLM,
        num_output_representations: int = 1,
        dropout: float = 0.5,
        do_layer_norm: bool = False,
        requires_grad: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
        keep_sentence_boundaries: bool = False,
        initial_state: str = "zero",
        warm_state: BiLMState | None = None,
        token_boundary_ids: tuple[int, int] | None = None,
        alignment: torch.Tensor | None = None,
    ) -> None:
        if isinstance(bilm, (str, os.PathLike)):  # AllenNLP's Elmo(options_file, weight_file, n): one clear line
            raise TypeError(
                f"elmo.Elmo takes a loaded biLM, not the path {str(bilm)!r}: write "
                "elmo.Elmo(elmo.load_bilm(path), num_output_representations), or use AllenNLP's signature "
                "Elmo(options_file, weight_file, num_output_representations) through `from elmo.allennlp import Elmo`"
            )
        super().__init__(
            bilm.num_layers,
            num_output_representations,
            scalar_mix_parameters=scalar_mix_parameters,
            do_layer_norm=do_layer_norm,
            dropout=dropout,
        )
        trained = bilm.default_mix  # a TF-Hub module's own mix (formats/tensorflow/tf_hub.py): the start
        if scalar_mix_parameters is None and trained is not None:
            with torch.no_grad():
                for mix in self.scalar_mixes:
                    mix.scalar_parameters.copy_(torch.tensor(trained.weights))
                    mix.gamma.fill_(trained.gamma)
        self.bilm = bilm
        self.started_bilm = _started(bilm, initial_state, warm_state)
        self.requires_grad = requires_grad
        bilm.requires_grad_(requires_grad)
        if not requires_grad:
            bilm.eval()
        self.keep_sentence_boundaries = keep_sentence_boundaries
        if isinstance(bilm.token_encoder, CharCNNEncoder):
            width = bilm.token_encoder.config.max_characters_per_token
            bos, eos = torch.from_numpy(shifted_char_ids([BOS_TOKEN, EOS_TOKEN], width)).unbind()
        else:
            if token_boundary_ids is None:
                raise ValueError("Elmo: a token-input biLM needs token_boundary_ids=(id of <S>, id of </S>)")
            bos, eos = torch.tensor(token_boundary_ids[0]), torch.tensor(token_boundary_ids[1])
        self.register_buffer("_bos", bos, persistent=False)
        self.register_buffer("_eos", eos, persistent=False)
        if alignment is not None:
            alignment = checked_alignment(alignment, bilm.output_dim)
        # not in the state dict: a file given at construction, so task checkpoints load with or without it
        self.register_buffer("alignment", alignment, persistent=False)  # (2P, 2P) or None

    def train(self, mode: bool = True) -> Elmo:
        super().train(mode)
        if not self.requires_grad:
            self.bilm.eval()  # a frozen biLM never uses dropout
        return self

    def forward(self, ids: torch.Tensor) -> ElmoOutput:
        """ids (B, T, W) or (B, T), no sentence boundaries -> representations (B, T, 2P) and mask (B, T)."""
        with_boundaries = add_sentence_boundaries(ids, self._bos, self._eos)  # (B, T+2, ...)
        run = self.started_bilm if self.started_bilm is not None else self.bilm
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            bilm_out = run(with_boundaries)
        layers, mask = bilm_out.layers, bilm_out.mask
        if not self.keep_sentence_boundaries:
            stripped = [remove_sentence_boundaries(x, mask) for x in layers]
            layers, mask = [x for x, _ in stripped], stripped[0][1] if stripped else mask_from_ids(ids)
        representations = self.mix(layers, mask)  # each (B, T, 2P)
        if self.alignment is not None:
            representations = [nn.functional.linear(x, self.alignment.to(x.dtype)) for x in representations]  # x @ W.T
        return ElmoOutput(representations=representations, mask=mask)

    def reset_states(self) -> None:
        """``initial_state="carry"``: start every row from zeros again."""
        if isinstance(self.started_bilm, StatefulBiLM):
            self.started_bilm.reset()


def _started(bilm: BiLM, initial_state: str, warm_state: BiLMState | None) -> nn.Module | None:
    """The biLM that starts each row where ``initial_state`` says (None: from zeros, the biLM itself)."""
    if initial_state not in INITIAL_STATES:
        raise ValueError(f"initial_state must be one of {', '.join(INITIAL_STATES)}; got {initial_state!r}")
    if initial_state == "carry":
        return StatefulBiLM(bilm)
    if initial_state == "warm":
        state = warm_state if warm_state is not None else bilm.warm_state
        if state is None:
            raise ValueError("initial_state='warm' needs warm_state=(h, c): "
                             "elmo.formats.warm_state.model_warm_state(bilm) computes it")
        return WarmStartBiLM(bilm, state)
    return None
