"""Embed tokenised text with a biLM and write the layers to HDF5 (the ``elmo embed`` job).

Output layout (compatible with ``allennlp elmo`` and bilm-tf ``dump_bilm_embeddings``): one float32 dataset per
input line, keyed by the line index ("0", "1", ...) or by the sentence itself, of shape

    --all      (L + 1, n_tokens, 2P)   layer 0 = token layer duplicated for both directions
    --top      (n_tokens, 2P)
    --average  (n_tokens, 2P)          mean of the L + 1 layers

plus ``sentence_to_index``: a (1,) string dataset holding a JSON object sentence -> key.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo.char_encoding import batch_to_ids
from elmo.errors import InputFileError
from elmo.modules.bilm import BiLM, StatefulBiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.sequence import remove_sentence_boundaries

OUTPUT_LAYERS = ("all", "top", "average")


def read_sentences(path: str | os.PathLike) -> Iterator[list[str]]:
    """Yield one whitespace-tokenised sentence per line; a line that is not UTF-8 raises with its number."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: no such input file")
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputFileError(f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start})") from e
            yield line.split()


@dataclass
class Embedder:
    """Runs a biLM over sentences and returns every layer without the sentence boundaries.

    Args:
        bilm: a character-input biLM.
        batch_size: sentences per forward pass.
        stateful: carry LSTM states across batches row by row, as the original does (batches are then taken
            in the given order); default: every sentence starts from zero states.
        device: where to run (default: CUDA when available, else CPU).
    """

    bilm: BiLM
    batch_size: int = 64
    stateful: bool = False
    device: str | torch.device | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.bilm.token_encoder, CharCNNEncoder):
            raise ValueError("Embedder needs a character-input biLM")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.device is None:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.bilm = self.bilm.to(self.device).eval()
        self._stateful = StatefulBiLM(self.bilm) if self.stateful else None
        self._width = self.bilm.token_encoder.config.max_characters_per_token

    @torch.inference_mode()
    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """B sentences -> B float32 arrays (L + 1, n_tokens, 2P)."""
        ids = batch_to_ids(sentences, self._width, add_sentence_boundaries=True).to(self.device)
        run = self._stateful if self._stateful is not None else self.bilm
        out = run(ids)
        layers = torch.stack([remove_sentence_boundaries(x, out.mask)[0] for x in out.layers], dim=1)  # (B, L+1, T, 2P)
        layers = layers.float().cpu().numpy()
        return [layers[b, :, : len(s)] for b, s in enumerate(sentences)]

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One tokenised sentence -> (L + 1, n_tokens, 2P)."""
        return self.embed_batch([list(sentence)])[0]

    def embed_sentences(self, sentences: Iterable[list[str]]) -> Iterator[np.ndarray]:
        """Lazily embed many sentences, in order."""
        batch: list[list[str]] = []
        for sentence in sentences:
            batch.append(list(sentence))
            if len(batch) == self.batch_size:
                yield from self.embed_batch(batch)
                batch = []
        if batch:
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_path: str | os.PathLike,
        output_path: str | os.PathLike,
        output_layers: str = "all",
        use_sentence_keys: bool = False,
        forget_sentences: bool = False,
    ) -> int:
        """Embed every line of ``input_path`` into the HDF5 file ``output_path``; returns the number of lines."""
        if output_layers not in OUTPUT_LAYERS:
            raise ValueError(f"output_layers must be one of {OUTPUT_LAYERS}, got {output_layers!r}")
        output_path = Path(output_path)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{output_path.name}.", suffix=".tmp", dir=output_path.parent)
        os.close(fd)
        sentence_to_index: dict[str, str] = {}
        count = 0
        try:
            with h5py.File(tmp, "w") as out:
                sentences = read_sentences(input_path)
                for index, (sentence, layers) in enumerate(_paired(sentences, self.embed_sentences)):
                    text = " ".join(sentence)
                    key = text if use_sentence_keys else str(index)
                    if use_sentence_keys and (key in out or "/" in key or key in ("", ".")):
                        raise InputFileError(
                            f"{input_path}, line {index + 1}: cannot use the sentence as a key "
                            "(duplicate, empty, or contains '/'); drop --use-sentence-keys"
                        )
                    out.create_dataset(key, data=_select(layers, output_layers), dtype="float32")
                    sentence_to_index[text] = key
                    count += 1
                if not forget_sentences:
                    dataset = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
                    dataset[0] = json.dumps(sentence_to_index)
            os.replace(tmp, output_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return count


def _paired(sentences: Iterator[list[str]], embed) -> Iterator[tuple[list[str], np.ndarray]]:
    """Zip sentences with their embeddings while reading the input only once."""
    kept: deque[list[str]] = deque()

    def remember() -> Iterator[list[str]]:
        for sentence in sentences:
            kept.append(sentence)
            yield sentence

    for layers in embed(remember()):
        yield kept.popleft(), layers


def _select(layers: np.ndarray, output_layers: str) -> np.ndarray:
    if output_layers == "top":
        return layers[-1]
    if output_layers == "average":
        return layers.mean(axis=0)
    return layers
