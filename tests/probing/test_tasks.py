"""The three probes end to end on a tiny random biLM and tiny files, through the Python API and ``elmo``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from elmo.cli import main
from elmo.errors import ElmoError, InputFileError
from elmo.probing.linear import ProbeSettings
from elmo.probing.neighbours import read_corpus, word_neighbours
from elmo.probing.pos import probe_pos
from elmo.probing.wsd import centroid_predict, probe_wsd, split
from tests.probing.files import conllu_text, senseval_text

FAST = ProbeSettings(max_iterations=10, held_out=0.25)
FAST_FLAGS = ["--max-iterations", "10", "--held-out", "0.25"]


@pytest.fixture
def conllu(tmp_path):
    path = tmp_path / "tiny.conllu"
    path.write_text(conllu_text(), encoding="utf-8")
    return path


def test_pos_reports_every_layer_and_the_mix(embedder, conllu):
    result = probe_pos(embedder, conllu, conllu, "xpos", settings=FAST)
    assert list(result["accuracy"]) == ["0", "1", "2", "mix"]
    assert all(0 <= a <= 1 for a in result["accuracy"].values())
    assert (result["train_words"], result["test_words"], result["tags"]) == (15, 15, 4)
    assert result["baseline_most_frequent_tag"] == 1.0  # every form has one tag here
    assert len(result["mix_weights"]) == 3


def test_per_item_correctness_adds_up_to_the_accuracies(embedder, conllu, tmp_path):
    result = probe_pos(embedder, conllu, conllu, "upos", settings=FAST, per_word=True)
    assert result["sentence"].tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    assert {k: float(v.mean()) for k, v in result["correct"].items()} == pytest.approx(result["accuracy"])
    (tmp_path / "line.pos").write_text(senseval_text("line-n", 20), encoding="utf-8")
    (tmp_path / "hard.pos").write_text(senseval_text("hard-a", 10).replace(">line<", ">hard<"), encoding="utf-8")
    wsd = probe_wsd(embedder, tmp_path, FAST, per_instance=True)
    for method in ("centroid", "linear"):
        assert all(len(v) == wsd["test_instances"] == 6 for v in wsd["correct"][method].values())
        assert {k: float(v.mean()) for k, v in wsd["correct"][method].items()} == pytest.approx(
            wsd["overall"][method])
    assert "correct" not in probe_pos(embedder, conllu, conllu, settings=FAST)


def test_pos_limit_and_missing_tags(embedder, conllu, tmp_path):
    assert probe_pos(embedder, conllu, conllu, max_train_sentences=2, settings=FAST)["train_sentences"] == 2
    bad = tmp_path / "bad.conllu"
    bad.write_text(conllu_text().replace("cat\tNOUN\tNN", "cat\tNOUN\t_", 1), encoding="utf-8")
    with pytest.raises(InputFileError, match=rf"^{bad}, line 3: no XPOS tag \('_'\) for 'cat'; try --tagset upos"):
        probe_pos(embedder, bad, conllu, "xpos", settings=FAST)


def test_wsd_split_centroids_and_report(embedder, tmp_path):
    assert [len(part) for part in split(list(range(12)))] == [10, 2]  # the 5th and the 10th are test
    assert split(list(range(12)))[1] == [4, 9]
    train = np.array([[1.0, 0.0], [3.0, 0.1], [0.0, 1.0]])
    assert centroid_predict(train, np.array([0, 0, 1]), np.array([[5.0, 1.0], [0.1, 2.0]]), 2).tolist() == [0, 1]
    (tmp_path / "line.pos").write_text(senseval_text("line-n", 20), encoding="utf-8")
    result = probe_wsd(embedder, tmp_path, FAST)
    word = result["words"]["line-n"]
    assert (word["train"], word["test"], word["senses"], result["test_instances"]) == (16, 4, 2, 4)
    assert word["centroid"]["1"] == word["centroid"]["2"] == 1.0  # the senses differ by the words before "line"
    assert word["centroid"]["0"] == 0.5  # the token layer sees "line" only: one vector for both senses
    assert list(word["linear"]) == ["0", "1", "2", "mix"]
    assert result["overall"]["baseline_most_frequent_sense"] == 0.5


def test_neighbours_of_each_use_and_the_token_layer(embedder, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("they play a game\n\nwe saw a play\nthe play ended\n", encoding="utf-8")
    sentences = read_corpus(corpus)
    assert len(sentences) == 3  # the empty line is skipped
    result = word_neighbours(embedder, sentences, "play", k=3)
    assert [(u["sentence"], u["position"]) for u in result["uses"]] == [(0, 1), (1, 3), (2, 1)]
    assert result["uses"][1]["text"] == "we saw a [play]"
    for use in result["uses"]:
        assert len(use["neighbours"]) == 3
        assert (use["sentence"], use["position"]) not in {(n["sentence"], n["position"]) for n in use["neighbours"]}
        cosines = [n["cosine"] for n in use["neighbours"]]
        assert cosines == sorted(cosines, reverse=True)
    assert len(result["token_layer"]) == 3 and "play" not in {n["token"] for n in result["token_layer"]}
    with pytest.raises(ElmoError, match="'chess' does not occur in the corpus"):
        word_neighbours(embedder, sentences, "chess")


def test_cli_probe_pos_wsd_and_neighbours(tiny_model, conllu, tmp_path, capsys):
    model = ["--model", str(tiny_model)]
    assert main(["-q", "probe", "pos", "--train", str(conllu), "--test", str(conllu), "--json", *model,
                 *FAST_FLAGS]) == 0
    assert list(json.loads(capsys.readouterr().out)["accuracy"]) == ["0", "1", "2", "mix"]
    (tmp_path / "line.pos").write_text(senseval_text("line-n", 10), encoding="utf-8")
    assert main(["-q", "probe", "wsd", "--data", str(tmp_path / "line.pos"), *model, *FAST_FLAGS]) == 0
    out = capsys.readouterr().out
    assert "| centroid |" in out and "| linear |" in out and "most frequent sense: 50.0" in out
    assert main(["-q", "neighbours", "--word", "cat", "--corpus", str(conllu), "--input-format", "conllu",
                 "--k", "2", *model]) == 0
    out = capsys.readouterr().out
    assert "the [cat] sat ." in out and "token layer (layer 0, the same for every use)" in out


def test_cli_malformed_files_one_line(tiny_model, tmp_path, capsys):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\ta\ta\tX\tX\t_\t0\troot\t_\n", encoding="utf-8")
    assert main(["-q", "probe", "pos", "--train", str(bad), "--test", str(bad), "--model", str(tiny_model)]) == 1
    assert capsys.readouterr().err == f"elmo: error: {bad}, line 1: expected 10 tab-separated columns, found 9\n"
    bad = tmp_path / "bad.pos"
    bad.write_text(senseval_text(n=1).replace("</instance>", ""), encoding="utf-8")
    assert main(["-q", "probe", "wsd", "--data", str(bad), "--model", str(tiny_model)]) == 1
    assert capsys.readouterr().err.startswith(f"elmo: error: {bad}, line 12: </lexelt> inside instance")
