"""Task scores: span F1 for tagging (seqeval, CoNLL-2003's conlleval definition) and accuracy for classification."""

from __future__ import annotations

from collections.abc import Sequence

from elmo.runtime.extras import require


def conll_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Micro-averaged entity F1 in [0, 100], as conlleval computes it."""
    f1_score = require("seqeval.metrics", "tasks", "the ner span F1").f1_score

    return 100.0 * float(f1_score([list(g) for g in gold], [list(p) for p in predicted]))


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Percentage of exact label matches."""
    if not gold:
        return 0.0
    return 100.0 * sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)
