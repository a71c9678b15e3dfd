from __future__ import annotations

import pytest

from elmo.errors import InputFileError
from elmo.tasks.conll import read_conll, write_conll_predictions
from elmo.tasks.sentence_labels import read_labelled_sentences


def test_read_conll_skips_docstart_and_keeps_word_and_last_column(ner_file):
    sentences = read_conll(ner_file)
    assert len(sentences) == 4
    assert sentences[1].words == ["Mary", "Smith", "visited", "New", "York"]
    assert sentences[1].tags == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    assert sentences[0].line == 3


def test_conll_predictions_round_trip(tmp_path, ner_file):
    sentences = read_conll(ner_file)
    write_conll_predictions(tmp_path / "p.txt", sentences, [s.tags for s in sentences])
    again = read_conll(tmp_path / "p.txt")
    assert [s.words for s in again] == [s.words for s in sentences]


@pytest.mark.parametrize(
    "text, message",
    [
        ("EU B-ORG\nrejects\n", "line 2: expected 'word ... tag'"),
        ("EU NNP B-ORG\nrejects O\n", "line 2: 2 columns, earlier lines have 3"),
        ("\n\n", "no sentences found"),
    ],
)
def test_conll_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputFileError, match=message) as e:
        read_conll(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_conll_bad_utf8_and_missing_file(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"EU B-ORG\n\xff O\n")
    with pytest.raises(InputFileError, match="line 2: not valid UTF-8"):
        read_conll(path)
    with pytest.raises(InputFileError, match="no such file"):
        read_conll(tmp_path / "missing.txt")


def test_read_labelled_sentences(sst_file):
    sentences = read_labelled_sentences(sst_file)
    assert sentences[0].label == "4" and sentences[0].words == ["a", "wonderful", ",", "moving", "film"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("3\tgood\n2 no tab here\n", "line 2: expected 'label<TAB>sentence', found no TAB"),
        ("3\tgood\n\t film\n", "line 2: empty label"),
        ("3\t  \n", "line 1: empty sentence"),
    ],
)
def test_labelled_sentence_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(InputFileError, match=message) as e:
        read_labelled_sentences(path)
    assert str(path) in str(e.value)


def test_readers_drop_a_byte_order_mark(tmp_path):
    conll, sst = tmp_path / "ner.txt", tmp_path / "sst.tsv"
    conll.write_bytes("\ufeffEU B-ORG\nrejects O\n".encode())
    sst.write_bytes("\ufeff4\tgood film\n".encode())
    assert read_conll(conll)[0].words == ["EU", "rejects"]
    assert read_labelled_sentences(sst)[0].label == "4"
