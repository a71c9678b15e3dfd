"""Character ids against the original scheme, worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo.text.char_encoding import (
    BOS_CHAR,
    BOW_CHAR,
    EOS_CHAR,
    EOW_CHAR,
    PAD_CHAR,
    batch_to_ids,
    word_to_char_ids,
)


def _expected(byte_values: list[int], width: int = 50) -> list[int]:
    ids = [BOW_CHAR, *byte_values, EOW_CHAR]
    return ids + [PAD_CHAR] * (width - len(ids))


def test_ascii_word():
    assert word_to_char_ids("cat").tolist() == _expected([99, 97, 116])


def test_special_ids_are_the_originals():
    assert (BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR) == (256, 257, 258, 259, 260)


def test_non_ascii_word_uses_utf8_bytes():
    # "é" is U+00E9 -> bytes C3 A9; "€" is U+20AC -> E2 82 AC
    assert word_to_char_ids("é€").tolist() == _expected([0xC3, 0xA9, 0xE2, 0x82, 0xAC])


def test_overlong_token_is_truncated_to_48_bytes():
    word = "x" * 60
    ids = word_to_char_ids(word)
    assert ids.tolist() == [BOW_CHAR] + [ord("x")] * 48 + [EOW_CHAR]


def test_truncation_counts_bytes_not_characters():
    ids = word_to_char_ids("é" * 30)  # 60 bytes -> first 48 bytes = 24 characters
    assert ids.tolist() == [BOW_CHAR] + [0xC3, 0xA9] * 24 + [EOW_CHAR]


def test_sentence_boundary_tokens():
    assert word_to_char_ids("<S>").tolist()[:4] == [BOW_CHAR, BOS_CHAR, EOW_CHAR, PAD_CHAR]
    assert word_to_char_ids("</S>").tolist()[:4] == [BOW_CHAR, EOS_CHAR, EOW_CHAR, PAD_CHAR]


def test_lone_surrogate_is_dropped_like_the_original():
    assert word_to_char_ids("a\ud800b").tolist() == _expected([97, 98])


def test_batch_to_ids_shifts_by_one_and_pads_with_zero_rows():
    ids = batch_to_ids([["a", "bc"], ["d"], []])
    assert ids.shape == (3, 2, 50) and ids.dtype == torch.long
    assert ids[0, 1].tolist() == [x + 1 for x in _expected([98, 99])]
    assert ids[1, 1].eq(0).all() and ids[2].eq(0).all()


def test_nul_byte_is_a_real_character():
    ids = batch_to_ids([["\x00"]])
    assert ids[0, 0, :3].tolist() == [BOW_CHAR + 1, 1, EOW_CHAR + 1]


def test_batch_to_ids_with_sentence_boundaries():
    ids = batch_to_ids([["a"], []], add_sentence_boundaries=True)
    assert ids.shape == (2, 3, 50)
    assert ids[1, 0, 1] == BOS_CHAR + 1 and ids[1, 1, 1] == EOS_CHAR + 1 and ids[1, 2].eq(0).all()
    assert ids[0, 2, 1] == EOS_CHAR + 1


def test_custom_width():
    assert word_to_char_ids("abcdef", 6).tolist() == [BOW_CHAR, 97, 98, 99, 100, EOW_CHAR]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_unicode_string_encodes(word):
    ids = word_to_char_ids(word)
    assert ids.shape == (50,)
    assert ids[0] == BOW_CHAR and EOW_CHAR in ids.tolist()
    encoded = word.encode("utf-8", "ignore")[:48]
    assert ids[1 : len(encoded) + 1].tolist() == list(encoded) or word in ("<S>", "</S>")
    assert np.all((ids >= 0) & (ids <= 260))


def test_a_str_is_refused_where_tokens_belong():
    """A str iterates as characters: ``batch_to_ids(["a b c"])`` used to give 5 one-character tokens."""
    with pytest.raises(TypeError, match=r"^batch_to_ids, sentence 1: got the str 'a b c' where a list of tokens is "
                                        r"expected; split it first, e\.g\. 'a b c'\.split\(\)$"):
        batch_to_ids([["x"], "a b c"])
    with pytest.raises(TypeError, match=r"^batch_to_ids: got the str 'The cat' where a list of tokenised sentences"):
        batch_to_ids("The cat")
    with pytest.raises(TypeError, match=r"got the str 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\.\.\.'"):
        batch_to_ids(["a" * 100])
    assert batch_to_ids((("a", "b"), ["c"])).shape == (2, 2, 50)  # any sequence of tokens is fine


def test_a_str_is_refused_where_word_ids_are_made():
    """The word-input path has the same trap as the character path."""
    from elmo import Vocabulary, batch_to_token_ids

    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a"])
    with pytest.raises(TypeError, match=r"^batch_to_token_ids, sentence 0: got the str 'a b'"):
        batch_to_token_ids(["a b"], vocab)
    assert batch_to_token_ids([["a", "b"]], vocab).tolist() == [[4, 3]]
