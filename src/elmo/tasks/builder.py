"""Assemble a task model from its config: the one place that knows how the parts fit together."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from elmo.config import CharCNNConfig
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import Elmo
from elmo.tasks.biattentive_classifier import BiattentiveClassifier
from elmo.tasks.classifier import MaxPoolClassifier
from elmo.tasks.config import ElmoUseConfig, TaskConfig
from elmo.tasks.crf import bio_allowed_transitions
from elmo.tasks.elmo_features import CachedElmo, mix_initial_weights
from elmo.tasks.tagger import CrfTagger
from elmo.tasks.token_input import TokenInput


def build_elmo(config: ElmoUseConfig, num_layers: int, bilm: BiLM | None = None) -> nn.Module | None:
    """The ELMo part: None (baseline), :class:`CachedElmo` (``bilm`` None) or :class:`Elmo` around ``bilm``."""
    if not config.enabled:
        return None
    n_outputs = 2 if config.at_output else 1
    weights = mix_initial_weights(num_layers, config.layers)
    if bilm is None:
        return CachedElmo(num_layers, n_outputs, config.dropout, config.do_layer_norm, weights)
    return Elmo(
        bilm, n_outputs, dropout=config.dropout, do_layer_norm=config.do_layer_norm, scalar_mix_parameters=weights
    )


def _is_bio(tags: list[str]) -> bool:
    return all(t == "O" or (t[:2] in ("B-", "I-") and len(t) > 2) for t in tags)


def build_task_model(
    config: TaskConfig, word_vectors: np.ndarray, labels: list[str], elmo: nn.Module | None, elmo_dim: int
) -> nn.Module:
    """A :class:`CrfTagger` (``ner``), or a :class:`MaxPoolClassifier` or :class:`BiattentiveClassifier` (``sst``)."""
    m = config.model
    char_cnn = None
    if m.char_filters > 0:
        char_cnn = CharCNNConfig(
            filters=[(m.char_width, m.char_filters)],
            embedding_dim=m.char_embedding_dim,
            n_highway=0,
            max_characters_per_token=m.max_characters_per_token,
        )
    token_input = TokenInput(torch.from_numpy(word_vectors), m.freeze_word_vectors, char_cnn)
    if config.task == "ner":
        allowed = bio_allowed_transitions(labels) if m.bio_constraints and _is_bio(labels) else None
        return CrfTagger(token_input, len(labels), m.hidden_dim, m.num_layers, m.dropout, elmo, elmo_dim, allowed)
    classifier = BiattentiveClassifier if m.classifier == "bcn" else MaxPoolClassifier
    return classifier(
        token_input, len(labels), m.hidden_dim, m.num_layers, m.dropout, m.classifier_hidden_dim, elmo, elmo_dim
    )
