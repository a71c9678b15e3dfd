"""What the engine tests share: real sentences and the local Embedder their vectors must equal."""

from __future__ import annotations

import pytest

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from elmo.formats.published import resolve_model
from tests.conftest import SHARED

BROWN = SHARED / "data" / "lm" / "brown" / "brown.valid.txt"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """The first 50 sentences of the Brown corpus' held-out part."""
    with open(BROWN, encoding="utf-8") as f:
        return [next(f).strip() for _ in range(50)]


@pytest.fixture(scope="module")
def reference() -> Embedder:
    return Embedder(load_bilm(resolve_model("demo")), precision="fp32", device="cpu")
