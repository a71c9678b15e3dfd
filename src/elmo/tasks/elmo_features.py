"""ELMo for task models, in two interchangeable forms.

* cached (the default): the biLM is frozen, so each sentence's L + 1 layer activations are computed once with
  :class:`elmo.Embedder` and stored (:class:`ActivationCache`); every epoch then runs only :class:`CachedElmo`,
  the scalar mixes + dropout, over those stored tensors. This saves running the biLM every epoch.
* on the fly: :class:`elmo.Elmo`, the biLM inside the model (for fine-tuning it, or for data too big to cache).

Both are an :class:`~elmo.modules.elmo.ElmoHead` (the mixes, dropout and their penalty), so a task checkpoint
(saved without the biLM weights) loads into either, and both give the same output for the same sentences.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import h5py
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from elmo.embedding.embedder import Embedder
from elmo.errors import InputFileError
from elmo.modules.elmo import Elmo, ElmoHead
from elmo.runtime.hashing import digest_of, tensor_fingerprint
from elmo.runtime.threads import small_ops_on_one_thread

log = logging.getLogger(__name__)

FROZEN_TOP_WEIGHT = -9e10  # pre-softmax weight that makes a layer's softmax weight exactly 0


def mix_initial_weights(num_layers: int, layers: str) -> list[float] | None:
    """Fixed weights that select the top layer for ``layers="top"``; None (learned, start uniform) for ``"all"``."""
    if layers == "all":
        return None
    if layers == "top":
        return [FROZEN_TOP_WEIGHT] * (num_layers - 1) + [1.0]
    raise ValueError(f"elmo layers must be 'all' or 'top', got {layers!r}")


class CachedElmo(ElmoHead):
    """:class:`ElmoHead` over precomputed biLM layers: the same computation as :class:`elmo.Elmo` without the biLM."""

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """layers (B, L+1, T, D), mask (B, T) -> ``num_output_representations`` tensors (B, T, D)."""
        return self.mix(list(layers.unbind(dim=1)), mask)


def elmo_representations(elmo: ElmoHead, mask: torch.Tensor, elmo_ids=None, elmo_layers=None) -> list[torch.Tensor]:
    """Run either form: :class:`CachedElmo` on ``elmo_layers`` (B, L+1, T, D) or :class:`Elmo` on ``elmo_ids``."""
    if isinstance(elmo, CachedElmo):
        if elmo_layers is None:
            raise ValueError("a cached-ELMo model needs the batch's precomputed layers")
        return elmo(elmo_layers, mask)
    if isinstance(elmo, Elmo):
        if elmo_ids is None:
            raise ValueError("an on-the-fly ELMo model needs the batch's character ids")
        inference = not torch.is_grad_enabled()  # predicting: the CPU thread policy of inference, as the Embedder's
        with small_ops_on_one_thread(elmo_ids.device) if inference else contextlib.nullcontext():
            return elmo(elmo_ids).representations
    raise TypeError(f"unsupported ELMo module {type(elmo).__name__}")


def sentence_key(words: Sequence[str]) -> str:
    """Content address of a sentence: the same sentence in any file or data slice shares one cache entry."""
    return digest_of("\x1f".join(words), "sha1")


class ActivationCache:
    """All biLM layers (L + 1, n, D) per distinct sentence, in memory or in an HDF5 file reused across runs.

    The HDF5 file only grows: sentences already in it are never recomputed, so every seed, ablation and data
    fraction of an experiment shares one pass of the biLM over each sentence. It records a hash of the biLM's
    weights and refuses to serve another biLM. The file is open for writing only while :meth:`ensure` adds
    sentences and read-only otherwise, so several processes can train from one cache at the same time once it
    holds their sentences.
    """

    def __init__(self, embedder: Embedder, path: str | os.PathLike | None = None, progress: bool = True) -> None:
        self.embedder = embedder
        self.path = Path(path) if path is not None else None
        self.progress = progress
        self._memory: dict[str, np.ndarray] = {}
        self._file: h5py.File | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            signature = weights_hash(embedder.bilm)
            if not self.path.exists():
                attrs = self._open("a").attrs
                attrs["bilm_weights_sha1"], attrs["precision"] = signature, embedder.precision.value
                attrs["initial_state"] = embedder.options.initial_state
            self._open("r")
            if self._file.attrs.get("bilm_weights_sha1") != signature:
                self.close()
                raise InputFileError(f"{self.path}: this activation cache was made with another biLM; use another file")
            made_in = self._file.attrs.get("precision", "fp32")  # caches of earlier versions: fp32
            if made_in != embedder.precision.value:
                self.close()
                raise InputFileError(f"{self.path}: this activation cache holds {made_in} activations, this run "
                                     f"computes {embedder.precision.value} (elmo.precision); use another file")
            started = self._file.attrs.get("initial_state", "zero")  # caches of earlier versions: zero
            if started != embedder.options.initial_state:
                self.close()
                raise InputFileError(f"{self.path}: this activation cache holds activations from {started} initial "
                                     f"states, this run starts from {embedder.options.initial_state} "
                                     "(elmo.initial_state); use another file")

    def _open(self, mode: str) -> h5py.File:
        assert self.path is not None
        self.close()
        try:
            self._file = h5py.File(self.path, mode)
        except OSError as e:
            raise InputFileError(
                f"{self.path}: cannot open the activation cache ({e}); is another run adding sentences to it, or "
                "was it left damaged by a crash? (then delete it)"
            ) from e
        return self._file

    def __contains__(self, words: Sequence[str]) -> bool:
        key = sentence_key(words)
        return key in self._memory or (self._file is not None and key in self._file)

    def ensure(self, sentences: Iterable[Sequence[str]]) -> int:
        """Embed every sentence not stored yet; returns how many were computed."""
        missing: dict[str, list[str]] = {}
        for words in sentences:
            if words not in self and sentence_key(words) not in missing:
                missing[sentence_key(words)] = list(words)
        if not missing:
            return 0
        if self.path is not None:
            self._open("a")
        bar = tqdm(total=len(missing), desc="biLM activations", unit="sent", disable=not self.progress, leave=False)
        try:
            for (key, words), layers in zip(missing.items(), self.embedder.embed_sentences(missing.values())):
                if layers.shape[1] != len(words):
                    raise RuntimeError(f"Embedder returned {layers.shape[1]} vectors for a {len(words)}-token sentence")
                self._store(key, layers.astype(np.float32, copy=False))
                bar.update(1)
        finally:
            bar.close()
            if self.path is not None:
                self._open("r")
        return len(missing)

    def _store(self, key: str, layers: np.ndarray) -> None:
        if self._file is not None:
            self._file.create_dataset(key, data=layers)
        else:
            self._memory[key] = layers

    def get(self, words: Sequence[str]) -> np.ndarray:
        """(L + 1, n, D) float32 for a stored sentence."""
        key = sentence_key(words)
        if key in self._memory:
            return self._memory[key]
        if self._file is not None and key in self._file:
            return self._file[key][()]
        raise KeyError(f"sentence not in the activation cache (call ensure first): {' '.join(words)[:80]!r}")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def weights_hash(module: nn.Module) -> str:
    """sha1 over every tensor of the module's state (names, shapes and values)."""
    return tensor_fingerprint(module.state_dict(), "sha1")


def bilm_fingerprint(bilm_dir: str | os.PathLike) -> str:
    """Short id of a biLM directory's files (names, sizes, mtimes), to name its activation cache."""
    stats = [(f.name, f.stat()) for f in sorted(p for p in Path(bilm_dir).iterdir() if p.is_file())]
    return digest_of((f"{name}:{stat.st_size}:{stat.st_mtime_ns};" for name, stat in stats), "sha1")[:16]


def pad_layers(arrays: Sequence[np.ndarray]) -> torch.Tensor:
    """B arrays (L + 1, n_b, D) -> zero-padded (B, L + 1, T, D)."""
    num_layers, _, dim = arrays[0].shape
    time = max(a.shape[1] for a in arrays)
    out = np.zeros((len(arrays), num_layers, time, dim), dtype=np.float32)
    for b, a in enumerate(arrays):
        out[b, :, : a.shape[1]] = a
    return torch.from_numpy(out)
