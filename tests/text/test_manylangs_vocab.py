"""ELMoForManyLangs' dictionaries and ids: the reader's quirks and the id scheme (markers swapped, 48-character cut,
sentence boundaries), each against the original's behaviour."""

from __future__ import annotations

import codecs

import numpy as np
import pytest

from elmo.errors import ConfigError
from elmo.text.manylangs_vocab import ManyLangsLexicon, parse_dictionary

SPECIAL_CHARS = {"<bos>": 10, "<eos>": 11, "<oov>": 12, "<pad>": 13, "<bow>": 14, "<eow>": 15}


def original_reader(path) -> dict[str, int]:
    """The original's loop (elmoformanylangs/elmo.py, Embedder.get_model), verbatim."""
    lexicon = {}
    with codecs.open(path, "r", encoding="utf-8") as fpi:
        for line in fpi:
            tokens = line.strip().split("\t")
            if len(tokens) == 1:
                tokens.insert(0, "\u3000")
            token, i = tokens
            lexicon[token] = int(i)
    return lexicon


def test_reader_quirks_match_the_original(tmp_path):
    lines = ["a\t0", "\xa0\t1", "b\t2\r", "\ufeffc\t3", "é\t4\x0bd\t5", "e\t6\x85f\t7", "g\t8\u2029h\t9",
             " x \t10", "a\t11", "\u200b\t12", "\t\t13"]
    path = tmp_path / "char.dic"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    ours = parse_dictionary(path.read_bytes(), "char.dic")
    assert ours == original_reader(path)
    assert ours["\u3000"] == 13 and "\xa0" not in ours and ours["a"] == 11  # whitespace -> U+3000; later wins
    # the line is stripped, not its fields: " x <TAB>10" is the token "x "
    assert ours["\ufeffc"] == 3 and ours["x "] == 10 and ours["d"] == 5 and ours["f"] == 7 and ours["h"] == 9


@pytest.mark.parametrize("line,message", [
    ("", "line 2: the id '' is not an integer"),
    ("a\tb\t3", "line 2: expected 'token<TAB>id', got 3 tab-separated fields"),
    ("a\tseven", "line 2: the id 'seven' is not an integer"),
    ("\u2028\t3", "line 2: the id '' is not an integer"),  # U+2028 ends the line: the original fails here too
])
def test_lines_the_original_cannot_read(line, message):
    with pytest.raises(ConfigError, match=f"^word.dic, {message}$"):
        parse_dictionary(f"x\t0\n{line}\ny\t1\n".encode(), "word.dic")


def test_not_utf8():
    with pytest.raises(ConfigError, match=r"^char.dic: not UTF-8 text"):
        parse_dictionary(b"a\t0\n\xff\t1\n", "char.dic")


def lexicon(**kwargs) -> ManyLangsLexicon:
    chars = {c: i for i, c in enumerate("abcdefghij")} | SPECIAL_CHARS
    words = {"<oov>": 0, "<pad>": 1, "cat": 2, "<bos>": 3, "a" * 48: 4}
    return ManyLangsLexicon(chars=chars, words=words, **kwargs)


def test_token_ids_swap_the_word_markers_and_cut_at_48_characters():
    ids = lexicon().token_ids(["cat", "<bos>", "zz", "a" * 50]) - 1  # back to the dictionaries' ids
    assert ids.shape == (4, 51)
    bow, eow, pad, oov = SPECIAL_CHARS["<eow>"], SPECIAL_CHARS["<bow>"], SPECIAL_CHARS["<pad>"], SPECIAL_CHARS["<oov>"]
    assert list(ids[0, :6]) == [2, bow, 2, 0, oov, eow] and set(ids[0, 6:]) == {pad}  # 't' is not in the lexicon
    assert list(ids[1, :4]) == [3, bow, SPECIAL_CHARS["<bos>"], eow]
    assert list(ids[2, :4]) == [0, bow, oov, oov]  # an unknown word and unknown characters
    assert ids[3, 0] == 4 and list(ids[3, 1:]) == [bow] + [0] * 48 + [eow]  # both lookups see the cut token


def test_token_ids_without_words_or_chars():
    only_chars = ManyLangsLexicon(chars=lexicon().chars, words=None)
    assert only_chars.token_ids(["ab"])[0, 0] == 1 and only_chars.width == 51
    only_words = ManyLangsLexicon(chars=None, words=lexicon().words)
    np.testing.assert_array_equal(only_words.token_ids(["cat", "dog"]), [[3], [1]])


def test_json_round_trip_and_errors():
    original = lexicon()
    assert ManyLangsLexicon.from_json(original.to_json(), "lexicon.json") == original
    broken = original.to_json() | {"words": {"cat": 1}}
    with pytest.raises(ConfigError, match=r"lexicon.json: 'words' has no entry for '<oov>'"):
        ManyLangsLexicon.from_json(broken, "lexicon.json")
    with pytest.raises(ConfigError, match="not an ELMoForManyLangs lexicon"):
        ManyLangsLexicon.from_json({"chars": {}}, "lexicon.json")
