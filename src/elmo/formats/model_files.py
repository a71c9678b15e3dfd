"""Load and save a biLM: :func:`load_bilm` takes any model spelling (through :class:`~elmo.formats.model_ref.ModelRef`,
which reads every format of :mod:`elmo.formats.model_formats`); :func:`save_bilm` writes the original format
(options.json + weights.hdf5, :mod:`elmo.formats.original`) or the native one (:mod:`elmo.formats.native`).
"""

from __future__ import annotations

import os
from pathlib import Path

from elmo.config import BiLMConfig
from elmo.errors import ConfigError, ElmoError
from elmo.formats.hdf5 import save_hdf5_weights
from elmo.formats.model_formats import recognise
from elmo.formats.model_ref import ModelRef
from elmo.formats.native import save_native
from elmo.formats.original import OPTIONS_FILE, WEIGHTS_FILE, read_options, write_options
from elmo.formats.warm_state import (
    check_warm_state_destination,
    model_warm_state,
    warm_state_directory,
    write_warm_state,
)
from elmo.modules.bilm import BiLM
from elmo.runtime.atomic_files import replace_directory

__all__ = ["load_bilm", "read_model_config", "read_options", "save_bilm", "store_warm_state", "write_bilm_files"]


def load_bilm(
    model: ModelRef | str | os.PathLike | None = None,
    *,
    options_file: str | os.PathLike | None = None,
    weight_file: str | os.PathLike | None = None,
    embedding_file: str | os.PathLike | None = None,
    warm_state: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> BiLM:
    """Load a pretrained biLM on the CPU, in eval mode.

    Args:
        model: any spelling ``elmo embed --model`` takes: a folder or archive in any format
            (:data:`~elmo.formats.model_formats.MODEL_FORMATS`), a shipped model's name (``demo``), a published
            model's name (downloaded once), or a :class:`~elmo.formats.model_ref.ModelRef`.
        options_file, weight_file: the original pair, given explicitly (instead of ``model``).
        embedding_file: token-embedding HDF5 (dataset ``embedding``): run the biLM from word ids over that
            vocabulary instead of characters (the original format only).
        warm_state: read a folder's ``warm_state.safetensors`` (:mod:`elmo.formats.warm_state`) into
            ``bilm.warm_state``, the start of ``initial_state="warm"``.
        checkpoint: in a bilm-tf training directory, the checkpoint to read (``model.ckpt-N``) instead of the one
            its ``checkpoint`` file names. A directory with a TensorFlow checkpoint and no ``*.hdf5`` weights is
            read as a bilm-tf training directory; with both, the HDF5 weights are read unless ``checkpoint`` is
            given.
    """
    ref = ModelRef.parse(model, options_file=options_file, weight_file=weight_file, checkpoint=checkpoint)
    return ref.load(warm_state=warm_state, embedding_file=embedding_file)


def read_model_config(model: ModelRef | str | os.PathLike) -> BiLMConfig:
    """The architecture of a model (any spelling), with the training keys its files hold; the weights stay unread."""
    return ModelRef.parse(model).read_config()


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
    if bilm.warm_state is not None:  # the warm state goes with the model into either format
        write_warm_state(directory, bilm, bilm.warm_state)


def store_warm_state(model_dir: str | os.PathLike, force: bool = False) -> Path:
    """``elmo warm-state``: compute the warm state of the model in ``model_dir`` (either format) and write
    ``warm_state.safetensors`` there (a shipped model's into the user's cache: ``warm_state_directory``, where
    loading finds it); an earlier one is refused unless ``force``, which replaces it (atomically). Returns its
    path."""
    directory = Path(model_dir)
    if not directory.is_dir() or recognise(directory) is None:
        raise ElmoError(f"{directory}: not a model directory (a warm state is stored beside the model's files)")
    check_warm_state_destination(directory, force)  # before the model loads (a shipped model's: none there)
    bilm = load_bilm(directory, warm_state=False)
    target = warm_state_directory(bilm, directory)
    check_warm_state_destination(target, force)
    return write_warm_state(target, bilm, model_warm_state(bilm))
