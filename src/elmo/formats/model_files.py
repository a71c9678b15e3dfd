"""Load and save a biLM in either format, telling them apart by their file names:

* the original format: ``options.json`` + ``weights.hdf5`` (+ an ``embedding`` HDF5 file for token inputs;
  the weights' layout is :mod:`elmo.formats.hdf5`);
* the native format: ``config.json`` + ``model.safetensors`` (:mod:`elmo.formats.native`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from elmo.config import N_CHARACTERS_INFERENCE, BiLMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.checked_reads import read_json
from elmo.formats.hdf5 import load_hdf5_weights, read_embedding_vocab_size, save_hdf5_weights
from elmo.formats.native import NATIVE_CONFIG_FILE, load_native, read_native_config, save_native
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.atomic_files import write_text_atomic

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"


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
        if options_file is not None or weight_file is not None:
            raise ConfigError("load_bilm: give either a model directory or options_file and weight_file, not both")
        directory = _model_directory(model)
        if (directory / NATIVE_CONFIG_FILE).is_file():
            if embedding_file is not None:
                raise ConfigError(f"{directory}: embedding_file goes with the original format (options.json + "
                                  "weights.hdf5); this is a native model")
            return load_native(directory)
        options_file, weight_file = directory / OPTIONS_FILE, directory / WEIGHTS_FILE
    if options_file is None or weight_file is None:
        raise ConfigError("load_bilm: give a model directory, or both options_file and weight_file")
    config = read_options(options_file)
    vocab_size = None
    if embedding_file is not None:
        vocab_size = read_embedding_vocab_size(embedding_file)
    elif config.char_cnn is None:  # token-input models keep the table in the weights
        vocab_size = read_embedding_vocab_size(weight_file, options_without_char_cnn=options_file)
    bilm = build_bilm(config, token_vocab_size=vocab_size)
    load_hdf5_weights(bilm, weight_file, embedding_path=embedding_file)
    return bilm.eval()


def read_model_config(model: str | os.PathLike) -> BiLMConfig:
    """The architecture of a model directory, with the training keys its options hold; the weights stay unread."""
    directory = _model_directory(model)
    if (directory / NATIVE_CONFIG_FILE).is_file():
        return read_native_config(directory)[0]
    return read_options(directory / OPTIONS_FILE)


def is_model_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a model in either format (by its config file)."""
    return (Path(path) / NATIVE_CONFIG_FILE).is_file() or (Path(path) / OPTIONS_FILE).is_file()


def _model_directory(model: str | os.PathLike) -> Path:
    directory = Path(model)
    if not directory.exists():
        raise WeightFileError(f"{directory}: no such model directory")
    if not is_model_dir(directory):
        raise WeightFileError(f"{directory}: neither {NATIVE_CONFIG_FILE} nor {OPTIONS_FILE} found")
    return directory


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
