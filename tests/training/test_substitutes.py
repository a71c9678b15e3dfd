"""Lexical substitutes: the top-k words of each direction's full softmax at every token, checked by hand on a tiny
exported language model."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo.cli import main
from elmo.errors import ElmoError
from elmo.formats.model_files import save_bilm
from elmo.text.char_encoding import batch_to_ids
from elmo.text.vocab import Vocabulary
from elmo.training.presets import load_preset
from elmo.training.run_files import build_language_model, export_language_model
from elmo.training.substitutes import lm_substitutes, model_substitutes
from tests.conftest import random_bilm

WORDS = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "a", "dog", "ran", "far", "away", "on", "mat", "."]
SENTENCES = [["the", "cat", "sat"], [], ["a", "unknownword", "ran", "far", "away", "."], ["dog"]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A tiny language model with random weights, exported as `elmo export` writes it (softmax.hdf5 + vocab.txt)."""
    root = tmp_path_factory.mktemp("lm")
    Vocabulary(WORDS).save(root / "vocab.txt")
    config, train = load_preset("tiny")
    torch.manual_seed(0)
    lm = build_language_model(config, train, len(WORDS)).eval()
    with torch.no_grad():
        lm.softmax.bias.copy_(torch.randn(len(WORDS)))
    return export_language_model(lm, root / "model", root / "vocab.txt")


def _by_hand(model: Path, sentence: list[str], top_k: int) -> list[dict]:
    """Each direction's stack over its own context from zero state, logits = h W^T + b with W, b read from
    softmax.hdf5, softmax in float64, <S> and </S> left out, sorted."""
    from elmo.formats.model_files import load_bilm

    bilm = load_bilm(model).eval()
    with h5py.File(model / "softmax.hdf5", "r") as f:
        weight, bias = f["softmax/W"][...].astype(np.float64), f["softmax/b"][...].astype(np.float64)
    n = len(sentence)
    with torch.no_grad():
        fwd_in = bilm.token_encoder(batch_to_ids([["<S>", *sentence]]))  # (1, n+1, P)
        fwd = bilm.forward_lstm(fwd_in)[0][-1][0, :n].double().numpy()  # row i-1 predicts w_i
        bwd_in = bilm.token_encoder(batch_to_ids([["</S>", *reversed(sentence)]]))
        bwd = bilm.backward_lstm(bwd_in)[0][-1][0, :n].double().numpy()[::-1]  # reversed back to w1..wn
    result = []
    for i, word in enumerate(sentence):
        entry = {"word": word}
        for name, hidden in (("forward", fwd[i]), ("backward", bwd[i])):
            logits = weight @ hidden + bias
            p = np.exp(logits - logits.max())
            p /= p.sum()
            p[[0, 1]] = -1  # <S>, </S>: never candidates
            best = np.argsort(-p, kind="stable")[:top_k]
            entry[name] = [[WORDS[j], float(p[j])] for j in best]
        result.append(entry)
    return result


def _assert_same(got: list[dict], expected: list[dict]) -> None:
    assert [t["word"] for t in got] == [t["word"] for t in expected]
    for g, e in zip(got, expected):
        for name in ("forward", "backward"):
            assert [w for w, _ in g[name]] == [w for w, _ in e[name]], (g["word"], name)
            np.testing.assert_allclose([p for _, p in g[name]], [p for _, p in e[name]], rtol=1e-5, atol=1e-7)


def test_cli_json_equals_the_hand_computation(exported, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    assert main(["substitutes", str(text), "--model", str(exported), "--top-k", "4", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SENTENCES)  # one JSON array per input line, the blank one included
    for line, sentence in zip(lines, SENTENCES):
        _assert_same(json.loads(line), _by_hand(exported, sentence, 4))
    assert json.loads(lines[1]) == []


def test_python_api_is_batch_invariant_and_sorted(exported):
    one = list(model_substitutes(exported, SENTENCES, top_k=5, batch_size=1))
    many = list(model_substitutes(exported, SENTENCES, top_k=5, batch_size=32))
    assert [len(s) for s in one] == [len(s) for s in SENTENCES]
    for a, b, sentence in zip(one, many, SENTENCES):
        _assert_same([t.to_dict() for t in a], [t.to_dict() for t in b])
        _assert_same([t.to_dict() for t in a], _by_hand(exported, sentence, 5))
        for token in a:
            for candidates in (token.forward, token.backward):
                probabilities = [p for _, p in candidates]
                assert probabilities == sorted(probabilities, reverse=True) and len(candidates) == 5
                assert not {"<S>", "</S>"} & {w for w, _ in candidates}


def test_text_output_one_line_per_token_and_a_blank_line_after_each_sentence(exported, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat\n\ndog\n", encoding="utf-8")
    assert main(["substitutes", str(text), "--model", str(exported), "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.split("\n")
    assert lines[0].startswith("the\tforward: ") and "\tbackward: " in lines[0]
    assert lines[1].startswith("cat\t") and lines[2] == "" and lines[3] == "" and lines[4].startswith("dog\t")
    expected = _by_hand(exported, ["the", "cat"], 2)[0]["forward"]
    assert lines[0].split("\t")[1] == "forward: " + "  ".join(f"{w} {p:.4g}" for w, p in expected)


def test_top_k_is_capped_at_the_words_that_can_be_proposed(exported):
    (sentence,) = model_substitutes(exported, [["the", "cat"]], top_k=1000)
    assert all(len(t.forward) == len(t.backward) == len(WORDS) - 2 for t in sentence)
    assert sum(p for _, p in sentence[0].forward) < 1.0  # <S> and </S> keep their share: not renormalised


def test_a_model_without_a_softmax_says_so_in_one_line(tmp_path, capsys):
    model = save_bilm(random_bilm(), tmp_path / "model")
    text = tmp_path / "in.txt"
    text.write_text("the cat\n", encoding="utf-8")
    assert main(["substitutes", str(text), "--model", str(model)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"elmo: error: {model} has no softmax (softmax.hdf5 + vocab.txt): substitutes needs a "
                          "language model") and "\n" not in err


@pytest.mark.parametrize(
    ("argv", "status", "expected"),
    [(["--top-k", "0"], 2, "elmo substitutes: error: argument --top-k: must be >= 1, got 0"),
     ([], 1, "in.txt: no lines to find substitutes for")],
    ids=["top-k", "empty-file"],
)
def test_bad_requests_give_one_line(exported, tmp_path, capsys, argv, status, expected):
    text = tmp_path / "in.txt"
    text.write_text("" if not argv else "the cat\n", encoding="utf-8")
    try:
        code = main(["substitutes", str(text), "--model", str(exported), *argv])
    except SystemExit as e:  # a value its flag refuses: argparse's usage error
        code = e.code
    assert code == status
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err


def test_a_vocabulary_of_another_size_is_refused(exported):
    lm_vocab = Vocabulary(WORDS[:-1])
    from elmo.training.run_files import load_language_model

    lm, _ = load_language_model(exported)
    with pytest.raises(ElmoError, match="13 words, but the model.s softmax has 14 rows"):
        lm_substitutes(lm, lm_vocab, [["the"]])  # at the call, before any result is asked for
