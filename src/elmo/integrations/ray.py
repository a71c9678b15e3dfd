"""Ray Data: ELMo as a callable class for ``Dataset.map_batches``, so that a pipeline that already runs on Ray embeds
its text where it runs, with one model per actor (docs/integrations.md, "Ray Data").

    ds.map_batches(ElmoPredictor, fn_constructor_kwargs={"model": "demo", "pool": "mean", "layer": "average"},
                   compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1, batch_size=256)

Ray is imported when a predictor is made (in the actor, where it reads the actor's CPU allotment), never at
``import elmo.integrations.ray``: without the extra, making one is the one line ``pip install "elmo-bilm[ray]"``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from elmo.embedding.contract import embed_in_order
from elmo.embedding.embedder import Embedder
from elmo.embedding.table_rows import table_settings, text_of, tokens_of
from elmo.errors import ConfigError, InputFileError
from elmo.formats.model_ref import ModelRef
from elmo.runtime.extras import require, threads_from_ray_allotment
from elmo.settings import SettingError, check_settings, setting

OUTPUT_COLUMN = "embedding"


@dataclass(frozen=True)
class InputColumns:
    """Where a batch's sentences are: a column of token lists, else a column of text."""

    text_column: str | None = setting("text", "the column of whitespace-tokenised text (None: none)")
    tokens_column: str | None = setting(
        "tokens", "the column of token lists (a list of strings per row); taken before text_column when a batch has "
        "it (None: none)")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.text_column is None and self.tokens_column is None:
            raise ConfigError("ElmoPredictor: text_column and tokens_column are both None; name the column that "
                              "holds the sentences")


class ElmoPredictor:
    """Adds an ``embedding`` column to each batch: per row one pooled vector (``pool`` mean, max, first-last) or its
    token vectors (``pool="none"``: (n_tokens, 2P), or (L + 1, n_tokens, 2P) with ``layer="all"``); every other
    column is kept.

    ``model``: any model spelling (a shipped or published name, a directory, an archive), loaded once, when Ray
    starts the actor. ``settings``: the fields of :class:`~elmo.embedding.selection.VectorSelection` (``layer``,
    ``pool``, ``mix_weights``, ``mix_gamma``, ``dtype``), of :class:`~elmo.embedding.embed_options.EmbedOptions`
    (``precision``, ``batch_size``: sentences per model batch, ``max_batch_tokens``, ``initial_state``, ...) and of
    :class:`InputColumns`; ``device``: default CUDA when the actor has one, else CPU. Inside a Ray actor torch gets
    as many threads as the actor has CPUs (``num_cpus`` of ``map_batches``), so actors do not oversubscribe the
    cores they share.
    """

    def __init__(self, model: ModelRef | str = "demo", *, device: str | None = None, **settings: Any) -> None:
        try:
            self._load(model, device, settings)
        except SettingError as e:  # its constructor takes the setting's parts, which Ray cannot rebuild in the driver
            raise ConfigError(f"ElmoPredictor: {e}") from None

    def _load(self, model: ModelRef | str, device: str | None, settings: dict[str, Any]) -> None:
        self.selection, options, columns = table_settings(settings, "ElmoPredictor", InputColumns)
        self.columns = InputColumns(**columns)
        threads_from_ray_allotment(require("ray", "ray", "elmo.integrations.ray.ElmoPredictor"))
        ref = ModelRef.parse(model)
        self.embedder = Embedder(ref.load(), options, device=device, model_name=ref.record)
        self.selection.check_model(self.embedder.num_layers)

    def __call__(self, batch: Any) -> Any:
        """A batch in Ray's ``numpy`` format (a dict of arrays) or ``pandas`` format -> the same with ``embedding``."""
        pandas = sys.modules.get("pandas")  # a pandas batch can only exist if pandas is loaded
        if pandas is not None and isinstance(batch, pandas.DataFrame):
            vectors = self._embed(batch, list(batch.columns), len(batch))
            return batch.assign(**{OUTPUT_COLUMN: list(vectors) if isinstance(vectors, np.ndarray) else vectors})
        if isinstance(batch, Mapping):
            rows = len(next(iter(batch.values()))) if batch else 0
            return {**batch, OUTPUT_COLUMN: self._embed(batch, list(batch), rows)}
        raise TypeError(f"ElmoPredictor: batches must be a dict of arrays (batch_format='numpy') or a pandas "
                        f"DataFrame (batch_format='pandas'), got {type(batch).__name__}")

    def _embed(self, batch: Any, names: list[str], rows: int) -> np.ndarray | list[np.ndarray]:
        """The batch's vectors: pooled, one (rows, ...) array; token vectors, a list of one array per row."""
        sentences = self._sentences(batch, names)
        vectors = list(embed_in_order(self.embedder, sentences, caller="ElmoPredictor", selection=self.selection))
        if self.selection.pooled:
            dim = self.selection.shape(self.embedder.num_layers, self.embedder.output_dim)
            return np.stack(vectors) if vectors else np.zeros((0, *dim), self.selection.dtype)  # (rows, ...)
        return vectors

    def _sentences(self, batch: Any, names: list[str]) -> list[list[str]]:
        if self.columns.tokens_column in names:
            column = self.columns.tokens_column
            return [tokens_of(row, _row(column, i)) for i, row in enumerate(batch[column])]
        if self.columns.text_column in names:
            column = self.columns.text_column
            return [text_of(row, _row(column, i)).split() for i, row in enumerate(batch[column])]
        wanted = " or ".join(repr(c) for c in (self.columns.tokens_column, self.columns.text_column) if c)
        raise InputFileError(f"ElmoPredictor: the batch has no column {wanted} (its columns: "
                             f"{', '.join(map(str, names))}); pass text_column= or tokens_column=")


def _row(column: str, index: int) -> str:
    return f"ElmoPredictor: column {column!r}, row {index} of a batch"
