"""The one way in to a package of an optional extra (docs/architecture.md: the core install is torch, numpy, h5py,
safetensors and tqdm). Every import of such a package goes through here, at the point of use, so that ``import elmo``
and the commands that need no extra never load one, and a missing one is a single line naming the pip command.

    train  tensorboard, matplotlib   TensorBoard scalars and the training curve (skipped without it)
    tasks  seqeval, gensim           task models: span F1, the word2vec/fastText baselines
    serve  starlette, uvicorn        ``elmo serve``
    parquet  pyarrow                 ``elmo embed --format parquet``
    flair, spacy, ray, spark         each integration's tool (docs/integrations.md)

Where a tool has no public switch for what we need, the adaptation to its internals is here too, beside its import,
so a new version of the tool breaks one place: Ray's error printer and its cluster-mode constant, and the CPU
allotment of a Ray worker.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

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


# -- Ray --------------------------------------------------------------------------------------------------------------
def threads_from_ray_allotment(ray: Any) -> None:
    """In a Ray worker, one torch thread per CPU it holds (at least one): Ray starts one process per actor, and
    several actors on a node must not each take all its cores. The driver (no CPU allotment) keeps its policy."""
    context = ray.get_runtime_context() if ray.is_initialized() else None
    if context is None or context.worker.mode != ray.WORKER_MODE:  # the driver, or no Ray at all
        return
    cpus = context.get_assigned_resources().get("CPU")
    if cpus is None:
        return
    from elmo.runtime.threads import set_process_threads  # here: it imports torch, which the spaCy entry point must not

    set_process_threads(math.floor(cpus))


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


@contextmanager
def ray_errors_to(log: logging.Logger) -> Iterator[None]:
    """The driver of a Ray session prints every error its raylet reports (a worker killed, "There are 2 retries
    remaining, so the task will be retried"), in colour, to stdout, from a thread ``ray.init`` starts, whatever
    ``log_to_driver`` says. A run of ours says itself what matters (a worker that stays dead is one error line), so
    those lines go to ``log`` at DEBUG instead, without the colour codes (``log_to_driver=False`` keeps the workers'
    own output away too)."""
    worker = importlib.import_module("ray._private.worker")  # no public switch; the name its thread calls
    printed = worker.print_to_stdstream

    def to_the_log(data: dict, ignore_prefix: bool = False) -> None:
        for line in data.get("lines", []):
            log.debug("ray (%s): %s", data.get("pid"), ANSI_ESCAPE.sub("", str(line)))

    worker.print_to_stdstream = to_the_log
    try:
        yield
    finally:
        worker.print_to_stdstream = printed


@contextmanager
def loopback_only(ray: Any) -> Iterator[None]:
    """Ray >= 2 takes the machine's routable address even for ``_node_ip_address="127.0.0.1"``; with its cluster
    mode off it binds 127.0.0.1, as on macOS and Windows (read by this process at import, by the processes
    ``ray.init`` starts from the environment)."""
    constants = importlib.import_module("ray._private.ray_constants")
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    cluster, constants.ENABLE_RAY_CLUSTER = constants.ENABLE_RAY_CLUSTER, False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = cluster
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved
