"""Part-of-speech probe (paper Table 6): a linear classifier per biLM layer, and on the learned mix, from a CoNLL-U
training file to a CoNLL-U test file; accuracy over the test file's syntactic words.

Each file is embedded once (sentence by sentence, zero initial states, the FORM column as tokens); every probe
trains on the same frozen vectors with the same :class:`ProbeSettings`. A tag the training file never shows counts
as an error. A baseline from the training file is reported beside the layers: each word form's most frequent tag
(the overall most frequent tag for unseen forms).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter, defaultdict
from itertools import islice

import numpy as np

from elmo.embedding.embedder import Embedder
from elmo.errors import InputFileError
from elmo.probing.activations import compute_activations
from elmo.probing.linear import ProbeSettings, accuracy, train_probe
from elmo.runtime.text_files import display_name
from elmo.text.conllu import TAGSETS, Sentence, read_conllu

log = logging.getLogger(__name__)


def read_tagged(path: str | os.PathLike, tagset: str, limit: int | None = None) -> list[Sentence]:
    """The first ``limit`` (all: None) sentences of a CoNLL-U file; an error if a word has no tag (``_``)."""
    sentences = list(islice(read_conllu(path), limit))
    for sentence in sentences:
        for word, tag in zip(sentence.words, sentence.tags(tagset)):
            if tag in ("", "_"):
                raise InputFileError(f"{display_name(path)}, line {word.line}: no {tagset.upper()} tag ('{tag}') "
                                     f"for '{word.form}'" + ("; try --tagset upos" if tagset == "xpos" else ""))
    if not sentences:
        raise InputFileError(f"{display_name(path)}: no sentences")
    return sentences


def _word_tag_baseline(train: list[Sentence], test: list[Sentence], tagset: str) -> float:
    counts: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for sentence in train:
        for form, tag in zip(sentence.forms, sentence.tags(tagset)):
            counts[form][tag] += 1
            overall[tag] += 1
    fallback = overall.most_common(1)[0][0]
    gold = [tag for s in test for tag in s.tags(tagset)]
    guess = [counts[f].most_common(1)[0][0] if f in counts else fallback for s in test for f in s.forms]
    return accuracy(np.array(guess), np.array(gold))


def probe_pos(
    embedder: Embedder,
    train_path: str | os.PathLike,
    test_path: str | os.PathLike,
    tagset: str = "upos",
    max_train_sentences: int | None = None,
    settings: ProbeSettings | None = None,
    per_word: bool = False,
) -> dict:
    """Accuracy per layer ("0" = token layer, "1", ..., "mix") on ``test_path``; a JSON-ready dict.

    ``per_word``: also ``"correct"`` (layer -> (test words,) bool array) and ``"sentence"`` (each test word's
    sentence index), for paired tests between layers (not JSON-ready)."""
    if tagset not in TAGSETS:
        raise ValueError(f"tagset must be one of {TAGSETS}, got {tagset!r}")
    settings = settings or ProbeSettings()
    started = time.perf_counter()
    train = read_tagged(train_path, tagset, max_train_sentences)
    test = read_tagged(test_path, tagset)
    tags = sorted({t for s in train for t in s.tags(tagset)})
    index = {t: i for i, t in enumerate(tags)}
    train_y = np.array([index[t] for s in train for t in s.tags(tagset)], dtype=np.int64)
    test_y = np.array([index.get(t, -1) for s in test for t in s.tags(tagset)], dtype=np.int64)
    log.info("embedding %d training and %d test sentences", len(train), len(test))
    train_x = compute_activations(embedder, [s.forms for s in train]).vectors  # (N, L+1, 2P)
    test_x = compute_activations(embedder, [s.forms for s in test]).vectors
    embedded = time.perf_counter()
    results: dict[str, float] = {}
    correct: dict[str, np.ndarray] = {}
    mix_weights = None
    for name in [*map(str, range(train_x.shape[1])), "mix"]:
        layers = slice(None) if name == "mix" else slice(int(name), int(name) + 1)
        probe = train_probe(train_x[:, layers], train_y, len(tags), settings)
        predicted = probe.predict(test_x[:, layers])
        results[name] = accuracy(predicted, test_y)
        correct[name] = predicted == test_y
        mix_weights = probe.mix_weights() if name == "mix" else mix_weights
        log.info("POS probe, layer %s: accuracy %.4f", name, results[name])
    result = {
        "task": "pos", "tagset": tagset, "train": str(train_path), "test": str(test_path),
        "train_sentences": len(train), "train_words": int(len(train_y)), "test_sentences": len(test),
        "test_words": int(len(test_y)), "tags": len(tags), "unseen_tag_words": int((test_y < 0).sum()),
        "accuracy": results, "mix_weights": mix_weights,
        "baseline_most_frequent_tag": _word_tag_baseline(train, test, tagset),
        "settings": dataclasses.asdict(settings),
        "seconds": {"embed": round(embedded - started, 1), "total": round(time.perf_counter() - started, 1)},
    }
    if per_word:
        result["correct"] = correct
        result["sentence"] = np.repeat(np.arange(len(test)), [len(s.forms) for s in test])
    return result
