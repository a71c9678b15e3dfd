"""Every model format the project reads: one class and one row of :data:`MODEL_FORMATS` each, in the order they
are recognised. This is the only place a format is added (docs/architecture.md, "A model format").

A row says how to recognise the format from the files a path holds (never from their contents beyond a marker
file's presence), how to read the architecture without the weights, and how to load the biLM. Recognition order
matters where two families share a file name: a TF-Hub archive is a file before it is a zip; a bilm-tf training
directory has an ``options.json`` like the original format (it wins only without ``*.hdf5`` weights, or when a
checkpoint is asked for); ELMoForManyLangs and the native format both have a ``config.json`` (ManyLangs has its
dictionaries or pickles beside it); a Hugging Face-style folder is a native folder with a card.

Which model a user meant (a name, a path, a pair of files) is :mod:`elmo.formats.model_ref`; this module only
knows paths that exist.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from elmo.config import BiLMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats import archives, manylangs, native, original
from elmo.formats.tensorflow import bilm_tf_checkpoint, tf_hub
from elmo.formats.warm_state import attach_stored_warm_state
from elmo.modules.bilm import BiLM

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadRequest:
    """What a caller asks of a load beyond the path: options only some formats honour (``takes``)."""

    checkpoint: str | None = None
    """bilm-tf training directories: the checkpoint (``model.ckpt-N``) instead of the one the directory names."""
    embedding_file: str | None = None
    """The original format: a separate token-embedding HDF5 file (dataset ``embedding``) for a word-input model."""
    warm_state: bool = True
    """Read a folder's ``warm_state.safetensors`` (:mod:`elmo.formats.warm_state`) into ``bilm.warm_state``."""

    def given(self) -> list[str]:
        return [name for name in ("checkpoint", "embedding_file") if getattr(self, name) is not None]


class ModelFormat:
    """One family of model files. Subclasses set the class attributes and the three methods."""

    name: ClassVar[str]
    """Short, stable: what logs and ``elmo info`` call it."""
    title: ClassVar[str]
    """How messages name a path of this format: "this is {title}"."""
    takes: ClassVar[tuple[str, ...]] = ()
    """The :class:`LoadRequest` options this format honours; any other given option is refused in one line."""

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        raise NotImplementedError

    def read_config(self, path: Path) -> BiLMConfig:
        """The architecture (with the training keys the files hold); no weights are read."""
        raise NotImplementedError

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        """The biLM on the CPU, in eval mode."""
        raise NotImplementedError


class TfHubArchive(ModelFormat):
    name, title = "tf-hub-archive", "a TF-Hub module archive (.tar.gz)"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return tf_hub.is_hub_archive(path)

    def read_config(self, path: Path) -> BiLMConfig:
        return tf_hub.read_hub_config(path)

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        return tf_hub.load_hub_module(path)


class TfHubModule(TfHubArchive):
    name, title = "tf-hub", "a TF-Hub module"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return tf_hub.is_hub_module(path)


class ZipArchive(ModelFormat):
    """A zip of either published family (NLPL's downloads), read in place."""

    name, title = "zip", "a model archive (.zip)"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return archives.is_archive(path)

    def read_config(self, path: Path) -> BiLMConfig:
        with archives.open_archive(path) as archive:
            return archive.read_config()

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        return archives.load_archive(path)


class BilmTfCheckpointDir(ModelFormat):
    name, title = "bilm-tf-checkpoint", "a bilm-tf training directory (options.json + model.ckpt-N)"
    takes = ("checkpoint",)

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return bilm_tf_checkpoint.loads_as_bilm_tf(path, request.checkpoint)

    def read_config(self, path: Path) -> BiLMConfig:
        return bilm_tf_checkpoint.read_bilm_tf_options(path)

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        return bilm_tf_checkpoint.load_bilm_tf_checkpoint(path, request.checkpoint)


class ManyLangsFolder(ModelFormat):
    name, title = "manylangs", "an ELMoForManyLangs model"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return path.is_dir() and manylangs.is_manylangs(path)

    def read_config(self, path: Path) -> BiLMConfig:
        return manylangs.read_manylangs_config(path)

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        return manylangs.load_manylangs(path)


class NativeFolder(ModelFormat):
    name, title = "native", "a native model (config.json + model.safetensors)"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return (path / native.NATIVE_CONFIG_FILE).is_file()

    def read_config(self, path: Path) -> BiLMConfig:
        return native.read_native_config(path)[0]

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        return native.load_native(path)


class HfFolder(NativeFolder):
    """A native folder with a model card (``elmo convert --to hf``, ``BiLM.save_pretrained``): the card is not a
    model file, so it loads as the native folder does."""

    name, title = "hf-folder", "a Hugging Face-style folder (config.json + model.safetensors + README.md)"

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return super().recognise(path, request) and (path / native.CARD_FILE).is_file()


class OriginalFolder(ModelFormat):
    name, title = "original", "an original model (options.json + weights.hdf5)"
    takes = ("embedding_file",)

    def recognise(self, path: Path, request: LoadRequest) -> bool:
        return (path / original.OPTIONS_FILE).is_file()

    def read_config(self, path: Path) -> BiLMConfig:
        return original.read_options(path / original.OPTIONS_FILE)

    def load(self, path: Path, request: LoadRequest) -> BiLM:
        if summary := archives.describe_meta(archives.read_meta(path)):
            log.info("%s: %s", path, summary)
        options = path / original.OPTIONS_FILE
        return original.load_original(original.read_options(options), path / original.weights_name(path),
                                      options_label=str(options), embedding_file=request.embedding_file)


MODEL_FORMATS: tuple[ModelFormat, ...] = (
    TfHubArchive(),
    TfHubModule(),
    ZipArchive(),
    BilmTfCheckpointDir(),
    ManyLangsFolder(),
    HfFolder(),
    NativeFolder(),
    OriginalFolder(),
)
"""Every format, in the order a path is tested against them: the first that recognises it reads it."""


def recognise(path: str | Path, request: LoadRequest = LoadRequest()) -> ModelFormat | None:
    """The format of the model at ``path`` (an existing file or folder), or None."""
    path = Path(path)
    return next((f for f in MODEL_FORMATS if f.recognise(path, request)), None)


def model_format(path: str | Path, request: LoadRequest = LoadRequest()) -> ModelFormat:
    """The format of ``path``; a path that is none of them is one line that lists what was tried."""
    path = Path(path)
    if not path.exists():
        raise WeightFileError(f"{path}: no such model directory or archive")
    found = recognise(path, request)
    if found is None:
        what = "a folder" if path.is_dir() else "a file"
        tried = "; ".join(f.title for f in MODEL_FORMATS)
        raise WeightFileError(f"{path}: {what}, but not a model in any format read here (tried: {tried})")
    return found


def read_path_config(path: str | Path) -> BiLMConfig:
    """The architecture of the model at ``path``; the weights stay unread."""
    return model_format(path).read_config(Path(path))


def load_path(path: str | Path, request: LoadRequest = LoadRequest()) -> BiLM:
    """The biLM at ``path`` (any format), with a folder's stored warm state attached (unless the request says not
    to). An option the format does not honour is refused before anything is read."""
    path = Path(path)
    found = model_format(path, request)
    for option in request.given():
        if option not in found.takes:
            takers = " or ".join(f.title for f in MODEL_FORMATS if option in f.takes)
            raise ConfigError(f"{path}: {option} goes with {takers}; this is {found.title}")
    bilm = found.load(path, request)
    if path.is_dir():
        attach_stored_warm_state(bilm, path, request.warm_state)
    return bilm
