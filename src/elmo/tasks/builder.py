"""Assemble a task model from its config: the one place that knows how the parts fit together."""

from __future__ import annotations

import numpy as np
import torch

from elmo.config import CharCNNConfig
from elmo.errors import ConfigError
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import Elmo, ElmoHead
from elmo.tasks.elmo_features import CachedElmo, mix_initial_weights
from elmo.tasks.task_config import ElmoUseConfig, TaskConfig
from elmo.tasks.task_encoder import TaskEncoder
from elmo.tasks.token_input import TokenInput


def build_elmo(config: ElmoUseConfig, num_layers: int, bilm: BiLM | None = None) -> ElmoHead | None:
    """The ELMo part: None (baseline), :class:`CachedElmo` (``bilm`` None) or :class:`Elmo` around ``bilm``."""
    if not config.enabled:
        return None
    n_outputs = 2 if config.at_output else 1
    weights = mix_initial_weights(num_layers, config.layers)
    mixes = {"scalar_mix_parameters": weights, "do_layer_norm": config.do_layer_norm, "dropout": config.dropout}
    if bilm is None:
        return CachedElmo(num_layers, n_outputs, **mixes)
    if config.initial_state != "zero":
        raise ConfigError(f"elmo.initial_state {config.initial_state!r} needs cached activations (elmo.cached true); "
                          "on the fly the biLM starts every sentence from zeros")
    return Elmo(bilm, n_outputs, **mixes)


def build_task_model(
    config: TaskConfig, word_vectors: np.ndarray, labels: list[str], elmo: ElmoHead | None, elmo_dim: int
) -> TaskEncoder:
    """The model of the config's task kind (:attr:`elmo.tasks.kinds.TaskKind.model`): the CRF tagger, or a sentence
    classifier chosen by ``model.classifier``."""
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
    return config.kind.model(m)(token_input, m, labels, elmo, elmo_dim)
