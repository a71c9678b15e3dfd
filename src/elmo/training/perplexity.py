"""Held-out perplexity of a biLM language model with the full softmax (``elmo perplexity``).

Like bilm-tf ``run_test.py`` and the standard PTB protocol, the file is read as a continuous stream: the LSTM state
carries from sentence to sentence, and each line of n words gives n + 1 predictions per direction::

    forward:   inputs <S> w1 ... wn      targets w1 ... wn </S>
    backward:  inputs </S> wn ... w1     targets wn ... w1 <S>

With ``rows`` > 1 the file is cut into that many contiguous pieces (at sentence boundaries) run side by side,
each a continuous stream; ``rows=1`` is one stream over the whole file. That is ``initial_state="carry"`` (the
default): the state of each sentence's start is where the previous one ended. With ``"zero"`` or ``"warm"``
(:mod:`elmo.modules.initial_state`) every sentence is scored on its own, starting from zeros or from the model's warm
state, as a stateless embedder runs it (``rows`` is then unused).

Reported: the perplexity of each direction, their geometric mean exp((L_f + L_b) / 2) (what the original printed)
and their arithmetic mean (what the paper's wording suggests), and the number of predictions per direction.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from elmo.devices import checked_device
from elmo.errors import ElmoError
from elmo.formats.warm_state import warm_state_for
from elmo.modules.language_model import BiLMLanguageModel
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.settings import SettingError
from elmo.shared_settings import INITIAL_STATES
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids
from elmo.text.sentences import read_sentences
from elmo.text.vocab import Vocabulary
from elmo.training.run_files import load_language_model


@dataclass
class PerplexityResult:
    forward: float
    backward: float
    geometric_mean: float
    arithmetic_mean: float
    tokens: int
    """Predictions per direction: words + one end of sentence per line."""
    sentences: int

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """The report ``elmo perplexity`` prints."""
        return "\n".join([
            f"forward perplexity:   {self.forward:.3f}",
            f"backward perplexity:  {self.backward:.3f}",
            f"geometric mean:       {self.geometric_mean:.3f}   (exp of the mean loss; what bilm-tf printed)",
            f"arithmetic mean:      {self.arithmetic_mean:.3f}",
            f"tokens:               {self.tokens} per direction ({self.sentences} sentences, "
            f"{self.tokens - self.sentences} words + {self.sentences} sentence ends)",
        ])


def model_perplexity(
    model: str | os.PathLike, data: str | os.PathLike, vocab: str | os.PathLike | None = None, rows: int = 1,
    unroll_steps: int = 20, device: torch.device | str | None = None, initial_state: str = "carry",
) -> PerplexityResult:
    """Perplexity of a run directory or an export directory (``model``) on a text file (``data``), on ``device``
    (default: CUDA when available, else the CPU).

    ``vocab`` defaults to the vocab.txt stored with the model; it must have one word per softmax row.
    """
    if rows < 1:
        raise SettingError("rows", f"must be >= 1, got {rows}")
    device = checked_device(device)
    lm, stored_vocab = load_language_model(model, "perplexity")
    words = Vocabulary.from_file(vocab, require_special_tokens=True) if vocab else stored_vocab
    if words is None:
        raise ElmoError(f"{model}: no vocab.txt stored with the model; pass --vocab")
    if len(words) != lm.softmax.vocab_size:
        rows_needed = lm.softmax.vocab_size
        raise ElmoError(f"{vocab or model}: {len(words)} words, but the model's softmax has {rows_needed} rows")
    sentences = [line.tokens for line in read_sentences(data, skip_blank=True)]
    if not sentences:
        raise ElmoError(f"{data}: no sentences")
    return perplexity(lm.to(device), words, sentences, rows=rows, unroll_steps=unroll_steps, device=device,
                      initial_state=initial_state)


def split_rows(sentences: Sequence[Sequence[str]], rows: int) -> list[list[Sequence[str]]]:
    """Contiguous pieces of about equal token counts (never more pieces than sentences)."""
    rows = max(1, min(rows, len(sentences)))
    sizes = np.cumsum([len(s) + 1 for s in sentences])
    total = sizes[-1] if len(sizes) else 0
    pieces: list[list[Sequence[str]]] = [[] for _ in range(rows)]
    for i, sentence in enumerate(sentences):
        pieces[min(rows - 1, int((sizes[i] - 1) * rows // max(total, 1)))].append(sentence)
    return [p for p in pieces if p]


def _direction_stream(sentences: Sequence[Sequence[str]], backward: bool) -> tuple[list[str], list[str]]:
    inputs: list[str] = []
    targets: list[str] = []
    for sentence in sentences:
        tokens = [BOS_TOKEN, *sentence, EOS_TOKEN]
        if backward:
            tokens.reverse()
        inputs.extend(tokens[:-1])
        targets.extend(tokens[1:])
    return inputs, targets


@torch.no_grad()
def perplexity(
    lm: BiLMLanguageModel,
    vocab: Vocabulary,
    sentences: Sequence[Sequence[str]],
    rows: int = 1,
    unroll_steps: int = 20,
    device: torch.device | str = "cpu",
    softmax_positions: int = 1024,
    initial_state: str = "carry",
    sentences_per_batch: int = 256,
) -> PerplexityResult:
    """Full-softmax perplexity of both directions over ``sentences`` (see the module docstring).

    ``softmax_positions`` bounds how many predictions are scored in one product: memory is about
    ``softmax_positions x V`` floats. ``sentences_per_batch``: rows run side by side with ``zero`` or ``warm``.
    """
    if initial_state not in INITIAL_STATES:
        raise SettingError("initial_state", f"must be one of {INITIAL_STATES}, got {initial_state!r}")
    was_training = lm.training
    lm.eval()
    words = sorted({w for s in sentences for w in s} | {BOS_TOKEN, EOS_TOKEN})
    word_index = {w: i for i, w in enumerate(words)}
    table = _encode_words(lm, words, device)  # (U, P)
    start = None  # carry and zero: the streams start from zeros
    if initial_state == "carry":
        groups = [split_rows(sentences, rows)]  # one group of contiguous pieces, each a continuous stream
    else:  # every sentence is a stream of its own; similar lengths side by side
        by_length = sorted(sentences, key=len)
        groups = [[[s] for s in by_length[i : i + sentences_per_batch]]
                  for i in range(0, len(by_length), sentences_per_batch)]
        if initial_state == "warm":
            with small_ops_on_one_thread(device):  # an entry point: the CPU thread policy of inference
                start = warm_state_for(lm.bilm, lambda ws: _encode_words(lm, ws, device), (BOS_TOKEN, EOS_TOKEN))
    losses, count = [], 0
    for backward in (False, True):
        total, count = 0.0, 0
        for pieces in groups:
            streams = [_direction_stream(p, backward) for p in pieces]
            inputs = [np.array([word_index[w] for w in s[0]], dtype=np.int64) for s in streams]
            targets = [np.array([vocab.index(w) for w in s[1]], dtype=np.int64) for s in streams]
            part, n = _stream_loss(
                lm, int(backward), table, inputs, targets, unroll_steps, device, softmax_positions, start
            )
            total, count = total + part, count + n
        losses.append(total / max(count, 1))
    lm.train(was_training)
    fwd, bwd = math.exp(losses[0]), math.exp(losses[1])
    return PerplexityResult(fwd, bwd, math.exp(0.5 * (losses[0] + losses[1])), 0.5 * (fwd + bwd), count, len(sentences))


def _encode_words(lm: BiLMLanguageModel, words: list[str], device, chunk: int = 4096) -> torch.Tensor:
    width = lm.bilm.token_encoder.config.max_characters_per_token
    out = []
    for start in range(0, len(words), chunk):
        ids = shifted_char_ids(words[start : start + chunk], width)  # (n, W)
        out.append(lm.encode_words(torch.from_numpy(ids).to(device)))
    return torch.cat(out)


def _stream_loss(
    lm: BiLMLanguageModel, direction: int, table: torch.Tensor, inputs: list[np.ndarray],
    targets: list[np.ndarray], unroll_steps: int, device, softmax_positions: int, start=None,
) -> tuple[float, int]:
    """Summed cross-entropy over R padded streams run side by side in windows of T, state carried; every stream
    starts from zeros, or from ``start`` (one row's biLM state, h (2, L, 1, P) and c (2, L, 1, C)).

    The LSTM must go window by window, but the softmax need not: top-layer states are collected until
    ``softmax_positions`` of them are waiting, then scored in one product. With one stream a window is only T
    positions, and scoring each alone would read the whole (V, P) softmax matrix once per 20 predictions.
    """
    rows, longest = len(inputs), max(len(x) for x in inputs)
    index = np.zeros((rows, longest), dtype=np.int64)
    target = np.zeros((rows, longest), dtype=np.int64)
    mask = np.zeros((rows, longest), dtype=bool)
    for r, (x, y) in enumerate(zip(inputs, targets)):
        index[r, : len(x)], target[r, : len(y)], mask[r, : len(x)] = x, y, True
    index_t, target_t, mask_t = (torch.from_numpy(a).to(device) for a in (index, target, mask))
    h, c = lm.bilm.zero_state(rows)
    if start is not None:
        h, c = (x.to(h.device, h.dtype).expand_as(zero).contiguous() for x, zero in zip(start, (h, c)))
    state = (h[direction], c[direction])
    total, count = 0.0, 0
    waiting: list[tuple[torch.Tensor, torch.Tensor]] = []  # (n, P) top states and (n,) their targets
    waiting_positions = 0
    for start in range(0, longest, unroll_steps):
        window = slice(start, start + unroll_steps)
        m = mask_t[:, window]  # (R, t)
        x = table[index_t[:, window]] * m.unsqueeze(-1).to(table.dtype)  # (R, t, P)
        with small_ops_on_one_thread(device):  # an entry point: the CPU thread policy of inference
            top, state = lm.direction_hidden(direction, x, state, None if bool(m.all()) else m)
        waiting.append((top[m], target_t[:, window][m]))
        waiting_positions += len(waiting[-1][1])
        if waiting_positions >= softmax_positions or start + unroll_steps >= longest:
            hidden, wanted = torch.cat([w[0] for w in waiting]), torch.cat([w[1] for w in waiting])
            total += float(lm.softmax.full_loss(hidden, wanted, reduction="sum"))
            count += len(wanted)
            waiting, waiting_positions = [], 0
    return total, count
