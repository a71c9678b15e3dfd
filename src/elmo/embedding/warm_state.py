"""``elmo warm-state``: compute a model's warm initial state from the shipped text and store it with the model."""

from __future__ import annotations

import os
from pathlib import Path

from elmo.embedding.token_layer_cache import TOKEN_ENCODERS, TokenVectors
from elmo.errors import ElmoError
from elmo.formats.model_files import is_model_dir, load_bilm
from elmo.formats.warm_state import compute_warm_state, write_warm_state
from elmo.modules.bilm import BiLM, BiLMState


def model_warm_state(bilm: BiLM) -> BiLMState:
    """``bilm``'s warm state computed from the shipped text (float32, on the CPU), ignoring any stored one."""
    if not isinstance(bilm.token_encoder, TOKEN_ENCODERS):
        raise ElmoError("a warm state needs a character-input biLM (token-input models are not supported)")
    vectors = TokenVectors(bilm.eval().token_encoder)
    return compute_warm_state(bilm, vectors, vectors.boundary_tokens)


def store_warm_state(model_dir: str | os.PathLike) -> Path:
    """Compute the warm state of the model in ``model_dir`` (either format) and write ``warm_state.safetensors``
    there, replacing any earlier one; returns its path."""
    directory = Path(model_dir)
    if not directory.is_dir() or not is_model_dir(directory):
        raise ElmoError(f"{directory}: not a model directory (a warm state is stored beside the model's files)")
    bilm = load_bilm(directory, warm_state=False)
    return write_warm_state(directory, bilm, model_warm_state(bilm))
