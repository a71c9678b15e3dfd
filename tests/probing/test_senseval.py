"""The Senseval lexical-sample reader: tokens, head, sense; every malformed file names its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from elmo.errors import InputFileError
from elmo.probing.senseval import read_senseval, read_senseval_data
from tests.probing.files import senseval_text

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tasks" / "senseval"


def test_instances_tokens_head_and_sense(tmp_path):
    path = tmp_path / "line.pos"
    path.write_text(senseval_text(n=2), encoding="utf-8")
    first, second = read_senseval(path)
    assert (first.word, first.id, first.sense, first.line) == ("line-n", "line-n.0:", "cord", 5)
    assert first.tokens == ["pull", "the", "line", "&", "more"]  # entities decoded; bare text split on spaces
    assert first.tokens[first.head] == "line"
    assert (second.sense, second.tokens[:2]) == ("text", ["read", "the"])


def test_directory_groups_by_word(tmp_path):
    (tmp_path / "a.pos").write_text(senseval_text("line-n", 3), encoding="utf-8")
    (tmp_path / "b.xml").write_text(senseval_text("hard-a", 2), encoding="utf-8")
    (tmp_path / "README").write_text("not read", encoding="utf-8")
    assert {w: len(v) for w, v in read_senseval_data(tmp_path).items()} == {"line-n": 3, "hard-a": 2}


@pytest.mark.parametrize("old, new, line, problem", [
    ('<head> <wf pos="NN">line</wf></head>', '<wf pos="NN">line</wf>', 10, "has 0 head words, expected one"),
    ('<head> <wf pos="NN">line</wf></head>', "<head> <wf>line</wf> <wf>x</wf></head>", 10, "has 2 head words"),
    ('<answer instance="line-n.0:" senseid="cord"/>', "", 10, "has no <answer senseid=.../>"),
    ('senseid="cord"', 'sense="cord"', 6, "<answer> without a senseid attribute"),
    ('<s snum="1"/>', "<x/>", 8, "unknown tag <x>"),
    ('<wf pos="X">pull</wf>', "<wf>pull", 8, "malformed tag|unexpected"),
    ("</context>", "", 10, "</instance> before </context>"),
    ('<lexelt item="line-n">', "<lexelt>", 3, "<lexelt> without an item attribute"),
    ("</lexelt>", "", 20, "the file ends inside lexelt"),
    ('<wf pos="X">the</wf>', '<wf pos="X"></wf>', 8, "<wf> must hold one word"),
])
def test_malformed_files_name_the_line(tmp_path, old, new, line, problem):
    path = tmp_path / "bad.pos"
    path.write_text(senseval_text(n=2).replace(old, new, 1), encoding="utf-8")
    with pytest.raises(InputFileError, match=rf"^{path}, line {line}: .*({problem})"):
        list(read_senseval(path))


def test_text_outside_context_and_empty_directory(tmp_path):
    path = tmp_path / "bad.pos"
    path.write_text(senseval_text(n=1).replace("<context>", "stray words\n<context>"), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"bad.pos, line 7: text outside <context>: 'stray words'"):
        list(read_senseval(path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match=r"no Senseval files"):
        read_senseval_data(tmp_path / "empty")


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data/tasks/senseval")
def test_reads_the_interest_file():
    instances = list(read_senseval(SHARED / "interest.pos"))
    assert len(instances) == 2368  # one per <instance> in the file
    assert {x.tokens[x.head] for x in instances} == {"interest", "interests"}
