"""ELMo as a Flair token embedding: ``from elmo.integrations.flair import ELMoEmbeddings``
(``pip install "elmo-bilm[flair]"``).

Flair's own ``flair.embeddings.ELMoEmbeddings`` (its legacy module) needs allennlp 0.9 and cannot be saved with a
tagger; this class replaces it. Supported Flair: >=0.15,<0.16 (tested with 0.15.1).

Vectors come from :class:`~elmo.embedding.embedder.Embedder`, the code behind ``elmo embed``, in fp32 by default, and
the layers a token keeps from :class:`~elmo.embedding.selection.VectorSelection` (``layer``, ``mix_weights``,
``mix_gamma``; the CLI's ``--layer``), made one flat vector per token by :meth:`VectorSelection.flat
<elmo.embedding.selection.VectorSelection.flat>`: a token's vector is ``elmo embed --layer ... --precision fp32`` of
the same tokens (the sentence as Flair tokenised it), on every machine, with the layers of ``all`` joined in layer
order.

Saving. The biLM is a frozen submodule, so its weights go into the tagger file with the tagger's own (Flair's
``SequenceTagger.save`` writes one state dict, loaded back with strict keys), and ``to_params`` records the
architecture (``options.json``'s content): a saved tagger loads on any machine, after the model directory it was
trained from has moved or gone, as Flair's own Transformer and Flair embeddings do. The price is the biLM's fp32
weights in every saved tagger and checkpoint (about 370 MB for the original 5.5B model). ``to_params`` also holds a
reference to this class, so unpickling the tagger file imports this module, which registers the class with Flair:
``SequenceTagger.load(path)`` works in a new process whose code never imports ``elmo.integrations.flair``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.devices import checked_device
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.embedder import Embedder
from elmo.embedding.selection import TOKEN_FIELDS, VectorSelection
from elmo.errors import ConfigError, ElmoError
from elmo.formats.model_ref import ModelRef
from elmo.modules.bilm import BiLM, build_bilm
from elmo.modules.token_vectors import TOKEN_ENCODERS
from elmo.runtime.extras import require
from elmo.settings import SettingError, check_settings, setting, split_settings
from elmo.shared_settings import DEVICE
from elmo.text.manylangs_vocab import ManyLangsLexicon

flair = require("flair", "flair", "elmo.integrations.flair")
from flair.data import Sentence  # noqa: E402  (after the one-line message of a missing extra)
from flair.embeddings import TokenEmbeddings  # noqa: E402
from flair.embeddings.base import register_embeddings  # noqa: E402

log = logging.getLogger("elmo")

SUPPORTED_FLAIR = ((0, 15), (0, 16))
"""[lowest, first unsupported) minor versions of Flair; the tests pin 0.15.1."""


def _check_flair_version(version: str) -> None:
    """A warning, not an error: a newer Flair may well work, but its registry or save format may have changed."""
    try:
        minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        minor = None
    if minor is None or not SUPPORTED_FLAIR[0] <= minor < SUPPORTED_FLAIR[1]:
        log.warning("elmo.integrations.flair is tested with Flair >=0.15,<0.16; this is Flair %s", version)


_check_flair_version(flair.__version__)


@dataclass(frozen=True)
class FlairEmbeddingOptions:
    """The settings of :class:`ELMoEmbeddings` besides the vectors' (:class:`VectorSelection`) and the biLM run's
    (:class:`EmbedOptions`), checked before any model is loaded."""

    model: Any = setting(
        "demo", "the biLM: any spelling `elmo embed --model` takes (a shipped name such as demo or corpus, a "
        "published name, a model directory or archive), or a loaded BiLM",
    )
    device: str | None = DEVICE.field()
    """None: ``flair.device`` at embedding time, where Flair keeps the tagger. Not saved with a tagger."""

    def __post_init__(self) -> None:
        check_settings(self, prefix="ELMoEmbeddings.")


@register_embeddings
class ELMoEmbeddings(TokenEmbeddings):
    """ELMo token vectors for Flair: ``ELMoEmbeddings(model="demo", layer="all")``.

    ``settings``: the fields :data:`~elmo.embedding.selection.TOKEN_FIELDS` of
    :class:`~elmo.embedding.selection.VectorSelection` (``layer``: all, the default, = the L + 1 layers joined in
    layer order, (L + 1) * 2P, as Flair's old ELMoEmbeddings; top, average, mix with ``mix_weights`` and
    ``mix_gamma``, or a layer index: 2P) and of :class:`~elmo.embedding.embed_options.EmbedOptions` (``precision``,
    ``batch_size``, ...), with their defaults and checks.

    Static (the biLM is frozen), so Flair computes a sentence's vectors once; every sentence Flair hands over in one
    call runs through one :meth:`Embedder.embed_sentences`, which sorts and batches them like ``elmo embed``.
    ``name`` defaults to ``elmo-<model>`` (``-<layer>`` added for a layer other than all) and is saved, since
    ``StackedEmbeddings`` renames its members and the tagger finds token vectors by that name.
    """

    def __init__(
        self, model: ModelRef | str | os.PathLike | BiLM = "demo", *, device: str | None = None,
        name: str | None = None, **settings: Any,
    ) -> None:
        self.options = FlairEmbeddingOptions(model, device)
        self.selection, self.embed_options = _token_settings(settings)
        self.settings = dict(settings)
        """As given: what a saved tagger records (and checks again when it is loaded)."""
        if isinstance(model, BiLM):
            bilm, self.model_reference = model, "a BiLM given in Python"
        else:
            ref = _model_ref(model)
            bilm, self.model_reference = ref.load(), ref.record
        if not isinstance(bilm.token_encoder, TOKEN_ENCODERS) or bilm.config is None:
            raise ConfigError(f"ELMoEmbeddings: {self.model_reference} is not a character-input biLM (a model read "
                              "with an embedding_file has no characters to embed Flair's tokens with)")
        super().__init__()
        try:
            self.selection.check_model(bilm.num_layers)
        except SettingError as e:
            raise ConfigError(f"ELMoEmbeddings: {e}") from None
        label = "elmo" if isinstance(model, BiLM) else ref.label
        layer = self.selection.layer
        self.name = name or f"elmo-{label}" + ("" if layer == "all" else f"-{layer}")
        self.static_embeddings = True
        self.bilm = bilm.requires_grad_(False).eval()
        self._length = self.selection.width(bilm.num_layers, bilm.output_dim)
        self._embedder: Embedder | None = None
        self._weights_loaded = True
        """False after :meth:`from_params` until a state dict (the tagger's) brings the weights."""
        self.register_load_state_dict_post_hook(ELMoEmbeddings._weights_arrived)

    @property
    def embedding_length(self) -> int:
        return self._length

    def train(self, mode: bool = True) -> ELMoEmbeddings:
        """The biLM stays in eval mode while Flair trains the tagger around it."""
        super().train(mode)
        self.bilm.eval()
        return self

    def _add_embeddings_internal(self, sentences: list[Sentence]) -> list[Sentence]:
        if not sentences:
            return sentences
        embedder = self._current_embedder()
        tokens = [[token.text for token in sentence.tokens] for sentence in sentences]
        flat = np.empty((sum(map(len, tokens)), self._length), dtype=np.float32)  # (all tokens, D)
        start = 0
        for layers in embedder.embed_sentences(tokens):  # (L + 1, n, 2P) each, in input order, a chunk at a time
            n = layers.shape[1]
            flat[start : start + n] = self.selection.flat(layers)  # (n, D)
            start += n
        rows = torch.from_numpy(flat).to(flair.device).unbind(0)  # one copy to the device; views, one per token
        i = 0
        for sentence in sentences:
            for token in sentence.tokens:
                token.set_embedding(self.name, rows[i])
                i += 1
        return sentences

    def _current_embedder(self) -> Embedder:
        """The embedder on the device Flair uses now; rebuilt when the tagger moved or loaded new weights (a bf16
        embedder runs a copy of the biLM, so it must not outlive a weight change)."""
        if not self._weights_loaded:
            raise ElmoError(f"ELMoEmbeddings {self.name!r} was rebuilt from saved parameters without its weights; "
                            "load it with the model that holds them (SequenceTagger.load does)")
        device = checked_device(self.options.device or flair.device)
        weights = next(self.bilm.parameters()).device
        embedder = self._embedder
        if embedder is None or not (_same_device(embedder.device, device) and _same_device(weights, device)):
            self._embedder = embedder = Embedder(self.bilm, self.embed_options, device=device,
                                                 model_name=self.model_reference)
        return embedder

    @staticmethod
    def _weights_arrived(module: ELMoEmbeddings, incompatible_keys: Any) -> None:
        module._weights_loaded = True
        module._embedder = None

    def to_params(self) -> dict[str, Any]:
        config = self.bilm.config
        assert config is not None
        lexicon = getattr(self.bilm.token_encoder, "lexicon", None)
        return {
            # unpickling this imports elmo.integrations.flair, which registers the class with Flair
            "loader": ELMoEmbeddings,
            "model": self.model_reference,
            "options": config.to_options(),
            "lexicon": None if lexicon is None else lexicon.to_json(),
            "settings": self.settings,
            "name": self.name,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ELMoEmbeddings:
        """The biLM's architecture from ``params``; its weights arrive with the state dict Flair loads next."""
        params = dict(params)
        params.pop("loader", None)
        source = "the saved Flair model's ELMoEmbeddings"
        bilm = build_bilm(BiLMConfig.from_options(params.pop("options"), source=source))
        if (lexicon := params.pop("lexicon", None)) is not None:
            bilm.token_encoder.lexicon = ManyLangsLexicon.from_json(lexicon, source)
        reference = params.pop("model")
        embeddings = cls(model=bilm, name=params.pop("name", None), **params.pop("settings", {}), **params)
        embeddings.model_reference = reference
        embeddings._weights_loaded = False
        return embeddings

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_embedder"] = None  # rebuilt on first use
        return state

    def extra_repr(self) -> str:
        return f"model={self.model_reference!r}, layer={self.selection.layer!r}, name={self.name!r}"

    def __str__(self) -> str:
        return self.name


def _model_ref(model: ModelRef | str | os.PathLike) -> ModelRef:
    """Any spelling ``elmo embed --model`` takes; one that names nothing (a model moved since the tagger was saved,
    an unknown name) is the one line that says so, before any download."""
    try:
        return ModelRef.parse(model)
    except ElmoError as e:
        raise type(e)(f"ELMoEmbeddings: {e}") from None


def _token_settings(settings: Mapping[str, Any]) -> tuple[VectorSelection, EmbedOptions]:
    """Keyword arguments -> the token's selection and the embedder's options, by their shared declarations."""
    try:
        selection, options = split_settings(settings, (VectorSelection, EmbedOptions), "ELMoEmbeddings")
        if untaken := sorted(set(selection) - set(TOKEN_FIELDS)):
            raise ConfigError(f"ELMoEmbeddings: {untaken[0]} is not a setting of a token embedding (one float32 "
                              f"vector per token; the settings of its vector: {', '.join(TOKEN_FIELDS)})")
        return VectorSelection(**selection), EmbedOptions(**options)
    except SettingError as e:
        raise ConfigError(f"ELMoEmbeddings: {e}") from None


def _same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:0`` are one device (a parameter reports the index, ``flair.device`` may not)."""
    return a.type == b.type and (a.index or 0) == (b.index or 0)
