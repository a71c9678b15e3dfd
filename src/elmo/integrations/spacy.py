"""ELMo as a spaCy pipeline component: ``nlp.add_pipe("elmo", config={"model": "demo"})``, no ``import elmo``.

spaCy finds the factory through the ``spacy_factories`` entry point (pyproject.toml) and imports this module
whenever it builds any ``Language``, even one without ELMo, so this module imports only spaCy, numpy and the
package's torch-free settings: torch and the weights load when the component first embeds a document (or in
``from_disk``, when ``spacy.load`` restores a saved pipeline).

What each document gets (docs/integrations.md, "spaCy"):

- ``doc.tensor``: (n_tokens, dim) float32, one row per spaCy token, from :class:`~elmo.embedding.embedder.Embedder`
  at fp32 and :meth:`VectorSelection.flat <elmo.embedding.selection.VectorSelection.flat>`, so the rows equal
  ``elmo embed --layer LAYER`` of the same tokens (``layer`` average by default, 2P; ``all`` joins the L + 1 layers
  in layer order: dim = (L + 1) * 2P).
- user hooks for ``.vector``, ``.has_vector``, ``.vector_norm`` and ``.similarity`` of the doc, its spans and
  tokens: ``doc.tensor`` alone is ignored when the vocab has static vectors, is replaced by a later tok2vec, and
  ``Doc.similarity`` warns (W007) on every call without a hook. The hooks read the vectors from
  ``doc.user_data[("elmo", "vectors")]`` (the same array as ``doc.tensor``), so a later component that replaces
  ``doc.tensor`` does not change them.
- Whitespace tokens (spaCy makes one for a double space or a newline) are not given to the biLM and get zero
  vectors: ``elmo embed`` splits lines on whitespace, so the model never saw such a token in training and the CLI
  never makes one; leaving them out keeps every word's vector the same however the text was spaced, and equal to
  the CLI's. Doc and span vectors average the other tokens.
"""

from __future__ import annotations

import dataclasses
import enum
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.selection import LAYER, TOKEN_FIELDS, VectorSelection
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.runtime.extras import require
from elmo.settings import check_settings, setting

spacy = require("spacy", "spacy", "the spaCy component")
from spacy.language import Language  # noqa: E402  (after the extra's one-line check)
from spacy.util import minibatch  # noqa: E402

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span, Token

    from elmo.embedding.embedder import Embedder
    from elmo.modules.bilm import BiLM

VECTORS = ("elmo", "vectors")
"""The ``doc.user_data`` key of the vectors the hooks read."""
WEIGHTS_DIR = "bilm"
"""The component's folder in a saved pipeline holds the biLM here, in the native format (config.json +
model.safetensors)."""
DOCS_PER_GROUP = 1000
"""``component.pipe`` without a batch size: docs gathered and sorted by length together (spaCy's own default)."""


@dataclass(frozen=True)
class ElmoComponentSettings:
    """What the component's config says beyond the vectors it keeps (:class:`VectorSelection`'s
    :data:`~elmo.embedding.selection.TOKEN_FIELDS`) and how the biLM runs (:data:`OPTION_FIELDS` of
    :class:`EmbedOptions`): those come from their own declarations."""

    model: str = setting(
        "demo", "the biLM, any spelling `elmo embed --model` takes: a model directory or archive, a shipped model "
        "(demo, corpus) or a published model's name (`elmo models`); a saved pipeline keeps the weights itself")
    layer: str = LAYER.field("average")
    """What ``doc.tensor`` holds per token; by default the mean of the L + 1 layers (2P), what ``.vector`` and
    ``.similarity`` compare, where ``elmo embed`` keeps every layer."""

    def __post_init__(self) -> None:
        check_settings(self)


OPTION_FIELDS = ("batch_size", "precision")
"""The :class:`EmbedOptions` settings the component's config takes."""


def _default(cls: type, name: str) -> Any:
    """A field's declared default, as a config file spells it (an enum by its value)."""
    default = {f.name: f.default for f in dataclasses.fields(cls)}[name]
    return default.value if isinstance(default, enum.Enum) else default


DEFAULT_CONFIG = {"model": _default(ElmoComponentSettings, "model"), "layer": _default(ElmoComponentSettings, "layer")}
DEFAULT_CONFIG |= {f: _default(VectorSelection, f) for f in TOKEN_FIELDS if f != "layer"}
DEFAULT_CONFIG |= {f: _default(EmbedOptions, f) for f in OPTION_FIELDS}
"""The factory's config, from the settings' declarations."""


@Language.factory("elmo", default_config=DEFAULT_CONFIG)
def make_elmo_component(
    nlp: Language, name: str, model: str, layer: str | int, mix_weights: list[float] | None, mix_gamma: float,
    batch_size: int | None, precision: str,
) -> ElmoComponent:
    """The ``elmo`` factory. Settings are checked here; the weights load at the first document, or in
    ``from_disk`` (``spacy.load`` calls this factory with the saved config first, when the model the config names
    may be gone)."""
    try:
        settings = ElmoComponentSettings(model=model, layer=layer)
        selection = VectorSelection(layer=settings.layer, mix_weights=mix_weights, mix_gamma=mix_gamma)
        options = EmbedOptions(batch_size=batch_size, precision=precision)
    except ConfigError as e:
        raise ConfigError(f"spaCy component '{name}': {e}") from None
    return ElmoComponent(name, settings, selection, options)


class ElmoComponent:
    """Sets ``doc.tensor`` and the vector hooks of each doc from the biLM (the module's docstring says what).

    ``pipe`` embeds a group of docs together (sorted by length into token-budget batches, as ``elmo embed`` does),
    so ``nlp.pipe(texts, batch_size=...)`` is the fast way; a doc's vectors do not depend on its group.
    """

    def __init__(self, name: str, settings: ElmoComponentSettings, selection: VectorSelection,
                 options: EmbedOptions) -> None:
        self.name = name
        self.settings = settings
        self.selection = selection
        self.options = options
        self._bilm: BiLM | None = None
        self._embedder: Embedder | None = None
        self._model_record = settings.model  # what the vectors' provenance names: ModelRef.record once loaded

    # ------------------------------------------------------------------ the model, loaded on first use

    @property
    def bilm(self) -> BiLM:
        """The biLM: from the saved pipeline (``from_disk``) or, the first time it is needed, from ``model``."""
        if self._bilm is None:
            self._bilm = self._load_model()
        return self._bilm

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from elmo.embedding.embedder import Embedder

            bilm = self.bilm
            try:
                self.selection.check_model(bilm.num_layers)
            except ConfigError as e:
                raise ConfigError(f"spaCy component '{self.name}': {e}") from None
            self._embedder = Embedder(bilm, self.options, model_name=self._model_record)
        return self._embedder

    def _load_model(self) -> BiLM:
        from elmo.formats.model_ref import ModelRef

        try:
            ref = ModelRef.parse(self.settings.model)
            bilm = ref.load()
        except ElmoError as e:
            raise type(e)(f"spaCy component '{self.name}': {e}") from None
        self._model_record = ref.record
        return bilm

    def initialize(self, get_examples: Any = None, *, nlp: Language | None = None) -> None:
        """``nlp.initialize()``: load the weights now (a wrong ``model`` fails here rather than at the first doc).
        Nothing is trained: the biLM is frozen."""
        _ = self.embedder

    # ------------------------------------------------------------------ embedding docs

    def __call__(self, doc: Doc) -> Doc:
        self._set_vectors([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int | None = None) -> Iterator[Doc]:
        """Docs in groups of ``batch_size`` (``nlp.pipe``'s), each group embedded together, in input order."""
        for docs in minibatch(stream, size=batch_size or DOCS_PER_GROUP):
            self._set_vectors(docs)
            yield from docs

    def _set_vectors(self, docs: list[Doc]) -> None:
        embedder = self.embedder
        words = [[t.text for t in doc if not t.is_space] for doc in docs]
        layers = embedder.embed_sentences(words)  # each (L + 1, n_words, 2P)
        dim = self.selection.width(embedder.num_layers, embedder.output_dim)
        for doc, doc_words, doc_layers in zip(docs, words, layers, strict=True):
            vectors = self.selection.flat(doc_layers)  # (n_words, dim)
            if len(doc_words) != len(doc):  # whitespace tokens: zero rows
                tensor = np.zeros((len(doc), dim), dtype=np.float32)
                tensor[[t.i for t in doc if not t.is_space]] = vectors
                vectors = tensor
            doc.tensor = vectors  # (n_tokens, dim)
            doc.user_data[VECTORS] = vectors
            doc.user_hooks.update(DOC_HOOKS)
            doc.user_span_hooks.update(SPAN_HOOKS)
            doc.user_token_hooks.update(TOKEN_HOOKS)

    # ------------------------------------------------------------------ saving with the pipeline

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        """The biLM's weights go into the pipeline (``<path>/bilm``, the native format), so ``spacy.load`` needs
        neither the model's original path nor a download."""
        from elmo.formats.model_files import save_bilm

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_bilm(self.bilm, path / WEIGHTS_DIR, native=True, force=True)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> ElmoComponent:
        from elmo.formats.model_files import load_bilm

        weights = Path(path) / WEIGHTS_DIR
        if not weights.is_dir():
            raise WeightFileError(f"{weights}: no biLM weights in this saved pipeline (spaCy component "
                                  f"'{self.name}'); save it again with nlp.to_disk()")
        self._bilm, self._embedder = load_bilm(weights), None
        return self

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        """``nlp.to_bytes``: the files of the saved biLM folder, by name (msgpack, no pickle)."""
        import srsly

        with tempfile.TemporaryDirectory(prefix="elmo-spacy-") as tmp:
            self.to_disk(tmp)
            folder = Path(tmp) / WEIGHTS_DIR
            return srsly.msgpack_dumps({f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.is_file()})

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> ElmoComponent:
        import srsly

        try:
            files = srsly.msgpack_loads(data)
        except Exception:  # msgpack's errors for bytes that are not msgpack at all
            files = None
        if not isinstance(files, dict) or not all(isinstance(k, str) and Path(k).name == k for k in files):
            raise WeightFileError(f"spaCy component '{self.name}': these bytes are not a saved elmo component")
        with tempfile.TemporaryDirectory(prefix="elmo-spacy-") as tmp:
            (Path(tmp) / WEIGHTS_DIR).mkdir()
            for name, content in files.items():
                (Path(tmp) / WEIGHTS_DIR / name).write_bytes(content)
            return self.from_disk(tmp)


# ------------------------------------------------------------------ the hooks: vectors and similarity from ELMo


def _vectors(doc: Doc) -> np.ndarray:
    """The component's (n_tokens, dim) vectors; ``span.as_doc()`` keeps the hooks and ``doc.tensor`` only."""
    found = doc.user_data.get(VECTORS)
    return doc.tensor if found is None else found


def _mean(vectors: np.ndarray, tokens: Iterable[Token]) -> np.ndarray:
    """The mean of the rows of the tokens that are not whitespace; zeros when there are none."""
    rows = [i for i, t in enumerate(tokens) if not t.is_space]
    if not rows:
        return np.zeros(vectors.shape[1], dtype=np.float32)
    return vectors[rows].mean(axis=0)


def _doc_vector(doc: Doc) -> np.ndarray:
    return _mean(_vectors(doc), doc)


def _span_vector(span: Span) -> np.ndarray:
    return _mean(_vectors(span.doc)[span.start : span.end], span)


def _token_vector(token: Token) -> np.ndarray:
    return _vectors(token.doc)[token.i]


def _has_vector(obj: Doc | Span | Token) -> bool:
    return bool(np.any(obj.vector))


def _norm(obj: Doc | Token) -> float:
    return float(np.linalg.norm(obj.vector))


def _similarity(obj: Doc | Span | Token, other: Any) -> float:
    """Cosine of the two ``.vector``s; 0 where either is zero (spaCy's own convention)."""
    a, b = obj.vector, other.vector
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 0.0 if norms == 0.0 else float(np.dot(a, b) / norms)


DOC_HOOKS = {"vector": _doc_vector, "has_vector": _has_vector, "vector_norm": _norm, "similarity": _similarity}
SPAN_HOOKS = {"vector": _span_vector, "has_vector": _has_vector, "similarity": _similarity}
"""No ``vector_norm``: spaCy 3.8's Span calls the ``vector`` hook for it; without one it takes the norm of the
hooked ``.vector``."""
TOKEN_HOOKS = {"vector": _token_vector, "has_vector": _has_vector, "vector_norm": _norm, "similarity": _similarity}
