"""Embed tokenised text with a biLM: the Python API and the ``elmo embed`` job.

Output layout (compatible with ``allennlp elmo`` and bilm-tf ``dump_bilm_embeddings``): one dataset per input
line, keyed by the line index ("0", "1", ...) or by the sentence itself, of shape

    --all      (L + 1, n_tokens, 2P)   layer 0 = token layer duplicated for both directions
    --top      (n_tokens, 2P)
    --average  (n_tokens, 2P)          mean of the L + 1 layers

plus ``sentence_to_index``: a (1,) string dataset holding a JSON object sentence -> key. An empty line gives
an empty (L + 1, 0, 2P) entry.

How a file is processed (``Embedder.embed_file``): lines are read lazily in chunks of ``chunk_size``; a stateless
run sorts each chunk by length and cuts it into batches of at most ``max_tokens_per_batch`` padded tokens (a
sentence's vectors do not depend on its batch), a stateful one keeps the file order. Each finished chunk is
written as a part file (``elmo.embedding.parts``), which makes ``resume`` and ``torchrun`` ranks possible; the
parts are merged into the output at the end, atomically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.char_encoding import as_tokens, token_lists
from elmo.devices import checked_device
from elmo.embedding.batch_plan import ordered_batches, token_budget_batches
from elmo.embedding.embed_options import EmbedOptions, OutputOptions
from elmo.embedding.parts import Parts, check_paths, sentence_key_problem
from elmo.embedding.text_input import Line, read_sentences
from elmo.embedding.token_layer_cache import TOKEN_ENCODERS, TokenVectors
from elmo.errors import ElmoError, InputFileError
from elmo.formats.warm_state import warm_state_for
from elmo.modules.bilm import BiLM, StatefulBiLM
from elmo.modules.elmo import checked_alignment
from elmo.modules.initial_state import WarmStartBiLM
from elmo.modules.sequence import remove_sentence_boundaries
from elmo.modules.threads import small_ops_on_one_thread
from elmo.precision import for_precision, resolve_precision
from elmo.runtime.distributed import DistInfo
from elmo.runtime.text_files import display_name, is_stream

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""Called after each batch with (sentences, tokens) done in it."""


class Embedder:
    """Runs a character-input biLM over sentences and returns every layer without the sentence boundaries.

    ``options`` (default :class:`EmbedOptions`) says how; keyword arguments replace single options of it
    (``Embedder(bilm, batch_size=16)``). ``device``: where to run (default: CUDA when available, else CPU).
    ``alignment``: a (2P, 2P) matrix W (:func:`elmo.formats.alignment.read_alignment`); every output vector, of
    every layer, becomes ``x @ W.T`` (aligned multilingual ELMo; its matrices were fitted on layer 1).
    ``initial_state``: where each sentence's LSTM state starts (``zero``, ``carry`` or ``warm``:
    :mod:`elmo.modules.initial_state`).
    """

    def __init__(
        self, bilm: BiLM, options: EmbedOptions | None = None, device: str | torch.device | None = None,
        alignment: torch.Tensor | None = None, **overrides: Any,
    ) -> None:
        if not isinstance(bilm.token_encoder, TOKEN_ENCODERS):
            raise ValueError("Embedder needs a character-input biLM")
        self.bilm = bilm
        self.options = dataclasses.replace(options or EmbedOptions(), **overrides)
        self.device = checked_device(device)
        self.precision = resolve_precision(self.options.precision, self.device)
        """What ``options.precision`` became on this device (never auto)."""
        self.warm_state = None
        """``initial_state="warm"``: the state every row starts from (stored with the model, or computed here in
        float32 on the CPU before the model moves)."""
        if self.options.initial_state == "warm":
            cpu_vectors = TokenVectors(bilm.eval().token_encoder)
            self.warm_state = warm_state_for(bilm, cpu_vectors, cpu_vectors.boundary_tokens)
        self.model = for_precision(self.bilm.to(self.device).eval(), self.precision)
        self._stateful = StatefulBiLM(self.model) if self.options.stateful else None
        self._warm = None if self.warm_state is None else WarmStartBiLM(self.model, self.warm_state)
        self._token_vectors = TokenVectors(self.model.token_encoder, self.options.vocab_cache)
        self.alignment = None if alignment is None else checked_alignment(alignment, bilm.output_dim).to(self.device)

    def _chunk_size(self, batch_size: int | None = None) -> int:
        """Stateful runs need whole batches per chunk, so that batch i is the same as without chunks."""
        chunk_size = self.options.chunk_size
        if not self.options.stateful:
            return chunk_size
        batch_size = batch_size or self.options.sentences_per_batch
        return -(-chunk_size // batch_size) * batch_size

    @property
    def num_layers(self) -> int:
        return self.model.num_layers

    @property
    def output_dim(self) -> int:
        return self.model.output_dim

    def reset_states(self) -> None:
        """Stateful mode: start every row from zero states again."""
        if self._stateful is not None:
            self._stateful.reset()

    @torch.inference_mode()
    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """B sentences, run as one batch in the given order -> B float32 arrays (L + 1, n_tokens, 2P)."""
        sentences = list(token_lists(sentences, "Embedder.embed_batch"))
        if not sentences:
            return []
        with small_ops_on_one_thread(self.device):
            tokens, mask = self._token_layer(sentences)  # (B, T+2, P), (B, T+2)
            run = next(m for m in (self._stateful, self._warm, self.model) if m is not None).contextualize
            out = run(tokens, mask)
            layers = [remove_sentence_boundaries(x, out.mask)[0] for x in out.layers]
            layers = torch.stack(layers, dim=1).float()  # (B, L+1, T, 2P)
            if self.alignment is not None:
                layers = torch.nn.functional.linear(layers, self.alignment)  # x @ W.T
            layers = to_host(layers)
        return [layers[b, :, : len(s)] for b, s in enumerate(sentences)]

    def _token_layer(self, sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors of ``<S> sentence </S>`` per row, (B, T+2, P), and the mask (B, T+2); padding is zero."""
        bos, eos = self._token_vectors.boundary_tokens
        rows = [[bos, *s, eos] for s in sentences]
        words = list(dict.fromkeys(w for row in rows for w in row))  # distinct, in order of appearance
        vectors = self._token_vectors(words)  # (U, P)
        position = {w: i + 1 for i, w in enumerate(words)}  # 0 = padding
        width = max(len(row) for row in rows)
        index = torch.zeros(len(rows), width, dtype=torch.long)  # (B, T+2)
        for b, row in enumerate(rows):
            index[b, : len(row)] = torch.tensor([position[w] for w in row])
        index = index.to(vectors.device)
        table = torch.cat([vectors.new_zeros(1, vectors.shape[1]), vectors])  # (U+1, P)
        return table[index], index > 0

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One tokenised sentence -> (L + 1, n_tokens, 2P)."""
        return next(self.embed_sentences([as_tokens(sentence, "Embedder.embed_sentence")]))

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int | None = None, progress: Progress | None = None
    ) -> Iterator[np.ndarray]:
        """Lazily embed many sentences (a generator); results come in input order.

        ``batch_size`` overrides the embedder's for this call. Memory: one chunk of results at a time.
        """
        iterator = token_lists(sentences, "Embedder.embed_sentences")
        while chunk := list(islice(iterator, self._chunk_size(batch_size))):
            results: list[np.ndarray | None] = [None] * len(chunk)
            for i, layers in self._embed_unordered(chunk, progress, batch_size):
                results[i] = layers
            yield from results  # type: ignore[misc]

    def _embed_unordered(
        self, sentences: list[list[str]], progress: Progress | None, batch_size: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(index into ``sentences``, layers) as each batch finishes; empty sentences need no model run."""
        lengths = [len(s) for s in sentences]
        batch_size = batch_size or self.options.sentences_per_batch
        if self.options.stateful:
            batches = ordered_batches(lengths, batch_size)
        else:
            batches = token_budget_batches(lengths, self.options.max_tokens_per_batch, batch_size)
            empty = np.zeros((self.num_layers, 0, self.output_dim), dtype=np.float32)
            yield from ((i, empty) for i, n in enumerate(lengths) if n == 0)
        for batch in batches:
            yield from zip(batch, self.embed_batch([sentences[i] for i in batch]))
            if progress is not None:
                progress(len(batch), sum(lengths[i] for i in batch))

    def embed_file(
        self,
        input_path: str | os.PathLike,
        output_path: str | os.PathLike,
        output: OutputOptions | None = None,
        resume: bool = False,
        ranks: DistInfo | None = None,
        progress: Progress | None = None,
        **overrides: Any,
    ) -> int:
        """Embed every sentence of ``input_path`` into the HDF5 file ``output_path``; returns the number of sentences.

        Args:
            input_path: UTF-8 text (``output.input_format``: text or CoNLL-U), plain or gzip; ``-`` (or a pipe) is
                read once, so it cannot ``resume``.
            output: what to write (default :class:`OutputOptions`); keyword arguments replace single options of
                it (``output_layers="top"``).
            resume: continue an interrupted run of the same command: only missing chunks are computed.
            ranks: this process's share of a ``torchrun`` job (default: the only process).
        """
        output = dataclasses.replace(output or OutputOptions(), **overrides)
        ranks = ranks or DistInfo()
        if self.options.stateful and (resume or ranks.world_size > 1):
            raise ElmoError("--stateful runs carry state through the whole file: they cannot --resume or use torchrun")
        input_path, output_path = Path(input_path), Path(output_path)
        check_paths(input_path, output_path, output.overwrite)
        if is_stream(input_path) and (resume or ranks.world_size > 1):
            raise ElmoError(f"{display_name(input_path)} is read once, as it comes: --resume and torchrun need an "
                            "input file they can read again")
        parts = Parts(output_path, self._manifest(input_path, output))
        if ranks.is_main:
            parts.prepare(resume)
        ranks.barrier()
        seen_keys: dict[str, int] = {}  # sentence -> its line number
        n_lines = n_chunks = 0
        lines = read_sentences(input_path, output.input_format, output.errors)
        try:
            while chunk := list(islice(lines, self._chunk_size())):
                keys = [self._key(line, output, seen_keys, input_path) for line in chunk]
                if ranks.owns(n_chunks) and not parts.done(n_chunks):
                    with parts.writing(n_chunks, keys, [" ".join(line.tokens) for line in chunk]) as part:
                        for i, layers in self._embed_unordered([line.tokens for line in chunk], progress):
                            data = _select(layers, output.output_layers).astype(output.output_dtype)
                            part.create_dataset(keys[i], data=data)
                n_lines += len(chunk)
                n_chunks += 1
        except InputFileError:
            if ranks.is_main:
                parts.discard()  # the input must change, so these parts could never be resumed
            raise
        ranks.barrier()
        if ranks.is_main:
            if n_lines == 0:
                log.warning("%s is empty: %s holds no sentences", display_name(input_path), output_path)
            parts.merge(n_chunks, output.forget_sentences)
        return n_lines

    def _manifest(self, input_path: Path, output: OutputOptions) -> dict:
        """What a resumed run must share with the run that wrote the parts."""
        stat = None if is_stream(input_path) else input_path.stat()  # a stream is never resumed
        return {
            "input": display_name(input_path) if stat is None else str(input_path.resolve()),
            "input_bytes": stat and stat.st_size, "input_mtime_ns": stat and stat.st_mtime_ns,
            "layers": output.output_layers, "output_dtype": output.output_dtype,
            "sentence_keys": output.use_sentence_keys, "errors": output.errors, "chunk_size": self.options.chunk_size,
            "precision": self.precision.value, "stateful": self.options.stateful,
            "parts_format": 2,  # 2: keys and sentences of a part stored as JSON
        } | ({} if output.input_format == "text" else {"input_format": output.input_format}) | (  # text: as before
            {} if self.warm_state is None else {"warm_state_sha256": _fingerprint(torch.cat(
                [x.reshape(-1) for x in self.warm_state]))}
        ) | (
            {} if self.alignment is None else {"alignment_sha256": _fingerprint(self.alignment)}
        )

    @staticmethod
    def _key(line: Line, output: OutputOptions, seen: dict[str, int], input_path: Path) -> str:
        """The dataset name of ``line``; with sentence keys, an error says why a sentence cannot be an HDF5 name."""
        if not output.use_sentence_keys:
            return str(line.index)
        key = " ".join(line.tokens)
        problem = sentence_key_problem(key, seen, output.forget_sentences)
        if problem:
            raise InputFileError(
                f"{display_name(input_path)}, line {line.line_number}: cannot use the sentence as a key: {problem}; "
                "drop --use-sentence-keys"
            )
        seen[key] = line.line_number
        return key


def to_host(x: torch.Tensor) -> np.ndarray:
    """A tensor as a NumPy array on the host. From a GPU through pinned (page-locked) memory, which the array then
    lives in: a copy into pageable memory ran at about 1 GB/s on an H200 machine and took 89% of ``elmo embed``'s
    GPU time, and copying out of the pinned buffer again cost as much (first-touch page faults). PyTorch caches
    a freed pinned block for a later one of a fitting size; with varying batch shapes that is rare, and allocating
    is now the largest host-side cost (docs/benchmarks/gpu.md)."""
    if x.device.type != "cuda":
        return x.cpu().numpy()
    staging = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
    staging.copy_(x, non_blocking=True)
    torch.cuda.current_stream(x.device).synchronize()
    return staging.numpy()


def _fingerprint(matrix: torch.Tensor) -> str:
    """Which alignment a run used: a resumed run must not mix parts aligned with another matrix."""
    return hashlib.sha256(matrix.cpu().numpy().tobytes()).hexdigest()


def _select(layers: np.ndarray, output_layers: str) -> np.ndarray:
    if output_layers == "top":
        return layers[-1]
    if output_layers == "average":
        return layers.mean(axis=0)
    return layers
