"""Word vocabularies: one token per line, with the special tokens ``<S>``, ``</S>`` and ``<UNK>``.

Same reading rules as the original ``Vocabulary``: line i is word id i (a ``!!!MAXTERMID`` line is skipped),
surrounding whitespace is stripped. Training needs the three special tokens; token-input inference does not.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from elmo.errors import InputFileError
from elmo.runtime.text_files import read_text_lines
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, token_lists

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


class Vocabulary:
    """Bidirectional word <-> id map. Ids are positions in the file (unshifted)."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        self.word_to_index = {word: i for i, word in enumerate(self.words)}
        self.bos = self.word_to_index.get(BOS_TOKEN)
        self.eos = self.word_to_index.get(EOS_TOKEN)
        self.unk = self.word_to_index.get(UNK_TOKEN)

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def from_file(cls, path: str | os.PathLike, require_special_tokens: bool = False) -> Vocabulary:
        words = [word for _, line in read_text_lines(path, what="vocabulary file")
                 if (word := line.strip()) != "!!!MAXTERMID"]
        vocab = cls(words)
        if require_special_tokens:
            for position, token in enumerate(SPECIAL_TOKENS):
                if vocab.word_to_index.get(token) != position:
                    raise InputFileError(
                        f"{path}: line {position + 1} must be {token} (vocabularies start with <S>, </S>, <UNK>)"
                    )
        return vocab

    def save(self, path: str | os.PathLike) -> None:
        from elmo.runtime.atomic_files import write_text_atomic

        write_text_atomic(path, "".join(f"{w}\n" for w in self.words))

    def index(self, word: str) -> int:
        """Id of ``word``; unknown words map to ``<UNK>`` (an error if the vocabulary has none)."""
        found = self.word_to_index.get(word)
        if found is not None:
            return found
        if self.unk is None:
            raise KeyError(f"word {word!r} is not in the vocabulary, which has no {UNK_TOKEN}")
        return self.unk


def batch_to_token_ids(
    sentences: Sequence[Sequence[str]], vocab: Vocabulary, add_sentence_boundaries: bool = False
) -> torch.Tensor:
    """Word ids for a token-input biLM, +1 shifted so that 0 pads: (B, T) LongTensor; a str is refused."""
    sentences = list(token_lists(sentences, "batch_to_token_ids"))
    if add_sentence_boundaries:
        sentences = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    max_len = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), max_len), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        out[b, : len(sentence)] = [vocab.index(w) + 1 for w in sentence]
    return torch.from_numpy(out)
