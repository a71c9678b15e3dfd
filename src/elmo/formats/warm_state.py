"""The warm initial state stored with a model: ``warm_state.safetensors`` beside its weights, in either format.

``initial_state="warm"`` starts every sentence from one fixed LSTM state, the state the original's stateful
inference holds after reading a short neutral text shipped with the package (``elmo/pretrained/warm/``;
:func:`elmo.modules.initial_state.stream_state`). ``elmo warm-state --model DIR`` computes it once and stores it in
the model directory, so that everyone who gets the directory starts from the same numbers (whatever their device
or precision); without the file it is computed when a warm run starts, in float32 on the CPU (the same numbers up
to float rounding). The file holds ``h`` (2, L, 1, P) and ``c`` (2, L, 1, C), float32, and in its metadata the
text's SHA-256 and a fingerprint of the weights it was computed with: a file left beside other weights (a new
export into the same directory) is refused, not silently used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.checked_reads import read_safetensors
from elmo.formats.locations import PRETRAINED_DIR, elmo_home
from elmo.modules.bilm import BiLM, BiLMState
from elmo.modules.initial_state import check_state, stream_state
from elmo.modules.token_vectors import TOKEN_ENCODERS, TokenVectors
from elmo.runtime.atomic_files import write_atomic
from elmo.runtime.hashing import sha256_file, tensor_fingerprint

log = logging.getLogger(__name__)

WARM_STATE_FILE = "warm_state.safetensors"
WARM_STATE_FORMAT = "elmo-warm-state/1"
WARM_TEXT = Path(__file__).resolve().parents[1] / "pretrained" / "warm" / "warm_text.txt"
"""The neutral text: 11 sentences (444 tokens) of public-domain expository prose, one tokenised sentence per line
(its source: ``pretrained/warm/README.md``)."""

EncodeWords = Callable[[list[str]], torch.Tensor]
"""Distinct words -> their token-layer vectors (U, P)."""


def warm_text() -> list[list[str]]:
    """The shipped neutral text, one token list per sentence."""
    return [line.split() for line in WARM_TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]


def weights_fingerprint(bilm: BiLM) -> str:
    """Which weights a warm state belongs to: SHA-256 over each tensor's name, shape and first 256 values."""
    return tensor_fingerprint(bilm.state_dict(), "sha256", head=256)


def compute_warm_state(bilm: BiLM, encode_words: EncodeWords, boundary_tokens: tuple[str, str]) -> BiLMState:
    """The warm state of ``bilm`` (as it is: device and dtype), from the shipped text; float32 on the CPU."""
    h, c = stream_state(bilm, warm_text(), encode_words, boundary_tokens)
    return h.float().cpu(), c.float().cpu()


def warm_state_for(bilm: BiLM, encode_words: EncodeWords, boundary_tokens: tuple[str, str]) -> BiLMState:
    """The stored warm state that :func:`elmo.formats.model_files.load_bilm` attached to ``bilm``, else the one
    computed from the shipped text (then kept on ``bilm`` for the next caller)."""
    stored = bilm.warm_state
    if stored is None:
        log.info("no %s with the model: computing the warm state from the shipped text (`elmo warm-state` stores "
                 "it)", WARM_STATE_FILE)
        stored = compute_warm_state(bilm, encode_words, boundary_tokens)
        bilm.warm_state = stored
    return stored


def write_warm_state(directory: str | os.PathLike, bilm: BiLM, state: BiLMState) -> Path:
    """Store ``state`` (h, c) as ``directory/warm_state.safetensors``, atomically."""
    h, c = check_state(bilm, state, "write_warm_state")
    path = Path(directory) / WARM_STATE_FILE
    metadata = {
        "format": WARM_STATE_FORMAT, "weights": weights_fingerprint(bilm),
        "text_sha256": sha256_file(WARM_TEXT),
        "text_tokens": str(sum(len(s) for s in warm_text())),
    }
    tensors = {name: x.detach().to("cpu", torch.float32).contiguous() for name, x in (("h", h), ("c", c))}
    write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))
    return path


def read_warm_state(path: str | os.PathLike, bilm: BiLM) -> BiLMState:
    """The warm state stored in ``path`` for ``bilm``; a one-line :class:`WeightFileError` naming the file when it is
    damaged, has the wrong tensors or shapes, or was computed for other weights."""
    path = Path(path)
    tensors = read_safetensors(path)
    try:
        with safe_open(path, framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as e:
        raise WeightFileError(f"{path}: not a readable safetensors file ({e})") from e
    if metadata.get("format") != WARM_STATE_FORMAT:
        raise WeightFileError(f"{path}: not a warm state (expected metadata format {WARM_STATE_FORMAT!r})")
    if sorted(tensors) != ["c", "h"]:
        raise WeightFileError(f"{path}: expected the tensors 'h' and 'c', found {sorted(tensors)}")
    try:
        state = check_state(bilm, (tensors["h"], tensors["c"]), str(path))
    except ValueError as e:
        raise WeightFileError(str(e)) from e
    if metadata.get("weights") != weights_fingerprint(bilm):
        raise WeightFileError(f"{path}: computed for other weights than this model's; run `elmo warm-state --model "
                              f"{path.parent} --force` (or delete the file)")
    return state[0].float(), state[1].float()


def warm_state_directory(bilm: BiLM, model_dir: str | os.PathLike) -> Path:
    """Where the warm state of ``bilm``, loaded from ``model_dir``, is stored: that directory; for a model shipped
    in the package, which is read-only, the user's cache, ``$ELMO_HOME/warm-state/<weights fingerprint>/``."""
    directory = Path(model_dir)
    if directory.resolve().is_relative_to(PRETRAINED_DIR.resolve()):
        return elmo_home() / "warm-state" / weights_fingerprint(bilm)
    return directory


def attach_stored_warm_state(bilm: BiLM, directory: str | os.PathLike, read: bool = True) -> BiLM:
    """Give ``bilm`` the warm state stored for ``directory`` (if any, and if ``read``; see
    :func:`warm_state_directory`), checked: ``bilm.warm_state``."""
    path = warm_state_directory(bilm, directory) / WARM_STATE_FILE if read else None
    if path is not None and path.is_file():
        bilm.warm_state = read_warm_state(path, bilm)
    return bilm


def model_warm_state(bilm: BiLM) -> BiLMState:
    """``bilm``'s warm state computed from the shipped text (float32, on the CPU), ignoring any stored one."""
    if not isinstance(bilm.token_encoder, TOKEN_ENCODERS):
        raise ElmoError("a warm state needs a character-input biLM (token-input models are not supported)")
    vectors = TokenVectors(bilm.eval().token_encoder)
    return compute_warm_state(bilm, vectors, vectors.boundary_tokens)


def check_warm_state_destination(model_dir: str | os.PathLike, force: bool = False) -> None:
    """Refuse a model directory that already holds a warm state (one line naming ``--force``), unless ``force``."""
    path = Path(model_dir) / WARM_STATE_FILE
    if not force and os.path.lexists(path):
        raise ConfigError(f"{path} exists; pass --force to replace it")
