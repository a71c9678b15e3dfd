from __future__ import annotations

import h5py
import numpy as np

from elmo.cli import main as cli_main
from elmo.embedding.demo import CONTEXTS, nearest_neighbours, sense_accuracy
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm


def test_nearest_neighbours_pick_the_most_similar_other_use_of_the_same_word():
    contexts = [("w", "a", "s1"), ("w", "a", "s2"), ("w", "b", "s3"), ("v", "a", "s4")]
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.2, 1.0], [1.0, 0.0]])
    found = nearest_neighbours(vectors, contexts)
    assert [(n.sentence, n.nearest_sentence) for n in found] == [("s1", "s2"), ("s2", "s1"), ("s3", "s2")]
    assert sense_accuracy(found) == 2 / 3


def test_demo_command_writes_embeddings_and_a_table(tmp_path, capsys):
    model = save_bilm(random_bilm(), tmp_path / "model")
    assert cli_main(["demo", "--model", str(model), "--output-dir", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| bank |" in printed and "same sense for" in printed
    with h5py.File(tmp_path / "out" / "embeddings.hdf5", "r") as f:
        assert f["0"].shape == (3, len(CONTEXTS[0][2].split()), 16)
