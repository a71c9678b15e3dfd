"""Read a task's train/dev/test files, optionally taking a reproducible slice (for data-size curves and smoke runs)."""

from __future__ import annotations

import os
import random

from elmo.tasks.kinds import task_kind
from elmo.tasks.task_trainer import TaskData


def read_examples(task: str, path: str | os.PathLike) -> list:
    """The examples of a data file of the task kind ``task`` (:data:`~elmo.tasks.kinds.TASK_KINDS`)."""
    return task_kind(task).read(path)


def take(examples: list, fraction: float = 1.0, limit: int | None = None, seed: int = 0) -> list:
    """At most ``limit`` examples, then a ``fraction`` of those (at least one); file order kept.

    The examples come from one seeded shuffle, so for a given seed smaller slices are subsets of larger ones.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    keep = len(examples) if limit is None else min(limit, len(examples))
    keep = max(1, round(fraction * keep))
    if keep >= len(examples):
        return examples
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    return [examples[i] for i in sorted(order[:keep])]


def load_task_data(
    task: str,
    train: str | os.PathLike,
    dev: str | os.PathLike,
    test: str | os.PathLike | None = None,
    train_fraction: float = 1.0,
    limit: int | None = None,
    seed: int = 0,
) -> TaskData:
    """``limit`` caps every split (for quick runs); ``train_fraction`` samples the training split only.

    ``seed`` picks the training sample; dev and test slices never depend on it, so all runs are scored alike.
    """
    return TaskData(
        train=take(read_examples(task, train), train_fraction, limit, seed),
        dev=take(read_examples(task, dev), 1.0, limit),
        test=take(read_examples(task, test), 1.0, limit) if test is not None else None,
    )
