"""Where model files live besides the paths users give: the models shipped inside the package and the user's cache.

A module of its own, below every reader: the warm state (stored beside a model, or in the cache for a shipped one)
and the registry of published models (which imports the readers) both take these from here."""

from __future__ import annotations

import os
from pathlib import Path

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
"""The models shipped inside the package, one folder each with its card (README.md), so that ELMo works offline on
a fresh machine and after ``pip install``: ``demo`` (small, trained on public-domain novels) and ``corpus`` (the
biLM the task experiments build on)."""


def elmo_home() -> Path:
    """The user's cache (downloaded models, the warm states of shipped ones): ``$ELMO_HOME``, else
    ``$XDG_CACHE_HOME/elmo`` or ``~/.cache/elmo``."""
    if "ELMO_HOME" in os.environ:
        return Path(os.environ["ELMO_HOME"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "elmo"
