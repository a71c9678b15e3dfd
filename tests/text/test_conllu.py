"""The CoNLL-U reader: words with FORM/UPOS/XPOS, multiword tokens and empty nodes skipped, one-line errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from elmo.errors import InputFileError
from elmo.text.conllu import read_conllu

SHARED_EWT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tasks" / "ud_english_ewt"

GOOD = """\
# newdoc id = d1
# sent_id = s-1
# text = I can't go.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\tcan\tAUX\tMD\t_\t3\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:x\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_


1\tHello world\thello\tINTJ\t_\t_\t0\troot\t_\t_
"""


def _write(tmp_path: Path, text: str, name: str = "a.conllu") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_words_tags_ids_and_lines(tmp_path):
    first, second = read_conllu(_write(tmp_path, GOOD))
    assert first.forms == ["I", "ca", "n't", "go", "."]  # the range 2-3 and the empty node 4.1 are skipped
    assert first.tags("upos") == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert first.tags("xpos") == ["PRP", "MD", "RB", "VB", "."]
    assert (first.index, first.line, first.sent_id) == (0, 4, "s-1")
    assert [w.line for w in first.words] == [4, 6, 7, 8, 10]
    assert second.forms == ["Hello world"]  # a FORM may hold a space; no trailing blank line needed
    assert (second.index, second.line, second.sent_id) == (1, 13, None)


def test_gzip_and_byte_order_mark(tmp_path):
    path = tmp_path / "a.conllu.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\ufeff" + GOOD)
    assert [s.forms for s in read_conllu(path)] == [s.forms for s in read_conllu(_write(tmp_path, GOOD))]


@pytest.mark.parametrize("text, line, problem", [
    ("1\tI\tI\tPRON\tPRP\t_\t0\troot\t_\n", 1, "expected 10 tab-separated columns, found 9"),
    ("1\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n3\tgo\tgo\tVERB\tVB\t_\t1\tx\t_\t_\n", 2,
     "word ID 3 out of order: expected 2"),
    ("2\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", 1, "word ID 2 out of order: expected 1"),
    ("x\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", 1, "ID 'x' is not an integer"),
    ("1\t\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", 1, "empty FORM column"),
    ("2-3\tab\t_\t_\t_\t_\t_\t_\t_\t_\n", 1, "multiword token 2-3 out of order"),
    ("1.1\tI\tI\tPRON\tPRP\t_\t_\t_\t_\t_\n1\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", 1,
     "empty node 1.1 out of order: expected 0.N"),
    ("1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n", 3, "inside a multiword token"),
    ("# ok\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n1\tb\tb\tX\tX\t_\t0\troot\t_\t_\n",
     5, "word ID 1 out of order: expected 2"),
])
def test_malformed_lines_name_file_and_line(tmp_path, text, line, problem):
    path = _write(tmp_path, text, "bad.conllu")
    with pytest.raises(InputFileError, match=rf"^{path}, line {line}: .*{problem}"):
        list(read_conllu(path))


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_bytes(b"1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n1\t\xff\ta\tX\tX\t_\t0\troot\t_\t_\n")
    with pytest.raises(InputFileError, match=r"bad.conllu, line 3: not valid UTF-8"):
        list(read_conllu(path))
    assert [s.forms for s in read_conllu(path, errors="replace")] == [["a"], ["\ufffd"]]


def test_comment_only_blocks_are_not_sentences(tmp_path):
    sentences = list(read_conllu(_write(tmp_path, "# newdoc\n\n# sent_id = 1\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n")))
    assert [(s.index, s.sent_id, s.forms) for s in sentences] == [(0, "1", ["a"])]


@pytest.mark.skipif(not SHARED_EWT.is_dir(), reason="needs ../shared/data/tasks/ud_english_ewt")
def test_reads_ud_english_ewt_test_file():
    sentences = list(read_conllu(SHARED_EWT / "en_ewt-ud-test.conllu"))
    assert len(sentences) == 2077  # the UD 2.x EWT test split
    assert sum(len(s.words) for s in sentences) == 25094
