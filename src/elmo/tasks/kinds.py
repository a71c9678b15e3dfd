"""The task kinds: everything a task config's ``task`` name decides, declared once per kind.

How a kind's data files are read and its predictions written, whether its model tags tokens or labels sentences,
its score and its model come from its :class:`TaskKind` in :data:`TASK_KINDS`; the rest of the package asks the
kind and never compares names. A new kind is one entry here (plus its reader, metric and model, if new).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elmo.errors import ConfigError
from elmo.tasks.biattentive_classifier import BiattentiveClassifier
from elmo.tasks.classifier import MaxPoolClassifier
from elmo.tasks.conll import read_conll, write_conll_predictions
from elmo.tasks.metrics import accuracy, conll_f1
from elmo.tasks.model_config import CLASSIFIER_NAMES, ModelConfig
from elmo.tasks.sentence_labels import read_labelled_sentences, write_label_predictions
from elmo.tasks.tagger import CrfTagger

if TYPE_CHECKING:
    from elmo.tasks.task_encoder import TaskEncoder

CLASSIFIERS: dict[str, type[TaskEncoder]] = dict(zip(CLASSIFIER_NAMES, (MaxPoolClassifier, BiattentiveClassifier)))
"""The sentence classifiers by ``model.classifier``: BiLSTM + max-pooling, or the paper's biattentive network."""


@dataclass(frozen=True)
class TaskKind:
    """One kind of task: its data, its targets, its score and its model.

    Attributes:
        name: the ``task`` of a config and the argument of ``elmo task train``.
        description: one line for ``elmo task train --help``: the data and what is predicted.
        read: a data file -> its examples (each has ``.words``).
        write_predictions: (path, examples, predicted) -> a predictions file, gold beside predicted.
        tags_tokens: True: one label per token (a tag list per sentence); False: one label per sentence.
        gold: an example -> its target: its tag list (``tags_tokens``) or its label.
        metric_name: the score's key in ``elmo task evaluate``'s JSON.
        metric: (gold targets, predicted targets) -> the score in percent; higher is better (the dev score).
        model: the model config -> the task model's class (a :class:`~elmo.tasks.task_encoder.TaskEncoder`).
    """

    name: str
    description: str
    read: Callable[[str | os.PathLike], list]
    write_predictions: Callable[[str | os.PathLike, Sequence, Sequence], None]
    tags_tokens: bool
    gold: Callable[[Any], Any]
    metric_name: str
    metric: Callable[[Sequence, Sequence], float]
    model: Callable[[ModelConfig], type[TaskEncoder]]

    def label_targets(self, examples: Iterable) -> list[str]:
        """Every target the label set counts: each token's tag, or each sentence's label."""
        if self.tags_tokens:
            return [t for e in examples for t in self.gold(e)]
        return [self.gold(e) for e in examples]


TASK_KINDS: dict[str, TaskKind] = {
    kind.name: kind
    for kind in (
        TaskKind(
            name="ner",
            description="CoNLL columns (word first, tag last), CRF tagger, span F1",
            read=read_conll,
            write_predictions=write_conll_predictions,
            tags_tokens=True,
            gold=lambda sentence: sentence.tags,
            metric_name="f1",
            metric=conll_f1,
            model=lambda config: CrfTagger,
        ),
        TaskKind(
            name="sst",
            description="label TAB sentence, max-pooling or BCN classifier (model.classifier), accuracy",
            read=read_labelled_sentences,
            write_predictions=write_label_predictions,
            tags_tokens=False,
            gold=lambda sentence: sentence.label,
            metric_name="accuracy",
            metric=accuracy,
            model=lambda config: CLASSIFIERS[config.classifier],
        ),
    )
}
"""The task kinds by name."""


def task_kind(name: str) -> TaskKind:
    """The kind called ``name``; an unknown name is a one-line :class:`ConfigError` listing the known kinds."""
    kind = TASK_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ConfigError(f"task must be one of {', '.join(TASK_KINDS)}; got {name!r}")
    return kind
