"""The native model format: a directory with ``config.json`` (the original options, wrapped) and
``model.safetensors``. It loads without h5py and without any code execution; every tensor is checked against the
architecture the config describes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from elmo.config import BiLMConfig
from elmo.errors import ConfigError
from elmo.formats.checked_reads import load_checked_state, read_json, read_safetensors
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.atomic_files import write_atomic, write_text_atomic

NATIVE_CONFIG_FILE = "config.json"
NATIVE_WEIGHTS_FILE = "model.safetensors"
NATIVE_FORMAT = "elmo-native/1"


def save_native(bilm: BiLM, directory: Path, dtype: torch.dtype | None = None) -> None:
    """Write config.json + model.safetensors; ``dtype`` (e.g. float16 to halve the size) casts float tensors."""
    assert bilm.config is not None
    state = {k: v.detach().to("cpu", dtype or v.dtype).contiguous() for k, v in bilm.state_dict().items()}
    write_atomic(directory / NATIVE_WEIGHTS_FILE, lambda tmp: save_file(state, tmp, metadata={"format": NATIVE_FORMAT}))
    config = {"format": NATIVE_FORMAT, "options": bilm.config.to_options(), "token_vocab_size": _token_vocab_size(bilm)}
    write_text_atomic(directory / NATIVE_CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def read_native_config(directory: str | os.PathLike) -> tuple[BiLMConfig, int | None]:
    """(architecture, token table size or None) from a native model's config.json."""
    config_path = Path(directory) / NATIVE_CONFIG_FILE
    meta = read_json(config_path)
    if not isinstance(meta, dict) or meta.get("format") != NATIVE_FORMAT or "options" not in meta:
        raise ConfigError(f"{config_path}: not an elmo native config (expected \"format\": \"{NATIVE_FORMAT}\")")
    return BiLMConfig.from_options(meta["options"], source=str(config_path)), meta.get("token_vocab_size")


def load_native(directory: str | os.PathLike) -> BiLM:
    weights_path = Path(directory) / NATIVE_WEIGHTS_FILE
    config, token_vocab_size = read_native_config(directory)
    bilm = build_bilm(config, token_vocab_size=token_vocab_size)
    load_checked_state(bilm, read_safetensors(weights_path), weights_path)
    return bilm.eval()


def _token_vocab_size(bilm: BiLM) -> int | None:
    embedding = getattr(bilm.token_encoder, "embedding", None)
    return None if embedding is None else embedding.num_embeddings - 1
