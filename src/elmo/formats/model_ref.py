"""Which model a user meant: :class:`ModelRef`, the one place a model's spelling becomes a model.

Every entry point (the CLI's ``--model``, ``elmo serve`` and its workers, the Ray engine and predictor, Spark,
Flair, spaCy, the Hugging Face-style folders, ``load_bilm``) turns what it was given into a ``ModelRef`` once and
asks it for the path, the architecture or the biLM. A ``ModelRef`` is a small frozen value (strings only), so it
pickles into Ray actors and Spark workers and goes through JSON into ``elmo serve``'s worker processes, and every
process resolves it the same way.

Spellings, tried in this order:

* an existing folder or file: a path (recorded absolute, so another working directory finds it again);
* a model shipped in the package (``demo``, ``corpus``: :func:`elmo.formats.published.shipped_models`);
* a published model's name (:mod:`elmo.formats.published`: downloaded once into the cache, verified);
* ``options_file`` + ``weight_file``: the original pair, given as two files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from elmo.config import BiLMConfig
from elmo.errors import ConfigError, WeightFileError, reading
from elmo.formats.model_formats import LoadRequest, load_path, model_format, read_path_config
from elmo.formats.original import load_original, read_options
from elmo.formats.published import fetch_model, model_path, read_registry, shipped_models
from elmo.modules.bilm import BiLM

SHIPPED, PUBLISHED, PATH, FILES = "shipped", "published", "path", "files"


@dataclass(frozen=True)
class ModelRef:
    """A model, as the user named it, resolved the same way in every process. Make one with :meth:`parse`."""

    kind: str
    """``shipped``, ``published``, ``path`` or ``files``."""
    location: str
    """The name (shipped, published); the absolute path of the folder or archive (path); the absolute weight file
    (files)."""
    options_file: str | None = None
    """``files`` only: the absolute options.json."""
    checkpoint: str | None = None
    """A bilm-tf training directory's checkpoint to read (``model.ckpt-N``) instead of the one it names."""

    @classmethod
    def parse(
        cls,
        model: ModelRef | str | os.PathLike | None = None,
        *,
        options_file: str | os.PathLike | None = None,
        weight_file: str | os.PathLike | None = None,
        checkpoint: str | os.PathLike | None = None,
    ) -> ModelRef:
        """The model ``model`` (any spelling, or a ``ModelRef``) or the pair ``options_file`` + ``weight_file``
        names. A spelling that names nothing is one line saying which spellings were tried; a published model is
        not downloaded here (:meth:`path` does that, where the model is loaded)."""
        checkpoint = None if checkpoint is None else os.fspath(checkpoint)
        if model is not None and (options_file is not None or weight_file is not None):
            raise ConfigError("give either a model or options_file + weight_file, not both")
        if model is None:
            if checkpoint is not None:
                raise ConfigError("a checkpoint is picked in a bilm-tf training directory: give that directory "
                                  "as the model")
            return cls._files(options_file, weight_file)
        if isinstance(model, ModelRef):
            return model if checkpoint is None else replace(model, checkpoint=checkpoint)
        text = os.fspath(model)
        path = Path(text).expanduser()
        if path.exists():
            return cls(PATH, os.path.abspath(path), checkpoint=checkpoint)
        if text in shipped_models():
            return cls(SHIPPED, text, checkpoint=checkpoint)
        if "/" in text or os.sep in text:
            raise ConfigError(f"{text}: no such model directory or archive")
        registry = read_registry()
        if text in registry:
            return cls(PUBLISHED, text, checkpoint=checkpoint)
        shipped = ", ".join(shipped_models()) or "none"
        raise ConfigError(
            f"{text}: no such model: neither a model directory or archive, a shipped model ({shipped}) nor one of "
            f"the {len(registry)} published models (`elmo models` lists them)")

    @classmethod
    def _files(cls, options_file: str | os.PathLike | None, weight_file: str | os.PathLike | None) -> ModelRef:
        if options_file is None and weight_file is None:
            raise ConfigError("no model given: give a model (a folder, an archive, a shipped or published name), or "
                              "options_file + weight_file")
        if options_file is None or weight_file is None:
            raise ConfigError("options_file and weight_file go together")
        for given in (options_file, weight_file):
            if not Path(given).is_file():
                raise WeightFileError(f"{os.fspath(given)}: no such file")
        return cls(FILES, os.path.abspath(weight_file), options_file=os.path.abspath(options_file))

    # ------------------------------------------------------------------ what to call it

    @property
    def label(self) -> str:
        """How outputs and the service name the model: the shipped or published name, or the last part of the path
        (not the directories of this machine)."""
        return self.location if self.kind in (SHIPPED, PUBLISHED) else Path(self.location).name

    @property
    def record(self) -> str:
        """How a saved file (a task model, a fine-tuning run, a Flair tagger) records the model so that any later
        command, from any working directory, finds it again: a name stays a name, a path is absolute."""
        return self.location

    @property
    def is_local(self) -> bool:
        """Whether the model's files are here without a download."""
        return self.kind != PUBLISHED

    # ------------------------------------------------------------------ resolving and loading

    def path(self) -> Path:
        """The folder or archive that holds the model; a published model is fetched into the cache first."""
        if self.kind == PATH:
            return Path(self.location)
        if self.kind == SHIPPED:
            shipped = shipped_models()
            if self.location not in shipped:
                raise WeightFileError(f"{self.location}: not shipped with this copy of the package")
            return shipped[self.location]
        if self.kind == PUBLISHED:
            registry = read_registry()
            return model_path(fetch_model(self.location, registry=registry), registry[self.location])
        raise ConfigError(f"{self.location}: a weight file and an options file, not a model folder; give the "
                          "folder that holds them")

    def format_name(self) -> str:
        """The :mod:`~elmo.formats.model_formats` row that reads this model (``original`` for a pair of files)."""
        if self.kind == FILES:
            return "original"
        return model_format(self.path(), LoadRequest(checkpoint=self.checkpoint)).name

    def read_config(self) -> BiLMConfig:
        """The architecture, with the training keys the files hold; the weights stay unread."""
        if self.kind == FILES:
            with reading(self.options_file, "model's options"):
                return read_options(self.options_file)
        path = self.path()
        with reading(path, "model"):  # the safety net: anything a reader lets through is one line naming the model
            return read_path_config(path)

    def load(self, *, warm_state: bool = True, embedding_file: str | os.PathLike | None = None) -> BiLM:
        """The biLM on the CPU, in eval mode (``warm_state``: read a folder's stored warm state;
        ``embedding_file``: the original format's separate token table)."""
        embedding = None if embedding_file is None else os.fspath(embedding_file)
        if self.kind == FILES:
            with reading(self.location, "model"):
                return load_original(read_options(self.options_file), self.location,
                                     options_label=self.options_file, embedding_file=embedding)
        path = self.path()
        with reading(path, "model"):  # the safety net: anything a reader lets through is one line naming the model
            return load_path(path, LoadRequest(self.checkpoint, embedding, warm_state))
