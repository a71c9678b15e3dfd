"""Word-sense probe (paper Table 5, here on the Senseval lexical sample): per word and per biLM layer, the sense of
the target word from its frozen vector, by the nearest sense centroid (the paper's method) and by a linear probe.

Split (fixed, the same for every model): per word (lexelt item), in file order, every 5th instance (the 5th, 10th,
...) is a test instance, the others train (80/20). Each instance's whole context is embedded as one sequence (zero
initial states), and only the target word's vectors are kept.

- centroid: the mean vector of each sense's training uses; a test use takes the sense whose centroid has the
  highest cosine similarity (the paper averages per sense and takes the nearest; it does not name the distance).
- linear: a softmax probe per word (:mod:`elmo.probing.linear`), per layer and on a learned mix of all layers.
- baseline: the word's most frequent training sense.

Every test instance gets one prediction, so precision = recall = F1 = accuracy; reported per word and over all test
instances (micro).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter

import numpy as np

from elmo.embedding.embedder import Embedder
from elmo.errors import InputFileError
from elmo.probing.activations import compute_activations
from elmo.probing.linear import ProbeSettings, accuracy, train_probe
from elmo.probing.senseval import Instance, read_senseval_data

log = logging.getLogger(__name__)

TEST_EVERY = 5


def split(instances: list[Instance]) -> tuple[list[Instance], list[Instance]]:
    """(train, test): every ``TEST_EVERY``-th instance in file order is a test instance."""
    test = [x for i, x in enumerate(instances) if i % TEST_EVERY == TEST_EVERY - 1]
    train = [x for i, x in enumerate(instances) if i % TEST_EVERY != TEST_EVERY - 1]
    return train, test


def centroid_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, num_senses: int) -> np.ndarray:
    """(N, D) training vectors with senses, (M, D) test vectors -> (M,) sense of the nearest centroid by cosine."""
    centroids = np.stack([train_x[train_y == s].mean(axis=0) for s in range(num_senses)])  # (S, D)
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    unit = test_x / np.maximum(np.linalg.norm(test_x, axis=1, keepdims=True), 1e-12)
    return (unit @ centroids.T).argmax(axis=1)  # (M,); ties: the first sense in sorted order


def probe_wsd(embedder: Embedder, data: str | os.PathLike, settings: ProbeSettings | None = None,
              per_instance: bool = False) -> dict:
    """Accuracy per word, method and layer on the fixed split of ``data`` (a Senseval file or directory).

    ``per_instance``: also ``"correct"`` (method -> layer -> (test instances,) bool array, the words' test
    instances one after another), for paired tests between layers (not JSON-ready)."""
    settings = settings or ProbeSettings()
    started = time.perf_counter()
    words = read_senseval_data(data)
    per_word: dict[str, dict] = {}
    correct: dict[str, dict[str, list[np.ndarray]]] = {"centroid": {}, "linear": {}}
    baseline_correct = total = 0
    for word, instances in words.items():
        train, test = split(instances)
        if not train or not test:
            raise InputFileError(f"{data}: word {word!r} has {len(instances)} instances; the split needs at least "
                                 f"{TEST_EVERY}")
        senses = sorted({x.sense for x in train})
        index = {s: i for i, s in enumerate(senses)}
        train_y = np.array([index[x.sense] for x in train], dtype=np.int64)
        test_y = np.array([index.get(x.sense, -1) for x in test], dtype=np.int64)
        log.info("embedding the %d contexts of %s", len(instances), word)
        vectors = compute_activations(embedder, [x.tokens for x in train + test], [[x.head] for x in train + test])
        train_x, test_x = vectors.vectors[: len(train)], vectors.vectors[len(train):]  # (N, L+1, 2P)
        most_frequent = Counter(train_y.tolist()).most_common(1)[0][0]
        result = {"train": len(train), "test": len(test), "senses": len(senses),
                  "baseline_most_frequent_sense": accuracy(np.full(len(test), most_frequent), test_y),
                  "centroid": {}, "linear": {}, "mix_weights": None}
        for layer in range(train_x.shape[1]):
            predicted = centroid_predict(train_x[:, layer], train_y, test_x[:, layer], len(senses))
            result["centroid"][str(layer)] = accuracy(predicted, test_y)
            correct["centroid"].setdefault(str(layer), []).append(predicted == test_y)
        for name in [*map(str, range(train_x.shape[1])), "mix"]:
            layers = slice(None) if name == "mix" else slice(int(name), int(name) + 1)
            probe = train_probe(train_x[:, layers], train_y, len(senses), settings)
            predicted = probe.predict(test_x[:, layers])
            result["linear"][name] = accuracy(predicted, test_y)
            correct["linear"].setdefault(name, []).append(predicted == test_y)
            if name == "mix":
                result["mix_weights"] = probe.mix_weights()
        log.info("WSD %s: centroid %s, linear %s", word, result["centroid"], result["linear"])
        per_word[word] = result
        baseline_correct += int(round(result["baseline_most_frequent_sense"] * len(test)))
        total += len(test)
    correct_arrays = {method: {k: np.concatenate(v) for k, v in layers.items()} for method, layers in correct.items()}
    overall = {method: {k: float(v.mean()) for k, v in layers.items()} for method, layers in correct_arrays.items()}
    result = {
        "task": "wsd", "data": str(data), "split": f"every {TEST_EVERY}th instance of each word (file order) is test",
        "test_instances": total, "overall": overall | {"baseline_most_frequent_sense": baseline_correct / total},
        "words": per_word, "settings": dataclasses.asdict(settings),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if per_instance:
        result["correct"] = correct_arrays
    return result
