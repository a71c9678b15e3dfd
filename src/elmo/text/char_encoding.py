"""Tokens -> character ids, exactly as the original implementation encodes them.

bilm-tf (``UnicodeCharsVocabulary``) and AllenNLP (``ELMoCharacterMapper``) encode a token as its UTF-8 bytes,
truncated to ``max_characters_per_token - 2`` bytes, between a begin-of-word and an end-of-word marker, padded::

    "cat" -> [BOW, 99, 97, 116, EOW, PAD, PAD, ..., PAD]      (50 ids; bytes 0-255, specials 256-260)
    "<S>" -> [BOW, BOS, EOW, PAD, ..., PAD]                     sentence boundaries have their own arrays
    "</S>"-> [BOW, EOS, EOW, PAD, ..., PAD]

At inference every id is shifted by +1 so that 0 can mean "no token here" (padding and mask); the character
embedding then has 262 rows, row 0 all zeros. Training files use the raw ids (261 rows, no shift).

A batch is a (batch, time, chars) LongTensor::

    sentence 0:  [ids("The"), ids("cat"), ids("sat")]
    sentence 1:  [ids("Hi"),  0 0 ... 0,  0 0 ... 0  ]   <- padding tokens are all-zero rows
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache

import numpy as np
import torch

BOS_CHAR = 256  # <begin sentence>
EOS_CHAR = 257  # <end sentence>
BOW_CHAR = 258  # <begin word>
EOW_CHAR = 259  # <end word>
PAD_CHAR = 260  # <padding inside a token>

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

MAX_CHARACTERS_PER_TOKEN = 50


@lru_cache(maxsize=200_000)
def _cached_char_ids(word: str, max_characters_per_token: int) -> bytes:
    ids = np.full(max_characters_per_token, PAD_CHAR, dtype=np.int16)
    ids[0] = BOW_CHAR
    if word == BOS_TOKEN or word == EOS_TOKEN:
        ids[1] = BOS_CHAR if word == BOS_TOKEN else EOS_CHAR
        ids[2] = EOW_CHAR
    else:
        # 'ignore' drops what UTF-8 cannot encode (lone surrogates), as the original does.
        encoded = word.encode("utf-8", "ignore")[: max_characters_per_token - 2]
        ids[1 : len(encoded) + 1] = np.frombuffer(encoded, dtype=np.uint8)
        ids[len(encoded) + 1] = EOW_CHAR
    return ids.tobytes()


def word_to_char_ids(word: str, max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Raw character ids of one token, shape (max_characters_per_token,), values 0..260 (no +1 shift)."""
    return np.frombuffer(_cached_char_ids(word, max_characters_per_token), dtype=np.int16).astype(np.int64)


def shifted_char_ids(words: Iterable[str], max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Model-input character ids of N words, shape (N, max_characters_per_token), values 1..261.

    The +1 shift leaves 0 free to mean "no token here" (padding and mask), as every inference model expects.
    """
    raw = b"".join(_cached_char_ids(word, max_characters_per_token) for word in words)
    return np.frombuffer(raw, dtype=np.int16).reshape(-1, max_characters_per_token).astype(np.int64) + 1


def as_tokens(sentence: Sequence[str], where: str) -> list[str]:
    """``sentence`` as a list of tokens. A str is refused: iterating it would make every character a token."""
    if isinstance(sentence, str):
        raise TypeError(
            f"{where}: got the str {_clip(sentence)!r} where a list of tokens is expected; "
            f"split it first, e.g. {_clip(sentence)!r}.split()"
        )
    return list(sentence)


def token_lists(sentences: Iterable[Sequence[str]], where: str) -> Iterator[list[str]]:
    """Each of ``sentences`` as a list of tokens, lazily (:func:`as_tokens`); a str as the whole batch is refused
    at once."""
    if isinstance(sentences, str):
        raise TypeError(
            f"{where}: got the str {_clip(sentences)!r} where a list of tokenised sentences is expected; "
            f"pass e.g. [{_clip(sentences)!r}.split()]"
        )
    return (as_tokens(s, f"{where}, sentence {i}") for i, s in enumerate(sentences))


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def batch_to_ids(
    sentences: Sequence[Sequence[str]],
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN,
    add_sentence_boundaries: bool = False,
) -> torch.Tensor:
    """Character ids for a batch of tokenised sentences, shifted by +1 so that 0 pads.

    Args:
        sentences: B lists of tokens (any Unicode; an empty list is an all-padding row); a str is refused.
        max_characters_per_token: W, 50 for every published model.
        add_sentence_boundaries: wrap every sentence in ``<S> ... </S>`` (the bilm-tf ``Batcher`` layout).
            Leave False for :class:`~elmo.modules.elmo.Elmo`, which adds them itself (the AllenNLP layout).

    Returns:
        LongTensor (B, T, W) where T is the longest sentence (+2 with boundaries).
    """
    sentences = list(token_lists(sentences, "batch_to_ids"))
    if add_sentence_boundaries:
        sentences = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    max_len = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), max_len, max_characters_per_token), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        out[b, : len(sentence)] = shifted_char_ids(sentence, max_characters_per_token)  # padding rows stay 0
    return torch.from_numpy(out)
