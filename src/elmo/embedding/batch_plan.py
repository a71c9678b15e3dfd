"""Grouping sentences into batches: by length under a token budget (stateless) or in order (stateful).

Stateless output does not depend on the batch a sentence lands in, so sentences are sorted by length within a
chunk and cut into batches of at most ``max_tokens`` padded tokens: padding stays small and long sentences get
small batches. Stateful runs must keep the file order (row i of each batch continues row i of the last one).
"""

from __future__ import annotations

from collections.abc import Sequence


def token_budget_batches(lengths: Sequence[int], max_tokens: int, max_sentences: int) -> list[list[int]]:
    """Indices into ``lengths``, sorted longest first, cut into batches.

    A batch holds at most ``max_sentences`` sentences and ``max_tokens`` padded tokens (longest length + 2 for
    the sentence boundaries, times the batch size), except that a single sentence longer than the budget forms
    a batch of its own. Empty sentences are left out: they need no model run.
    """
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] + 2 if current else lengths[i] + 2  # the first (longest) sets the padding
        if current and (len(current) == max_sentences or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def ordered_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Consecutive batches of ``batch_size`` in input order (empty sentences included, as padding rows)."""
    return [list(range(start, min(start + batch_size, len(lengths)))) for start in range(0, len(lengths), batch_size)]
