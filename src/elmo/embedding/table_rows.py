"""What the table integrations share (Ray Data's ``ElmoPredictor``, Spark's ``elmo_udf``): their settings, given as
keyword arguments and checked by the declarations ``elmo embed`` uses, and a batch's rows made into sentences, with
one line naming a row that is not text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.selection import VectorSelection
from elmo.errors import ConfigError, InputFileError
from elmo.settings import split_settings


def table_settings(settings: Mapping[str, Any], where: str, *more: type) -> list[Any]:
    """``settings`` (keyword arguments) -> [:class:`VectorSelection`, :class:`EmbedOptions`, then one dict of
    fields per class of ``more``]. Carried states are refused: the rows of a distributed table come in no order."""
    selection, options, *rest = split_settings(settings, (VectorSelection, EmbedOptions, *more), where)
    chosen, embed = VectorSelection(**selection), EmbedOptions(**options)
    if embed.stateful:
        raise ConfigError(f"{where}: initial_state carry needs the sentences in file order, which the rows of a "
                          "distributed table do not keep; use zero or warm")
    return [chosen, embed, *rest]


def text_of(value: Any, where: str) -> str:
    """A row's whitespace-tokenised text; ``where`` names the row in the error (``"elmo_udf: row 3 of a batch"``)."""
    if not isinstance(value, str):
        raise InputFileError(f"{where}: expected a string, got {_clipped(value)}; drop or fill missing rows first")
    return value


def tokens_of(value: Any, where: str) -> list[str]:
    """A row's list of tokens (a list or array of strings)."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray) or not all(isinstance(t, str)
                                                                                          for t in value):
        raise InputFileError(f"{where}: expected a list of strings, got {_clipped(value)}")
    return list(value)


def _clipped(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
