"""Lexical substitutes from a biLM language model (``elmo substitutes``): for each token, the words the forward LM
finds most probable at its position given the words to its left, and those the backward LM finds given the words to
its right, as simple_elmo's ``get_elmo_substitutes`` offers for bilm-tf checkpoints.

For a sentence w1 ... wn, run as ``<S> w1 ... wn </S>`` from zero states (each sentence on its own)::

    forward,  at w_i:  P(. | <S> w1 ... w_{i-1})    the forward top-layer state at position i - 1
    backward, at w_i:  P(. | w_{i+1} ... wn </S>)   the backward top-layer state at position i + 1

Probabilities are the full softmax over the model's vocabulary (the softmax the model was trained with, from
``softmax.hdf5`` of an export or a run's checkpoint). ``<S>`` and ``</S>`` are never proposed (simple_elmo's default
``nodelimiters=True``); the other words keep their probabilities, not renormalised. ``<UNK>`` is a word like any other.
Candidates come most probable first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import torch
from torch.nn import functional as F

from elmo.devices import checked_device
from elmo.errors import ElmoError
from elmo.modules.language_model import BiLMLanguageModel
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.settings import SettingError
from elmo.text.char_encoding import batch_to_ids, token_lists
from elmo.text.sentences import read_sentences
from elmo.text.vocab import Vocabulary
from elmo.training.run_files import load_language_model

SOFTMAX_ELEMENTS = 1 << 24
"""Logits scored in one product: (positions x V) floats, 64 MB; a published vocabulary has about 800k words."""


@dataclass(frozen=True)
class TokenSubstitutes:
    """The candidates at one token: (word, probability) pairs, most probable first."""

    word: str
    forward: list[tuple[str, float]]
    """Given the left context."""
    backward: list[tuple[str, float]]
    """Given the right context."""

    def to_dict(self) -> dict:
        return {"word": self.word, "forward": [list(c) for c in self.forward],
                "backward": [list(c) for c in self.backward]}

    def summary(self) -> str:
        """One line of ``elmo substitutes``: the token, then each direction's candidates."""
        def shown(candidates: list[tuple[str, float]]) -> str:
            return "  ".join(f"{word} {p:.4g}" for word, p in candidates)  # words hold no spaces; "," may be one
        return f"{self.word}\tforward: {shown(self.forward)}\tbackward: {shown(self.backward)}"


def lm_substitutes(
    lm: BiLMLanguageModel, vocab: Vocabulary, sentences: Iterable[Sequence[str]], top_k: int = 10,
    batch_size: int = 32, device: torch.device | str = "cpu",
) -> Iterator[list[TokenSubstitutes]]:
    """Per sentence, in input order and lazily (``batch_size`` sentences run at a time): one
    :class:`TokenSubstitutes` per token (an empty sentence gives an empty list). ``vocab`` names the softmax rows
    (row i = word i). The arguments are checked at the call, not at the first result."""
    if top_k < 1:
        raise SettingError("top_k", f"must be >= 1, got {top_k}")
    if batch_size < 1:
        raise SettingError("batch_size", f"must be >= 1, got {batch_size}")
    if len(vocab) != lm.softmax.vocab_size:
        raise ElmoError(f"the vocabulary has {len(vocab)} words, but the model's softmax has "
                        f"{lm.softmax.vocab_size} rows")
    return _substitutes(lm.eval(), vocab, token_lists(sentences, "lm_substitutes"), top_k, batch_size, device)


@torch.no_grad()
def _substitutes(
    lm: BiLMLanguageModel, vocab: Vocabulary, sentences: Iterator[list[str]], top_k: int, batch_size: int,
    device: torch.device | str,
) -> Iterator[list[TokenSubstitutes]]:
    banned = [i for i in (vocab.bos, vocab.eos) if i is not None]
    top_k = min(top_k, len(vocab) - len(banned))
    width = lm.bilm.token_encoder.config.max_characters_per_token
    while batch := list(islice(sentences, batch_size)):
        ids = batch_to_ids(batch, width, add_sentence_boundaries=True).to(device)  # (B, T+2, W)
        with small_ops_on_one_thread(ids.device):  # an entry point: the CPU thread policy of inference
            top = lm.bilm(ids).layers[-1]  # (B, T+2, 2P): [forward; backward]
        dim = top.shape[-1] // 2
        rows = torch.tensor([b for b, s in enumerate(batch) for _ in s], dtype=torch.long, device=top.device)
        positions = torch.tensor([i for s in batch for i in range(1, len(s) + 1)], dtype=torch.long,
                                 device=top.device)
        forward = top[rows, positions - 1, :dim]  # (N, P): the state after <S> w1 .. w_{i-1}
        backward = top[rows, positions + 1, dim:]  # (N, P): the state after </S> wn .. w_{i+1}
        found = zip(*(_top_words(lm, vocab, h, top_k, banned) for h in (forward, backward)))
        for sentence in batch:
            yield [TokenSubstitutes(word, *next(found)) for word in sentence]


def model_substitutes(
    model: str | os.PathLike, sentences: Iterable[Sequence[str]], top_k: int = 10,
    vocab: str | os.PathLike | None = None, batch_size: int = 32, device: torch.device | str | None = None,
) -> Iterator[list[TokenSubstitutes]]:
    """:func:`lm_substitutes` of a run directory or an export directory (``model``, loaded at the call), on
    ``device`` (default: CUDA when available, else the CPU).

    ``vocab`` defaults to the vocab.txt stored with the model; it must have one word per softmax row.
    """
    device = checked_device(device)
    lm, stored_vocab = load_language_model(model, "substitutes")
    words = Vocabulary.from_file(vocab) if vocab else stored_vocab
    if words is None:
        raise ElmoError(f"{model}: no vocab.txt stored with the model; pass --vocab")
    if len(words) != lm.softmax.vocab_size:
        raise ElmoError(f"{vocab or model}: {len(words)} words, but the model's softmax has "
                        f"{lm.softmax.vocab_size} rows")
    return lm_substitutes(lm.to(device), words, sentences, top_k, batch_size, device)


def read_tokenised_lines(path: str | os.PathLike) -> Iterator[list[str]]:
    """The whitespace-split tokens of every line of ``path`` (blank lines included, as empty sentences)."""
    for line in read_sentences(path, what="input file"):
        yield line.tokens


def _top_words(
    lm: BiLMLanguageModel, vocab: Vocabulary, hidden: torch.Tensor, top_k: int, banned: list[int],
) -> list[list[tuple[str, float]]]:
    """hidden (N, P) -> per row the ``top_k`` most probable words (never a banned id) and their probabilities."""
    chunk = max(1, SOFTMAX_ELEMENTS // lm.softmax.vocab_size)
    out: list[list[tuple[str, float]]] = []
    for start in range(0, hidden.shape[0], chunk):
        logits = F.linear(hidden[start : start + chunk].float(), lm.softmax.weight.float(),
                          lm.softmax.bias.float())  # (n, V)
        normaliser = torch.logsumexp(logits, dim=-1, keepdim=True)  # over the whole vocabulary
        logits[:, banned] = float("-inf")
        best, ids = logits.topk(top_k, dim=-1)  # sorted, most probable first
        probabilities = (best - normaliser).exp()
        for row_ids, row_p in zip(ids.tolist(), probabilities.tolist()):
            out.append([(vocab.words[i], p) for i, p in zip(row_ids, row_p)])
    return out
