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

from elmo.config import MAX_VOCABULARY, BiLMConfig, check_integer
from elmo.errors import ConfigError
from elmo.formats.checked_reads import load_safetensors_weights, read_json
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.atomic_files import write_atomic, write_text_atomic
from elmo.text.manylangs_vocab import ManyLangsLexicon

NATIVE_CONFIG_FILE = "config.json"
NATIVE_WEIGHTS_FILE = "model.safetensors"
NATIVE_FORMAT = "elmo-native/1"
NATIVE_LEXICON_FILE = "lexicon.json"
"""ELMoForManyLangs models only: their character and word dictionaries, as JSON (:class:`ManyLangsLexicon`)."""
CARD_FILE = "README.md"
"""The model card that makes a native folder a Hugging Face-style one (:mod:`elmo.formats.model_card`)."""


def save_native(bilm: BiLM, directory: Path, dtype: torch.dtype | None = None) -> None:
    """Write config.json + model.safetensors; ``dtype`` (e.g. float16 to halve the size) casts float tensors."""
    assert bilm.config is not None
    state = {k: v.detach().to("cpu", dtype or v.dtype).contiguous() for k, v in bilm.state_dict().items()}
    write_atomic(directory / NATIVE_WEIGHTS_FILE, lambda tmp: save_file(state, tmp, metadata={"format": NATIVE_FORMAT}))
    lexicon = getattr(bilm.token_encoder, "lexicon", None)
    if lexicon is not None:
        write_text_atomic(directory / NATIVE_LEXICON_FILE, json.dumps(lexicon.to_json(), ensure_ascii=False) + "\n")
    config = {"format": NATIVE_FORMAT, "options": bilm.config.to_options(), "token_vocab_size": _token_vocab_size(bilm)}
    write_text_atomic(directory / NATIVE_CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def read_native_config(directory: str | os.PathLike) -> tuple[BiLMConfig, int | None]:
    """(architecture, token table size or None) from a native model's config.json."""
    config_path = Path(directory) / NATIVE_CONFIG_FILE
    meta = read_json(config_path)
    if not isinstance(meta, dict) or meta.get("format") != NATIVE_FORMAT or "options" not in meta:
        raise ConfigError(f"{config_path}: not an elmo native config (expected \"format\": \"{NATIVE_FORMAT}\")")
    config = BiLMConfig.from_options(meta["options"], source=str(config_path))
    token_vocab_size = meta.get("token_vocab_size")
    if token_vocab_size is not None:
        try:
            token_vocab_size = check_integer(token_vocab_size, "token_vocab_size", 1, MAX_VOCABULARY)
        except ConfigError as e:
            raise ConfigError(f"{config_path}: {e}") from None
    if token_vocab_size is None and config.char_cnn is None and config.manylangs is None:
        raise ConfigError(f"{config_path}: options without a char_cnn block (a word-input model) need "
                          "\"token_vocab_size\", the size of the token table")
    return config, token_vocab_size


def load_native(directory: str | os.PathLike) -> BiLM:
    weights_path = Path(directory) / NATIVE_WEIGHTS_FILE
    config, token_vocab_size = read_native_config(directory)
    bilm = build_bilm(config, token_vocab_size=token_vocab_size, device="meta")  # the checked tensors fill it
    load_safetensors_weights(bilm, weights_path)
    if config.manylangs is not None:
        bilm.token_encoder.lexicon = _read_lexicon(Path(directory) / NATIVE_LEXICON_FILE, config)
    return bilm.eval()


def _read_lexicon(path: Path, config: BiLMConfig) -> ManyLangsLexicon:
    """The dictionaries of a converted ELMoForManyLangs model, checked against the embedding sizes."""
    lexicon = ManyLangsLexicon.from_json(read_json(path), str(path))
    token = config.manylangs
    assert token is not None
    for key, table, rows in (("chars", lexicon.chars, token.n_characters if token.char_dim else None),
                             ("words", lexicon.words, token.n_words if token.word_dim else None)):
        if (table is None) != (rows is None):
            raise ConfigError(f"{path}: '{key}' is {'missing' if table is None else 'present'}, but the model "
                              f"{'has' if rows is not None else 'has no'} such embedding")
        if table is not None and (len(table) != rows or min(table.values()) < 0 or max(table.values()) >= rows):
            raise ConfigError(f"{path}: '{key}' has {len(table)} entries (ids {min(table.values())}.."
                              f"{max(table.values())}) but its embedding has {rows} rows")
    if lexicon.max_characters_per_token != token.max_characters_per_token:
        raise ConfigError(f"{path}: max_characters_per_token {lexicon.max_characters_per_token} differs from the "
                          f"config's {token.max_characters_per_token}")
    return lexicon


def _token_vocab_size(bilm: BiLM) -> int | None:
    embedding = getattr(bilm.token_encoder, "embedding", None)
    return None if embedding is None else embedding.num_embeddings - 1
