"""What the Ray Data and Spark integrations share: their settings checked once, carried states refused, and a row
that is not text named in one line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.selection import VectorSelection
from elmo.embedding.table_rows import table_settings, text_of, tokens_of
from elmo.errors import ConfigError, InputFileError


def test_settings_split_into_the_selection_the_options_and_the_callers_own():
    @dataclasses.dataclass(frozen=True)
    class Own:
        column: str = "text"

    selection, options, own = table_settings({"pool": "mean", "batch_size": 4, "column": "body"}, "where", Own)
    assert selection == VectorSelection(pool="mean") and options == EmbedOptions(batch_size=4)
    assert own == {"column": "body"}
    with pytest.raises(ConfigError, match=r"^where: unknown setting 'pol' \(known: model, device, "):
        table_settings({"pol": "mean"}, "where")
    with pytest.raises(ConfigError, match="^elmo_udf: initial_state carry needs the sentences in file order"):
        table_settings({"initial_state": "carry"}, "elmo_udf")


def test_rows_that_are_not_text_are_one_line_naming_the_row():
    assert text_of("a b", "here") == "a b"
    assert tokens_of(np.array(["a", "b"]), "here") == ["a", "b"]
    with pytest.raises(InputFileError, match=r"^elmo_udf: row 3 of a batch: expected a string, got None; drop or "):
        text_of(None, "elmo_udf: row 3 of a batch")
    with pytest.raises(InputFileError, match=r"^here: expected a list of strings, got 'a b'$"):
        tokens_of("a b", "here")
    with pytest.raises(InputFileError, match=r"got \['x', 'x', .*\.\.\.$"):
        tokens_of(["x"] * 30 + [1], "here")
