"""The original format (bilm-tf, AllenNLP): ``options.json`` + ``weights.hdf5`` in a folder, as a pair of files,
or inside an NLPL zip (:mod:`elmo.formats.archives`). The weights' layout is :mod:`elmo.formats.hdf5`.

A folder may name its weights ``weights.hdf5``, ``model.hdf5`` (extracted NLPL archives) or hold just one
``*.hdf5``; a word-input model (no ``char_cnn`` block) keeps its token table in the weights or in a separate
``embedding`` file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import BinaryIO

from elmo.config import N_CHARACTERS_INFERENCE, BiLMConfig
from elmo.errors import WeightFileError
from elmo.formats.checked_reads import read_json
from elmo.formats.hdf5 import load_hdf5_weights, read_embedding_vocab_size
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.atomic_files import write_text_atomic

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
WEIGHTS_NAMES = ("model.hdf5", WEIGHTS_FILE)
"""The weights' usual names (NLPL archives use model.hdf5, AllenNLP-style directories and our exports
weights.hdf5); with neither, the one ``*.hdf5`` present."""
NOT_WEIGHTS = ("softmax.hdf5",)


def read_options(path: str | os.PathLike) -> BiLMConfig:
    """Parse an original ``options.json``."""
    return BiLMConfig.from_options(read_json(path), source=str(path))


def write_options(config: BiLMConfig, path: str | os.PathLike) -> None:
    """Write options.json for inference (``n_characters`` 262, as the original readers require)."""
    options = config.to_options()
    if "char_cnn" in options:
        options["char_cnn"]["n_characters"] = N_CHARACTERS_INFERENCE
    write_text_atomic(path, json.dumps(options, indent=2) + "\n")


def load_original(
    config: BiLMConfig,
    weights: str | os.PathLike | BinaryIO,
    *,
    options_label: str,
    weights_label: str | None = None,
    embedding_file: str | os.PathLike | None = None,
) -> BiLM:
    """The biLM ``config`` describes, filled from the original weights (a path, or a seekable binary file object
    called ``weights_label``), on the CPU, in eval mode."""
    vocab_size = None
    if embedding_file is not None:
        vocab_size = read_embedding_vocab_size(embedding_file)
    elif config.char_cnn is None:  # token-input models keep the table in the weights
        vocab_size = read_embedding_vocab_size(weights, options_without_char_cnn=options_label, name=weights_label)
    bilm = build_bilm(config, token_vocab_size=vocab_size, device="meta")  # the checked datasets fill it
    load_hdf5_weights(bilm, weights, embedding_path=embedding_file, name=weights_label)
    return bilm.eval()


def pick_weights(names: list[str], where: str) -> str:
    """The weights file among ``names`` (file names in one folder): model.hdf5 or weights.hdf5, else the one *.hdf5."""
    candidates = sorted(n for n in WEIGHTS_NAMES if n in names)
    if not candidates:
        candidates = sorted(n for n in names if n.lower().endswith(".hdf5") and n not in NOT_WEIGHTS)
    if not candidates:
        raise WeightFileError(f"{where}: options.json but no weights (model.hdf5, weights.hdf5 or another *.hdf5)")
    if len(candidates) > 1:
        raise WeightFileError(f"{where}: several weight files ({', '.join(candidates)}); keep only the model's")
    return candidates[0]


def weights_name(directory: Path) -> str:
    """weights.hdf5 (or model.hdf5, as extracted NLPL archives name it, or the one *.hdf5); with none, weights.hdf5
    (whose absence the weights reader reports, after the options are checked)."""
    names = [p.name for p in directory.iterdir() if p.is_file()]
    if WEIGHTS_FILE in names or not any(name.lower().endswith(".hdf5") for name in names):
        return WEIGHTS_FILE
    return pick_weights(names, str(directory))
