"""The one way in to a package of an optional extra (docs/architecture.md: the core install is torch, numpy, h5py,
safetensors and tqdm). Every import of such a package goes through here, at the point of use, so that ``import elmo``
and the commands that need no extra never load one, and a missing one is a single line naming the pip command.

    train  tensorboard, matplotlib   TensorBoard scalars and the training curve (skipped without it)
    tasks  seqeval, gensim           task models: span F1, the word2vec/fastText baselines
    serve  starlette, uvicorn        ``elmo serve``
    parquet  pyarrow                 ``elmo embed --format parquet``
    flair, spacy, ray, spark         each integration's tool (docs/integrations.md)
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from elmo.errors import MissingExtraError

log = logging.getLogger("elmo")

DISTRIBUTION = "elmo-bilm"


def install_hint(module: str, extra: str, what: str) -> str:
    """``<what> needs <package>: pip install "elmo-bilm[<extra>]"`` (one line; the package of a dotted module)."""
    return f'{what} needs {module.partition(".")[0]}: pip install "{DISTRIBUTION}[{extra}]"'


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import and return ``module`` (dotted names too: ``seqeval.metrics``); without it, :class:`MissingExtraError`
    whose message is :func:`install_hint`.

    ``what`` names the feature as a user knows it (``elmo serve``, ``elmo task train``); ``extra`` is the
    pyproject extra that installs ``module``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:  # absent, or present but broken (one of its own imports fails): the extra fixes both
        raise MissingExtraError(install_hint(module, extra, what)) from e


def optional(module: str, extra: str, what: str) -> ModuleType | None:
    """``module``, or None after one warning line (the :func:`install_hint` and that ``what`` is skipped): for
    features that a run does without (TensorBoard scalars, the training curve)."""
    try:
        return require(module, extra, what)
    except MissingExtraError as e:
        log.warning("%s; skipped", e)
        return None
