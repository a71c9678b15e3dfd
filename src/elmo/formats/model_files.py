"""Load and save a biLM in any format, telling them apart by their file names:

* the original format: ``options.json`` + ``weights.hdf5`` (or ``model.hdf5``, as NLPL archives name it, or the
  one ``*.hdf5``; + an ``embedding`` HDF5 file for token inputs; the weights' layout is :mod:`elmo.formats.hdf5`);
* the native format: ``config.json`` + ``model.safetensors`` (:mod:`elmo.formats.native`);
* a zip archive of either published family, read in place (:mod:`elmo.formats.archives`).
* a TF-Hub module folder (``tfhub_module.pb``/``saved_model.pb`` + ``variables/``) or its ``.tar.gz``/``.tgz``
  (:mod:`elmo.formats.tf_hub`);
* a bilm-tf training directory: ``options.json`` + a TensorFlow checkpoint (:mod:`elmo.formats.bilm_tf_checkpoint`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from elmo.config import N_CHARACTERS_INFERENCE, BiLMConfig
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.archives import describe_meta, is_archive, load_archive, open_archive, pick_weights, read_meta
from elmo.formats.bilm_tf_checkpoint import (
    is_bilm_tf_dir,
    load_bilm_tf_checkpoint,
    loads_as_bilm_tf,
    read_bilm_tf_options,
)
from elmo.formats.checked_reads import read_json
from elmo.formats.hdf5 import load_hdf5_weights, read_embedding_vocab_size, save_hdf5_weights
from elmo.formats.manylangs import is_manylangs, load_manylangs, read_manylangs_config
from elmo.formats.native import NATIVE_CONFIG_FILE, load_native, read_native_config, save_native
from elmo.formats.tf_hub import is_hub_archive, is_hub_module, load_hub_module, read_hub_config
from elmo.formats.warm_state import (
    attach_stored_warm_state,
    check_warm_state_destination,
    model_warm_state,
    write_warm_state,
)
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.atomic_files import replace_directory, write_text_atomic

log = logging.getLogger(__name__)

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
    warm_state: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> BiLM:
    """Load a pretrained biLM on the CPU, in eval mode.

    Args:
        model: a directory in either format (``options.json`` + ``weights.hdf5``, or the native files), or a zip
            archive of a published model (NLPL: bilm-tf or ELMoForManyLangs), read without extracting it.
        options_file, weight_file: the original pair, given explicitly (instead of ``model``).
        embedding_file: token-embedding HDF5 (dataset ``embedding``): run the biLM from word ids over that
            vocabulary instead of characters.

    A directory's ``warm_state.safetensors`` (:mod:`elmo.formats.warm_state`) is read and checked too, and becomes
    ``bilm.warm_state``, the start of ``initial_state="warm"`` (``warm_state=False``: left unread).

    ``checkpoint``: in a bilm-tf training directory, the checkpoint to read (``model.ckpt-N``) instead of the one
    its ``checkpoint`` file names. A directory with a TensorFlow checkpoint and no ``*.hdf5`` weights is read as
    a bilm-tf training directory; with both, the HDF5 weights are read unless ``checkpoint`` is given.
    """
    if checkpoint is not None and (model is None or not is_bilm_tf_dir(model)):
        raise ConfigError(f"checkpoint={checkpoint}: a checkpoint is picked in a bilm-tf training directory "
                          "(options.json + model.ckpt-N.index), which the model is not")
    if model is not None:
        if options_file is not None or weight_file is not None:
            raise ConfigError("load_bilm: give either a model directory or options_file and weight_file, not both")
        if is_hub_archive(model) or is_hub_module(model):  # a TF-Hub module (formats/tf_hub.py)
            if embedding_file is not None:
                raise ConfigError(f"{model}: embedding_file goes with the original format; this is a TF-Hub module")
            bilm = load_hub_module(model)
            return attach_stored_warm_state(bilm, Path(model), warm_state) if Path(model).is_dir() else bilm
        if is_archive(model):
            if embedding_file is not None:
                raise ConfigError(f"{model}: embedding_file goes with a model directory, not an archive")
            return load_archive(model)
        directory = _model_directory(model)
        if loads_as_bilm_tf(directory, checkpoint):
            if embedding_file is not None:
                raise ConfigError(f"{directory}: embedding_file goes with options.json + weights.hdf5; this is a "
                                  "bilm-tf training directory (a word-input model keeps its table in the checkpoint)")
            return attach_stored_warm_state(load_bilm_tf_checkpoint(directory, checkpoint), directory, warm_state)
        if is_manylangs(directory):  # before the native check: both have a config.json
            if embedding_file is not None:
                raise ConfigError(f"{directory}: embedding_file goes with the original format; this is an "
                                  "ELMoForManyLangs model")
            return attach_stored_warm_state(load_manylangs(directory), directory, warm_state)
        if (directory / NATIVE_CONFIG_FILE).is_file():
            if embedding_file is not None:
                raise ConfigError(f"{directory}: embedding_file goes with the original format (options.json + "
                                  "weights.hdf5); this is a native model")
            return attach_stored_warm_state(load_native(directory), directory, warm_state)
        options_file, weight_file = directory / OPTIONS_FILE, directory / _weights_name(directory)
        if summary := describe_meta(read_meta(directory)):
            log.info("%s: %s", directory, summary)
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
    if model is not None:  # a directory's warm_state.safetensors (formats/warm_state.py)
        attach_stored_warm_state(bilm, Path(model), warm_state)
    return bilm.eval()


def read_model_config(model: str | os.PathLike) -> BiLMConfig:
    """The architecture of a model directory, with the training keys its options hold; the weights stay unread."""
    if is_hub_archive(model) or is_hub_module(model):
        return read_hub_config(model)
    if is_archive(model):
        with open_archive(model) as archive:
            return archive.read_config()
    directory = _model_directory(model)
    if is_manylangs(directory):
        return read_manylangs_config(directory)
    if (directory / NATIVE_CONFIG_FILE).is_file():
        return read_native_config(directory)[0]
    if loads_as_bilm_tf(directory):
        return read_bilm_tf_options(directory)
    return read_options(directory / OPTIONS_FILE)


def is_model_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a model in either format (by its config file), or is a model archive (a zip)."""
    return (Path(path) / NATIVE_CONFIG_FILE).is_file() or (Path(path) / OPTIONS_FILE).is_file() or is_archive(path) \
        or (Path(path).is_dir() and is_manylangs(Path(path))) or is_hub_module(path) or is_hub_archive(path)


def _weights_name(directory: Path) -> str:
    """weights.hdf5 (or model.hdf5, as extracted NLPL archives name it, or the one *.hdf5); with none, weights.hdf5
    (whose absence the weights reader reports, after the options are checked)."""
    names = [p.name for p in directory.iterdir() if p.is_file()]
    if WEIGHTS_FILE in names or not any(name.lower().endswith(".hdf5") for name in names):
        return WEIGHTS_FILE
    return pick_weights(names, str(directory))


def _model_directory(model: str | os.PathLike) -> Path:
    directory = Path(model)
    if not directory.exists():
        raise WeightFileError(f"{directory}: no such model directory or archive")
    if not is_model_dir(directory):
        raise WeightFileError(f"{directory}: neither {NATIVE_CONFIG_FILE} nor {OPTIONS_FILE} found")
    return directory


def save_bilm(bilm: BiLM, directory: str | os.PathLike, native: bool = False, force: bool = False) -> Path:
    """Write ``bilm`` into ``directory``: options.json + weights.hdf5, or the native pair with ``native=True``.

    The directory is made as a whole (built beside it, then renamed into place): an existing non-empty one is
    refused unless ``force``, which replaces it, so no file of an earlier model is left beside the new one."""
    if bilm.config is None:
        raise ValueError("save_bilm: the biLM has no config (build it with build_bilm)")
    if not native and bilm.config.manylangs is not None:
        raise ConfigError("an ELMoForManyLangs model has no options.json + weights.hdf5 form (bilm-tf's layout has "
                          "no word embedding and no character lexicon): convert it --to native")
    return replace_directory(directory, lambda tmp: write_bilm_files(bilm, tmp, native), force)


def write_bilm_files(bilm: BiLM, directory: Path, native: bool = False) -> None:
    """The model's files (and its warm state, if it has one) into the existing directory ``directory``."""
    if native:
        save_native(bilm, directory)
    else:
        save_hdf5_weights(bilm, directory / WEIGHTS_FILE)
        write_options(bilm.config, directory / OPTIONS_FILE)
    if getattr(bilm, "warm_state", None) is not None:  # the warm state goes with the model into either format
        write_warm_state(directory, bilm, bilm.warm_state)


def store_warm_state(model_dir: str | os.PathLike, force: bool = False) -> Path:
    """``elmo warm-state``: compute the warm state of the model in ``model_dir`` (either format) and write
    ``warm_state.safetensors`` there; an earlier one is refused unless ``force``, which replaces it (atomically).
    Returns its path."""
    directory = Path(model_dir)
    if not directory.is_dir() or not is_model_dir(directory):
        raise ElmoError(f"{directory}: not a model directory (a warm state is stored beside the model's files)")
    check_warm_state_destination(directory, force)  # before the model loads
    bilm = load_bilm(directory, warm_state=False)
    return write_warm_state(directory, bilm, model_warm_state(bilm))
