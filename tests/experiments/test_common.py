"""How the experiment scripts name files in committed results (experiments/_common.py)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments"))
from _common import shown_path, with_shown_paths  # noqa: E402


def test_paths_in_the_checkout_and_in_the_shared_data_are_shown_relative():
    assert shown_path(REPO / "models" / "corpus") == "models/corpus"
    ewt = REPO.parent / "shared" / "data" / "tasks" / "ud_english_ewt" / "en_ewt-ud-test.conllu"
    assert shown_path(ewt) == "../shared/data/tasks/ud_english_ewt/en_ewt-ud-test.conllu"
    assert shown_path("/elsewhere/train.conllu") == "/elsewhere/train.conllu"


def test_only_a_probes_input_files_are_rewritten():
    result = {"train": str(REPO / "a.conllu"), "test": "/elsewhere/b.conllu", "tagset": "upos", "accuracy": {"1": 0.9}}
    assert with_shown_paths(result) == {**result, "train": "a.conllu"}
