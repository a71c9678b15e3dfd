"""Find, read and write biLM model files in both formats.

* the original format: ``options.json`` + ``weights.hdf5`` (+ an ``embedding`` HDF5 file for token inputs);
* the native format: a directory with ``config.json`` and ``model.safetensors`` (loads without h5py and
  without any code execution; every tensor is checked against the architecture).

A model directory may hold either; :func:`load_bilm` tells them apart by their file names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from elmo.atomic_files import write_atomic, write_text_atomic
from elmo.builders import build_bilm
from elmo.config import N_CHARACTERS_INFERENCE, BiLMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.hdf5_weights import load_hdf5_weights, read_embedding_vocab_size, save_hdf5_weights
from elmo.modules.bilm import BiLM

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
NATIVE_CONFIG_FILE = "config.json"
NATIVE_WEIGHTS_FILE = "model.safetensors"
NATIVE_FORMAT = "elmo-native/1"


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e


def read_options(path: str | os.PathLike) -> BiLMConfig:
    """Parse an original ``options.json``."""
    return BiLMConfig.from_options(read_json(path), source=str(path))


def write_options(config: BiLMConfig, path: str | os.PathLike) -> None:
    """Write options.json for inference (``n_characters`` 262, as the original readers require)."""
    options = config.to_options()
    if "char_cnn" in options:
        options["char_cnn"]["n_characters"] = N_CHARACTERS_INFERENCE
    write_text_atomic(path, json.dumps(options, indent=2) + "\n")


def load_bilm(
    model: str | os.PathLike | None = None,
    *,
    options_file: str | os.PathLike | None = None,
    weight_file: str | os.PathLike | None = None,
    embedding_file: str | os.PathLike | None = None,
) -> BiLM:
    """Load a pretrained biLM on the CPU, in eval mode.

    Args:
        model: a directory in either format (``options.json`` + ``weights.hdf5``, or the native files).
        options_file, weight_file: the original pair, given explicitly (instead of ``model``).
        embedding_file: token-embedding HDF5 (dataset ``embedding``): run the biLM from word ids over that
            vocabulary instead of characters.
    """
    if model is not None:
        directory = Path(model)
        if not directory.exists():
            raise WeightFileError(f"{directory}: no such model directory")
        if (directory / NATIVE_CONFIG_FILE).is_file():
            return load_native(directory)
        options_file, weight_file = directory / OPTIONS_FILE, directory / WEIGHTS_FILE
        if not options_file.is_file():
            raise WeightFileError(f"{directory}: neither {NATIVE_CONFIG_FILE} nor {OPTIONS_FILE} found")
    if options_file is None or weight_file is None:
        raise ConfigError("load_bilm: give a model directory, or both options_file and weight_file")
    config = read_options(options_file)
    vocab_size = None
    if embedding_file is not None:
        vocab_size = read_embedding_vocab_size(embedding_file)
    elif config.char_cnn is None:
        vocab_size = read_embedding_vocab_size(weight_file)  # token-input models keep the table in the weights
    bilm = build_bilm(config, token_vocab_size=vocab_size)
    load_hdf5_weights(bilm, weight_file, embedding_path=embedding_file)
    return bilm.eval()


def save_bilm(bilm: BiLM, directory: str | os.PathLike, native: bool = False) -> Path:
    """Write ``bilm`` into ``directory``: options.json + weights.hdf5, or the native pair with ``native=True``."""
    if bilm.config is None:
        raise ValueError("save_bilm: the biLM has no config (build it with build_bilm)")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if native:
        save_native(bilm, directory)
    else:
        save_hdf5_weights(bilm, directory / WEIGHTS_FILE)
        write_options(bilm.config, directory / OPTIONS_FILE)
    return directory


def _token_vocab_size(bilm: BiLM) -> int | None:
    embedding = getattr(bilm.token_encoder, "embedding", None)
    return None if embedding is None else embedding.num_embeddings - 1


def save_native(bilm: BiLM, directory: Path, dtype: torch.dtype | None = None) -> None:
    """Write config.json + model.safetensors; ``dtype`` (e.g. float16 to halve the size) casts float tensors."""
    assert bilm.config is not None
    state = {k: v.detach().to("cpu", dtype or v.dtype).contiguous() for k, v in bilm.state_dict().items()}
    write_atomic(directory / NATIVE_WEIGHTS_FILE, lambda tmp: save_file(state, tmp, metadata={"format": NATIVE_FORMAT}))
    config = {"format": NATIVE_FORMAT, "options": bilm.config.to_options(), "token_vocab_size": _token_vocab_size(bilm)}
    write_text_atomic(directory / NATIVE_CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def load_native(directory: str | os.PathLike) -> BiLM:
    directory = Path(directory)
    config_path, weights_path = directory / NATIVE_CONFIG_FILE, directory / NATIVE_WEIGHTS_FILE
    meta = read_json(config_path)
    if not isinstance(meta, dict) or meta.get("format") != NATIVE_FORMAT or "options" not in meta:
        raise ConfigError(f"{config_path}: not an elmo native config (expected \"format\": \"{NATIVE_FORMAT}\")")
    config = BiLMConfig.from_options(meta["options"], source=str(config_path))
    bilm = build_bilm(config, token_vocab_size=meta.get("token_vocab_size"))
    if not weights_path.is_file():
        raise WeightFileError(f"{weights_path}: no such weight file")
    try:
        tensors = load_file(weights_path)
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightFileError(f"{weights_path}: not a readable safetensors file ({e})") from e
    load_checked_state(bilm, tensors, weights_path)
    return bilm.eval()


def load_checked_state(module: torch.nn.Module, tensors: dict[str, torch.Tensor], source: Path | str) -> None:
    """Copy ``tensors`` into ``module`` after checking names, shapes, dtypes and finiteness; errors name the key."""
    state = module.state_dict()
    missing = sorted(set(state) - set(tensors))
    unexpected = sorted(set(tensors) - set(state))
    if missing:
        raise WeightFileError(f"{source}: missing tensor '{missing[0]}' ({len(missing)} missing in all)")
    if unexpected:
        raise WeightFileError(f"{source}: unexpected tensor '{unexpected[0]}' ({len(unexpected)} unexpected in all)")
    for name, value in tensors.items():
        want = state[name]
        if tuple(value.shape) != tuple(want.shape):
            raise WeightFileError(
                f"{source}: tensor '{name}' has shape {tuple(value.shape)}, the config expects {tuple(want.shape)}"
            )
        if not value.is_floating_point() and want.is_floating_point():
            raise WeightFileError(f"{source}: tensor '{name}' has dtype {value.dtype}, expected a float dtype")
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise WeightFileError(f"{source}: tensor '{name}' contains NaN or Inf values")
    module.load_state_dict({k: v.to(state[k].dtype) for k, v in tensors.items()})
