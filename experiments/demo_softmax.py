"""Fit the shipped demo biLM's softmax again, the biLM frozen, so the demo is a language model offline.

The demo's training run (src/elmo/pretrained/demo/README.md) did not keep its softmax. Refitting it on the same
text, with the biLM's weights unchanged, gives ``elmo perplexity``, ``elmo substitutes`` and ``elmo finetune`` a
softmax for ``--model demo`` without changing a single demo vector.

How: the training text is read as the trainer reads it, 64 contiguous streams, state carried, windows of 20; the
top-layer states of both directions (dropout off) and their targets are collected once; then the full softmax
(V x P weights + bias, shared by both directions as in bilm-tf) is fitted by full cross-entropy with Adam. The last
2% of the positions are held out to choose the epoch; the held-out book (A Christmas Carol) is only scored at the
end, with ``elmo perplexity``'s one-stream protocol.

    python experiments/demo_softmax.py --data ../shared/data/lm/sample --out exports/demo-softmax
    cp exports/demo-softmax/softmax.hdf5 exports/demo-softmax/vocab.txt src/elmo/pretrained/demo/
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections import Counter
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo.formats.model_files import load_bilm
from elmo.formats.published import demo_model_dir
from elmo.modules.language_model import BiLMLanguageModel
from elmo.modules.softmax import Softmax
from elmo.runtime.atomic_files import write_atomic
from elmo.text.sentences import read_sentences
from elmo.text.vocab import Vocabulary
from elmo.training.perplexity import _direction_stream, _encode_words, perplexity, split_rows
from elmo.training.vocab_counts import vocabulary_from_counts


@torch.no_grad()
def top_states(lm: BiLMLanguageModel, vocab: Vocabulary, sentences, rows: int, unroll: int):
    """(N, P) top-layer states of both directions over ``rows`` carried streams, and their (N,) target ids."""
    words = sorted({w for s in sentences for w in s} | set(vocab.words[:3]))
    word_index = {w: i for i, w in enumerate(words)}
    table = _encode_words(lm, words, "cpu")  # (U, P)
    hidden, targets = [], []
    for direction in (0, 1):
        streams = [_direction_stream(piece, bool(direction)) for piece in split_rows(sentences, rows)]
        longest = max(len(s[0]) for s in streams)
        index = np.zeros((len(streams), longest), dtype=np.int64)
        target = np.zeros((len(streams), longest), dtype=np.int64)
        mask = np.zeros((len(streams), longest), dtype=bool)
        for r, (inputs, wanted) in enumerate(streams):
            index[r, : len(inputs)] = [word_index[w] for w in inputs]
            target[r, : len(wanted)] = [vocab.index(w) for w in wanted]
            mask[r, : len(inputs)] = True
        index_t, target_t, mask_t = map(torch.from_numpy, (index, target, mask))
        h, c = lm.bilm.zero_state(len(streams))
        state = (h[direction], c[direction])
        for start in range(0, longest, unroll):
            window = slice(start, start + unroll)
            m = mask_t[:, window]  # (R, t)
            x = table[index_t[:, window]] * m.unsqueeze(-1).float()  # (R, t, P)
            top, state = lm.direction_hidden(direction, x, state, None if bool(m.all()) else m)
            hidden.append(top[m])
            targets.append(target_t[:, window][m])
    return torch.cat(hidden), torch.cat(targets)


def fit(softmax: Softmax, hidden, targets, epochs: int, batch: int, lr: float, seed: int) -> tuple[int, list]:
    """Adam on the full cross-entropy; keeps the epoch with the lowest loss on the last 2% of positions."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(targets), generator=generator)
    held = order[: len(order) // 50]
    train = order[len(order) // 50 :]
    optimizer = torch.optim.Adam(softmax.parameters(), lr=lr)
    best, best_state, history = math.inf, None, []
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        for part in train[torch.randperm(len(train), generator=generator)].split(batch):
            loss = softmax.full_loss(hidden[part], targets[part])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            held_loss = sum(float(softmax.full_loss(hidden[p], targets[p], reduction="sum")) for p in held.split(8192))
        held_loss /= len(held)
        history.append({"epoch": epoch, "held_out_loss": held_loss, "seconds": time.perf_counter() - started})
        print(json.dumps(history[-1]), flush=True)
        if held_loss < best:
            best, best_state = held_loss, copy.deepcopy(softmax.state_dict())
    softmax.load_state_dict(best_state)
    return min(history, key=lambda h: h["held_out_loss"])["epoch"], history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with sample.train.txt and sample.valid.txt")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    train = [line.tokens for line in read_sentences(args.data / "sample.train.txt", skip_blank=True)]
    valid = [line.tokens for line in read_sentences(args.data / "sample.valid.txt", skip_blank=True)]
    vocab = vocabulary_from_counts(Counter(w for s in train for w in s), min_count=2)  # `elmo vocab --min-count 2`
    bilm = load_bilm(demo_model_dir()).eval()
    for p in bilm.parameters():
        p.requires_grad_(False)
    softmax = Softmax(len(vocab), bilm.token_encoder.output_dim)
    lm = BiLMLanguageModel(bilm, softmax, num_sampled=None).eval()
    started = time.perf_counter()
    hidden, targets = top_states(lm, vocab, train, rows=64, unroll=20)
    print(f"{len(targets)} positions, {len(vocab)} words, states in {time.perf_counter() - started:.0f} s", flush=True)
    counts = torch.bincount(targets, minlength=len(vocab)).float() + 1
    with torch.no_grad():  # start from the unigram distribution
        softmax.weight.zero_()
        softmax.bias.copy_((counts / counts.sum()).log())
    epoch, history = fit(softmax, hidden, targets, args.epochs, args.batch, args.lr, args.seed)
    result = perplexity(lm, vocab, valid, rows=1)
    args.out.mkdir(parents=True, exist_ok=True)

    def write(tmp: str) -> None:  # float16 like the demo's weights; read back as float32
        with h5py.File(tmp, "w") as f:
            f.create_dataset("softmax/W", data=softmax.weight.detach().half().numpy())
            f.create_dataset("softmax/b", data=softmax.bias.detach().half().numpy())

    write_atomic(args.out / "softmax.hdf5", write)
    vocab.save(args.out / "vocab.txt")
    with h5py.File(args.out / "softmax.hdf5", "r") as f:  # what ships is float16: score that
        with torch.no_grad():
            softmax.weight.copy_(torch.from_numpy(f["softmax/W"][...]).float())
            softmax.bias.copy_(torch.from_numpy(f["softmax/b"][...]).float())
    shipped = perplexity(lm, vocab, valid, rows=1)
    report = {"chosen_epoch": epoch, "history": history, "valid_float32": result.to_dict(),
              "valid_float16": shipped.to_dict(),
              "settings": vars(args) | {"data": str(args.data), "out": str(args.out)}}
    (args.out / "fit.json").write_text(json.dumps(report, indent=1) + "\n")
    print(shipped.summary())


if __name__ == "__main__":
    main()
