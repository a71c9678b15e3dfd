"""ELMo (Peters et al., NAACL 2018) in PyTorch: faithful to the original weights, fast, trainable.

    from elmo import Elmo, batch_to_ids, load_bilm
    elmo = Elmo(load_bilm("path/to/model"), num_output_representations=1)
    out = elmo(batch_to_ids([["Hello", "world", "."]]))
    out.representations[0]  # (1, 3, 2P)
"""

from importlib.metadata import PackageNotFoundError, version

from elmo.char_encoding import batch_to_ids, word_to_char_ids
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.embedding.contract import SentenceEmbedder
from elmo.embedding.embed_options import EmbedOptions, OutputOptions
from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import EmbedFileJob, embed_file
from elmo.errors import ConfigError, ElmoError, InputFileError, WeightFileError
from elmo.formats.hdf5 import load_hdf5_weights, save_hdf5_weights
from elmo.formats.model_files import load_bilm, read_options, save_bilm
from elmo.modules import BiLM, Elmo, ScalarMix, StatefulBiLM
from elmo.modules.bilm import build_bilm
from elmo.precision import Precision
from elmo.vocab import Vocabulary, batch_to_token_ids

DISTRIBUTION = "elmo-bilm"
"""The name to ``pip install`` (``elmo`` on PyPI is an unrelated package); the import name is ``elmo``."""
try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
    __version__ = "unknown"

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
