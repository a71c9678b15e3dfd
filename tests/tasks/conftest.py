"""Tiny task data and a random biLM directory, so task tests run in seconds on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm

NER_SENTENCES = [
    [("John", "B-PER"), ("lives", "O"), ("in", "O"), ("Paris", "B-LOC"), (".", "O")],
    [("Mary", "B-PER"), ("Smith", "I-PER"), ("visited", "O"), ("New", "B-LOC"), ("York", "I-LOC")],
    [("The", "O"), ("United", "B-ORG"), ("Nations", "I-ORG"), ("met", "O"), ("today", "O"), (".", "O")],
    [("Berlin", "B-LOC"), ("is", "O"), ("big", "O")],
]

SST_LINES = [
    ("4", "a wonderful , moving film"),
    ("0", "dull and lifeless"),
    ("3", "quite good acting"),
    ("1", "a boring plot"),
    ("2", "it is a film"),
]


def write_conll(path: Path, sentences=NER_SENTENCES) -> Path:
    blocks = ["-DOCSTART- -X- -X- O\n"]
    for sentence in sentences:
        blocks.append("".join(f"{w} NNP B-NP {t}\n" for w, t in sentence))
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def write_sst(path: Path, lines=SST_LINES) -> Path:
    path.write_text("".join(f"{label}\t{text}\n" for label, text in lines), encoding="utf-8")
    return path


EXAMPLE_WRITERS = {"ner": write_conll, "sst": write_sst}
"""A few examples in each task kind's file format, by kind: a new kind in ``elmo.tasks.kinds`` needs its writer here
(``tests/tasks/test_kinds.py`` says so)."""


def write_examples(task: str, path: Path) -> Path:
    """The tiny examples of task kind ``task``, written to ``path`` in its file format."""
    return EXAMPLE_WRITERS[task](path)


@pytest.fixture(scope="session")
def bilm_dir(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("bilm"), native=True)


@pytest.fixture
def ner_file(tmp_path) -> Path:
    return write_conll(tmp_path / "ner.txt")


@pytest.fixture
def sst_file(tmp_path) -> Path:
    return write_sst(tmp_path / "sst.tsv")
