"""ELMo (Peters et al., NAACL 2018) in PyTorch: faithful to the original weights, fast, trainable.

    from elmo import Elmo, batch_to_ids, load_bilm
    elmo = Elmo(load_bilm("path/to/model"), num_output_representations=1)
    out = elmo(batch_to_ids([["Hello", "world", "."]]))
    out.representations[0]  # (1, 3, 2P)

The public names below are imported on first use (PEP 562), so that ``import elmo`` stays cheap: spaCy imports
``elmo.integrations.spacy`` (and so this package) whenever any pipeline is built, and that must not load torch.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

DISTRIBUTION = "elmo-bilm"
"""The name to ``pip install`` (``elmo`` on PyPI is an unrelated package); the import name is ``elmo``."""
try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
    __version__ = "unknown"

_PUBLIC = {
    "elmo.text.char_encoding": ("batch_to_ids", "word_to_char_ids"),
    "elmo.config": ("BiLMConfig", "CharCNNConfig", "LSTMConfig"),
    "elmo.embedding.contract": ("SentenceEmbedder",),
    "elmo.embedding.embed_options": ("EmbedOptions", "OutputOptions"),
    "elmo.embedding.embedder": ("Embedder",),
    "elmo.embedding.file_job": ("EmbedFileJob", "embed_file"),
    "elmo.errors": ("ConfigError", "ElmoError", "InputFileError", "WeightFileError"),
    "elmo.formats.hdf5": ("load_hdf5_weights", "save_hdf5_weights"),
    "elmo.formats.hf_folders": ("BiLM", "load_bilm"),  # importing it installs BiLM.save_pretrained/from_pretrained
    "elmo.formats.model_files": ("read_options", "save_bilm"),
    "elmo.formats.model_ref": ("ModelRef",),
    "elmo.modules": ("Elmo", "ScalarMix", "StatefulBiLM"),
    "elmo.modules.bilm": ("build_bilm",),
    "elmo.precision": ("Precision",),
    "elmo.text.vocab": ("Vocabulary", "batch_to_token_ids"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = [
    "BiLM",
    "BiLMConfig",
    "CharCNNConfig",
    "ConfigError",
    "Elmo",
    "ElmoError",
    "EmbedFileJob",
    "EmbedOptions",
    "Embedder",
    "InputFileError",
    "LSTMConfig",
    "ModelRef",
    "OutputOptions",
    "Precision",
    "ScalarMix",
    "SentenceEmbedder",
    "StatefulBiLM",
    "Vocabulary",
    "WeightFileError",
    "batch_to_ids",
    "batch_to_token_ids",
    "build_bilm",
    "embed_file",
    "load_bilm",
    "load_hdf5_weights",
    "read_options",
    "save_bilm",
    "save_hdf5_weights",
    "word_to_char_ids",
]


def __getattr__(name: str) -> Any:
    """``elmo.<public name>``: imports its module the first time and keeps the name here, so later uses are plain
    attribute reads."""
    module = _WHERE.get(name)
    if module is None:  # also how ``from elmo import allennlp`` falls through to importing the submodule
        raise AttributeError(f"module 'elmo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
    from elmo.embedding.contract import SentenceEmbedder
    from elmo.embedding.embed_options import EmbedOptions, OutputOptions
    from elmo.embedding.embedder import Embedder
    from elmo.embedding.file_job import EmbedFileJob, embed_file
    from elmo.errors import ConfigError, ElmoError, InputFileError, WeightFileError
    from elmo.formats.hdf5 import load_hdf5_weights, save_hdf5_weights
    from elmo.formats.model_files import load_bilm, read_options, save_bilm
    from elmo.formats.model_ref import ModelRef
    from elmo.modules import BiLM, Elmo, ScalarMix, StatefulBiLM
    from elmo.modules.bilm import build_bilm
    from elmo.precision import Precision
    from elmo.text.char_encoding import batch_to_ids, word_to_char_ids
    from elmo.text.vocab import Vocabulary, batch_to_token_ids
