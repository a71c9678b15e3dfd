"""`elmo vocab`: special tokens first, then descending frequency with deterministic ties."""

from __future__ import annotations

import gzip
import io
import sys

import pytest

from elmo.cli import main
from elmo.errors import ConfigError
from elmo.text.vocab import Vocabulary
from elmo.training.corpus import expand_shards
from elmo.training.vocab_counts import count_words, vocabulary_from_counts


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_order_specials_then_frequency_then_word(tmp_path):
    a = _write(tmp_path / "a.txt", ["b a c", "a b", "", "d a"])
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("c d\ne\n")
    counts = count_words(expand_shards(str(tmp_path / "*")))
    assert counts == {"a": 3, "b": 2, "c": 2, "d": 2, "e": 1}
    vocab = vocabulary_from_counts(counts)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e"]  # ties b, c, d by code point
    assert vocabulary_from_counts(counts, min_count=2).words[3:] == ["a", "b", "c", "d"]
    assert vocabulary_from_counts(counts, max_size=5).words == ["<S>", "</S>", "<UNK>", "a", "b"]
    assert a.exists()


def test_special_tokens_in_the_corpus_are_not_repeated():
    vocab = vocabulary_from_counts({"<S>": 9, "x": 1, "<UNK>": 4})
    assert vocab.words == ["<S>", "</S>", "<UNK>", "x"]


def test_bad_limits_are_config_errors():
    with pytest.raises(ConfigError, match="--min-count"):
        vocabulary_from_counts({"a": 1}, min_count=0)
    with pytest.raises(ConfigError, match="--max-size"):
        vocabulary_from_counts({"a": 1}, max_size=2)


def test_cli_writes_a_training_vocabulary(tmp_path, capsys):
    corpus = _write(tmp_path / "c.txt", ["x y x", "z x y"])
    out = tmp_path / "vocab.txt"
    assert main(["-q", "vocab", str(corpus), "-o", str(out), "--min-count", "2"]) == 0
    assert out.read_text().split("\n")[:5] == ["<S>", "</S>", "<UNK>", "x", "y"]
    assert Vocabulary.from_file(out, require_special_tokens=True).index("z") == 2
    assert main(["vocab", str(tmp_path / "missing*.txt"), "-o", str(tmp_path / "other.txt")]) == 1
    assert "matches no shard" in capsys.readouterr().err


def test_counts_ignore_a_byte_order_mark_and_read_stdin(tmp_path, monkeypatch):
    shard = tmp_path / "bom.txt"
    shard.write_bytes("\ufeffthe cat the\n".encode())
    assert count_words(expand_shards(str(shard))) == {"the": 2, "cat": 1}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(shard.read_bytes()))))
    assert count_words(expand_shards("-")) == {"the": 2, "cat": 1}


def test_cli_names_a_directory_as_one(tmp_path, capsys):
    assert main(["vocab", str(tmp_path), "-o", str(tmp_path / "v.txt")]) == 1
    assert f"{tmp_path}: is a directory, not a text file; give the files as a glob" in capsys.readouterr().err
