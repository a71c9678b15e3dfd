"""A tiny random biLM for the probes (their tiny files: ``tests/probing/files.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def embedder(tiny_model) -> Embedder:
    from elmo.formats.model_files import load_bilm

    return Embedder(load_bilm(tiny_model))
