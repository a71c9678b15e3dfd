"""Which vectors an output keeps: a layer (all, one, their average or a scalar mix), pooled over a sentence's tokens
or not, in a stored dtype. One :class:`VectorSelection` serves ``elmo embed``, ``elmo serve``'s requests, the Python
``Embedder`` and every integration (Flair, spaCy, Ray Data, Spark), so the same words give the same numbers
everywhere.

Shapes, for one sentence of n tokens (boundaries already removed) with L LSTM layers of 2P outputs:

    layer all              (L + 1, n, 2P)   pooled: (L + 1, 2P)
    layer top / average /  (n, 2P)          pooled: (2P,)
    mix / an index

``all`` means every layer, with its own axis, wherever an output can hold one (:meth:`VectorSelection.apply`). A tool
that takes one flat vector per token (a Flair token embedding, spaCy's ``doc.tensor``) gets
:meth:`VectorSelection.flat`: the same vectors, with the layers of ``all`` joined in layer order, (n, (L + 1) * 2P)
(pooled: ((L + 1) * 2P,)).

``mix`` is ELMo's scalar mix, gamma * sum_j softmax(w)_j h_j, with the weights ``w`` given before the softmax (the
numbers a trained mix stores: a task model's ``scalar_parameters``, a TF-Hub module's ``aggregation/weights``), so
``0,0,0`` is the average of three layers. ``first-last`` joins the forward half of the last token with the backward
half of the first: the states of the two LMs after each has read the whole sentence.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from elmo.settings import Setting, SettingError, check_settings, setting

LAYERS = ("all", "top", "average", "mix")
POOLS = ("none", "mean", "max", "first-last")
DTYPES = ("float32", "float16")


def layer_choice(value: object) -> str:
    """``all``, ``top``, ``average``, ``mix`` or a layer index (0 = the token layer), as a string."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and (value in LAYERS or (value.isdigit() and value == str(int(value)))):
        return value
    raise ValueError(f"must be one of {', '.join(LAYERS)} or a layer index 0, 1, ...; got {value!r}")


def mix_weights_of(value: object) -> tuple[float, ...] | None:
    """``"w0,w1,..."`` or a sequence of numbers -> a tuple of finite floats."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    try:
        weights = tuple(float(w) for w in items)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"must be numbers separated by commas (w0,w1,...), got {value!r}") from None
    if not weights or not all(math.isfinite(w) for w in weights):
        raise ValueError(f"must be one or more finite numbers (w0,w1,...), got {value!r}")
    return weights


LAYER = Setting("all", "which layer: all, top, average (of all layers), mix (the scalar mix of --mix-weights and "
                "--mix-gamma) or an index (0 = the token layer)", check=layer_choice, metavar="LAYER")
"""Shared by :class:`VectorSelection` and the spaCy component, whose ``doc.tensor`` defaults to ``average``."""

TOKEN_FIELDS = ("layer", "mix_weights", "mix_gamma")
"""The selection settings of one flat vector per token (:meth:`VectorSelection.flat`: a Flair token embedding, spaCy's
``doc.tensor``): no pooling, float32."""


@dataclass(frozen=True)
class VectorSelection:
    """What an output keeps of the (L + 1, n, 2P) layers of each sentence (shapes: the module's docstring)."""

    layer: str = LAYER.field()
    pool: str = setting("none", "pool each sentence's tokens into one vector: none (token vectors), mean, max or "
                        "first-last (forward LM at the last token + backward LM at the first)", choices=POOLS)
    """Sentence boundaries are never pooled; an empty sentence pools to zeros."""
    mix_weights: tuple[float, ...] | None = setting(
        None, "with --layer mix: one weight per layer (L + 1), before the softmax, e.g. 0,0,0 = the average",
        check=mix_weights_of, metavar="W0,W1,...")
    mix_gamma: float = setting(1.0, "with --layer mix: the scale gamma")
    dtype: str = setting("float32", "dtype of the output vectors (float16 halves them; the computation is the same)",
                         choices=DTYPES)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.layer == "mix" and self.mix_weights is None:
            raise SettingError("mix_weights", "must be given with layer mix: one weight per layer, before the softmax")
        if self.layer != "mix" and self.mix_weights is not None:
            raise SettingError("mix_weights", f"is for layer mix (got layer {self.layer})")
        if self.layer != "mix" and self.mix_gamma != 1.0:  # not silently ignored: the service refuses it too
            raise SettingError("mix_gamma", f"is for layer mix (got layer {self.layer})")

    @property
    def pooled(self) -> bool:
        return self.pool != "none"

    def check_model(self, num_layers: int) -> None:
        """Refuse a layer index or a number of mix weights the model cannot have, before any work."""
        if self.layer.isdigit() and int(self.layer) >= num_layers:
            raise SettingError("layer", f"{self.layer} is not a layer of the model: it has layers 0 to "
                               f"{num_layers - 1} (0 = the token layer)")
        if self.mix_weights is not None and len(self.mix_weights) != num_layers:
            raise SettingError("mix_weights", f"has {len(self.mix_weights)} weights; the model has {num_layers} "
                               "layers (the token layer and one per LSTM layer)")

    def shape(self, num_layers: int, dim: int) -> tuple[int, ...]:
        """The shape of one sentence's output without its token axis: (L + 1, 2P) or (2P,)."""
        return (num_layers, dim) if self.layer == "all" else (dim,)

    def width(self, num_layers: int, dim: int) -> int:
        """The length of one vector of :meth:`flat`: (L + 1) * 2P for layer ``all``, else 2P."""
        return math.prod(self.shape(num_layers, dim))

    def apply(self, layers: np.ndarray) -> np.ndarray:
        """(L + 1, n, 2P) float32 -> this selection, in :attr:`dtype`."""
        chosen = self._layer(layers)  # (L + 1, n, 2P) or (n, 2P)
        if self.pooled:
            chosen = self._pool(chosen)
        return chosen.astype(self.dtype, copy=False)

    def flat(self, layers: np.ndarray) -> np.ndarray:
        """(L + 1, n, 2P) float32 -> one vector per token, (n, D), C-contiguous: :meth:`apply`, with the layers of
        ``all`` joined in layer order (D = (L + 1) * 2P: a token's layer 0, then its layer 1, ...). Pooled: (D,)."""
        chosen = self.apply(layers)
        if self.layer == "all":
            chosen = np.moveaxis(chosen, 0, -2)  # (n, L + 1, 2P), pooled (L + 1, 2P)
            return np.ascontiguousarray(chosen).reshape(*chosen.shape[:-2], chosen.shape[-2] * chosen.shape[-1])
        return np.ascontiguousarray(chosen)

    def _layer(self, layers: np.ndarray) -> np.ndarray:
        if self.layer == "all":
            return layers
        if self.layer == "top":
            return layers[-1]
        if self.layer == "average":
            return layers.mean(axis=0)
        if self.layer == "mix":
            w = np.asarray(self.mix_weights, dtype=np.float64)
            w = np.exp(w - w.max())
            w = (w / w.sum()).astype(np.float32)  # softmax, in float32 as ScalarMix computes it
            return np.float32(self.mix_gamma) * np.tensordot(w, layers, axes=1)
        return layers[int(self.layer)]

    def _pool(self, x: np.ndarray) -> np.ndarray:
        """(..., n, 2P) -> (..., 2P) over the token axis."""
        n, dim = x.shape[-2], x.shape[-1]
        if n == 0:
            return np.zeros(x.shape[:-2] + (dim,), dtype=np.float32)
        if self.pool == "mean":
            return x.mean(axis=-2)
        if self.pool == "max":
            return x.max(axis=-2)
        half = dim // 2  # first-last: forward half of the last token, backward half of the first
        return np.concatenate([x[..., -1, :half], x[..., 0, half:]], axis=-1)

    def describe(self) -> dict[str, object]:
        """The selection as JSON-able settings (recorded in outputs and manifests)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


SELECTION_FIELDS = tuple(f.name for f in dataclasses.fields(VectorSelection))


def selection_of(selection: VectorSelection | None = None, **fields: object) -> VectorSelection:
    """A selection from keyword arguments (``pool="mean", layer="average"``) over ``selection`` or the defaults."""
    base = selection or VectorSelection()
    return dataclasses.replace(base, **fields) if fields else base
