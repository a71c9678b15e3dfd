"""The local embedder: a character-input biLM run here, sentences in, every layer out (the Python API of
``elmo embed``; the file job is :mod:`elmo.embedding.file_job`, the contract :mod:`elmo.embedding.contract`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from elmo.devices import checked_device
from elmo.embedding.contract import Progress, embed_in_order, one_batch_at_a_time
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.pipeline import BatchPipeline, HostBuffers, LentBuffer, PipelineStats, pipelined
from elmo.embedding.selection import selection_of
from elmo.formats.warm_state import warm_state_for
from elmo.modules.bilm import BiLM, StatefulBiLM
from elmo.modules.elmo import checked_alignment
from elmo.modules.initial_state import WarmStartBiLM
from elmo.modules.long_sequences import contextualize_in_windows
from elmo.modules.lstm import WordTable
from elmo.modules.sequence import remove_sentence_boundaries
from elmo.modules.token_vectors import TOKEN_ENCODERS, TokenVectors, token_input_ids
from elmo.precision import for_precision, resolve_precision
from elmo.runtime.hashing import digest_of
from elmo.runtime.interrupts import stop_point
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.text.char_encoding import as_tokens, token_lists

PIPELINE_DEPTH = 2
"""Batches the pipeline prepares ahead of the model, and batches waiting for their copy out. Two let each stage
start its next batch while the others finish theirs; more would only hold more memory (each waiting batch holds
its output buffer: ``depth + 1`` buffers per size at most)."""


@dataclass
class PreparedBatch:
    """A batch after :meth:`Embedder.prepare`: host data only."""

    sentences: list[list[str]]
    words: list[str]
    """Distinct, the boundary tokens included, in order of appearance."""
    ids: np.ndarray | None
    """The encoder's inputs for ``words``, (U, W) (None: no words)."""
    index: torch.Tensor
    """(B, T+2) int64 on the host: each row's words as positions in ``words`` + 1; 0 after the row's end."""


@dataclass
class RanBatch:
    """A batch after :meth:`Embedder.run`: its layers (B, L+1, T, 2P) float32 on the host, in an array of their own
    (``layers``) or in a lent buffer (``lent``, the pipeline's)."""

    sentences: list[list[str]]
    layers: np.ndarray | None = None
    lent: LentBuffer | None = None

    def release(self) -> None:
        """Give the lent buffer back without reading it (a batch the pipeline will not collect)."""
        if self.lent is not None:
            self.lent.give_back()


class Embedder:
    """Runs a character-input biLM over sentences and returns every layer without the sentence boundaries.

    ``options`` (default :class:`EmbedOptions`) says how; keyword arguments replace single options of it
    (``Embedder(bilm, batch_size=16)``). ``device``: where to run (default: CUDA when available, else CPU).
    ``alignment``: a (2P, 2P) matrix W (:func:`elmo.formats.alignment.read_alignment`); every output vector, of
    every layer, becomes ``x @ W.T`` (aligned multilingual ELMo; its matrices were fitted on layer 1).
    ``initial_state``: where each sentence's LSTM state starts (``zero``, ``carry`` or ``warm``:
    :mod:`elmo.modules.initial_state`). ``model_name``: how outputs name the model (:meth:`provenance`).
    Keeps the :class:`~elmo.embedding.contract.SentenceEmbedder` contract.
    """

    def __init__(
        self, bilm: BiLM, options: EmbedOptions | None = None, device: str | torch.device | None = None,
        alignment: torch.Tensor | None = None, model_name: str | None = None, **overrides: Any,
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
        self.model_name = model_name
        self.host_buffers = HostBuffers(self.device, PIPELINE_DEPTH + 1)
        """The pipeline's output buffers (pinned on CUDA), kept for the embedder's life: the batches of every call
        of :meth:`embed_batches` reuse them."""
        self.pipeline_stats = PipelineStats()
        """The pipeline's busy and wall seconds, added up over every call of :meth:`embed_batches`."""

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
        """B sentences, run as one batch in the given order -> B float32 arrays (L + 1, n_tokens, 2P): the three
        stages of a batch (:meth:`prepare`, :meth:`run`, :meth:`collect`) one after another. A batch longer than
        ``options.sequence_window`` positions runs a window at a time (:meth:`_embed_in_windows`)."""
        return self.collect(self.run(self.prepare(sentences)))

    def embed_batches(self, batches: Iterable[list[list[str]]]) -> Generator[list[np.ndarray], None, None]:
        """Each of ``batches`` as :meth:`embed_batch` would embed it, in order (a generator). With the pipeline
        (``options.pipeline``: on, or auto on CUDA) the next batches are prepared and the last ones collected on two
        background threads while the model runs (:class:`~elmo.embedding.pipeline.BatchPipeline`); the vectors are
        the same bit for bit. Batches longer than the window and carried states go through it too: their run is
        the one-batch-at-a-time run, and the runs keep the batches' order."""
        if not pipelined(self.options.pipeline, self.device):
            return one_batch_at_a_time(self, batches)
        pipeline = BatchPipeline(partial(self.prepare, caller="Embedder.embed_batches"),
                                 partial(self.run, buffers=self.host_buffers), self.collect, release=RanBatch.release,
                                 depth=PIPELINE_DEPTH, stats=self.pipeline_stats)
        return pipeline(batches)

    def prepare(self, sentences: list[list[str]], caller: str = "Embedder.embed_batch") -> PreparedBatch:
        """The host work of a batch, no model: its distinct words (with the boundary tokens), their encoder inputs
        and each row of ``<S> sentence </S>`` as indices into them. Reads only the encoder's configuration, so it
        may run on another thread while the model runs."""
        sentences = list(token_lists(sentences, caller))
        bos, eos = self._token_vectors.boundary_tokens
        rows = [[bos, *s, eos] for s in sentences]
        words = list(dict.fromkeys(w for row in rows for w in row))  # distinct, in order of appearance
        position = {w: i + 1 for i, w in enumerate(words)}  # 0 = padding
        index = np.zeros((len(rows), max(map(len, rows), default=0)), dtype=np.int64)  # (B, T+2)
        for b, row in enumerate(rows):
            index[b, : len(row)] = [position[w] for w in row]
        ids = token_input_ids(self.model.token_encoder, words) if words else None  # (U, W)
        return PreparedBatch(sentences, words, ids, torch.from_numpy(index))

    @torch.inference_mode()
    def run(self, batch: PreparedBatch, buffers: HostBuffers | None = None) -> RanBatch:
        """The model on a prepared batch, inside the CPU thread policy: every layer without the boundaries, on the
        host. With ``buffers`` (the pipeline) the layers are copied into a lent buffer, from a GPU without waiting
        for the copy; without, they are the array :func:`to_host` makes."""
        if not batch.sentences:
            return RanBatch([])
        with small_ops_on_one_thread(self.device):
            table, index = self._token_table(batch)  # (U+1, P), (B, T+2)
            if index.shape[1] > self.options.sequence_window:
                return RanBatch(batch.sentences, self._embed_in_windows(table, index))  # (B, L+1, T, 2P)
            tokens, mask = table[index], index > 0  # (B, T+2, P), (B, T+2); padding is zero
            run = next(m for m in (self._stateful, self._warm, self.model) if m is not None).contextualize
            out = run(tokens, mask, words=WordTable(table, index))  # the first layer's input half once per word
            # each layer is let go once copied: a long sequence (a protein) holds two copies of its layers, not three
            layers = [remove_sentence_boundaries(out.layers.pop(0), out.mask)[0] for _ in range(len(out.layers))]
            layers = torch.stack(layers, dim=1).float()  # (B, L+1, T, 2P)
            if self.alignment is not None:
                layers = torch.nn.functional.linear(layers, self.alignment)  # x @ W.T
            if buffers is None:
                return RanBatch(batch.sentences, to_host(layers))
            return RanBatch(batch.sentences, lent=buffers.copy_in(layers))

    @staticmethod
    def collect(batch: RanBatch) -> list[np.ndarray]:
        """Each sentence's (L + 1, n_tokens, 2P) of a run batch: views of the batch's array, or, from a lent buffer,
        copies, the buffer given back."""
        if batch.lent is None:
            return [batch.layers[b, :, : len(s)] for b, s in enumerate(batch.sentences)]
        try:
            layers = batch.lent.ready()
            return [layers[b, :, : len(s)].copy() for b, s in enumerate(batch.sentences)]
        finally:
            batch.lent.give_back()

    def _embed_in_windows(self, table: torch.Tensor, index: torch.Tensor) -> np.ndarray:
        """Every layer of a batch longer than the window, (B, L+1, T, 2P) float32 on the host: the positions after
        ``<S>`` (a row's tokens first, then its ``</S>`` and padding). Written a window of positions at a time, the
        LSTM states carried from window to window (:func:`~elmo.modules.long_sequences.contextualize_in_windows`),
        so the memory is the output plus one window, a row's vectors are one contiguous block, and a stop request
        (SIGINT/SIGTERM) is honoured between windows (:func:`~elmo.runtime.interrupts.stop_point`)."""
        batch, time = index.shape
        window = self.options.sequence_window
        out = torch.empty(batch, self.num_layers, time - 2, self.output_dim, dtype=torch.float32,
                          pin_memory=self.device.type == "cuda")
        state = next((m.rows(batch) for m in (self._stateful, self._warm) if m is not None), None)
        final = contextualize_in_windows(self.model, lambda positions: table[index.gather(1, positions)], index > 0,
                                         out, state, window=window, between_windows=stop_point, offset=1)
        if self._stateful is not None:
            self._stateful.keep(final)
        if self.alignment is not None:
            for start in range(0, time - 2, window):
                piece = out[:, :, start : start + window]  # (B, L+1, w, 2P)
                piece.copy_(torch.nn.functional.linear(piece.to(self.device), self.alignment))  # x @ W.T
        return out.numpy()

    def _token_table(self, batch: PreparedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The token vectors of a batch's distinct words, (U+1, P) with row 0 zero (padding), and the batch's index
        on the model's device, (B, T+2). On the run's thread: the vocabulary cache changes as it goes."""
        vectors = self._token_vectors(batch.words, batch.ids)  # (U, P)
        index = batch.index.to(vectors.device)
        table = torch.cat([vectors.new_zeros(1, vectors.shape[1]), vectors])  # (U+1, P)
        return table, index

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One tokenised sentence -> (L + 1, n_tokens, 2P)."""
        return next(self.embed_sentences([as_tokens(sentence, "Embedder.embed_sentence")]))

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int | None = None, progress: Progress | None = None,
        **selection: Any,
    ) -> Iterator[np.ndarray]:
        """Lazily embed many sentences (a generator); results come in input order.

        Every layer, (L + 1, n_tokens, 2P) per sentence, unless ``selection`` holds
        :class:`~elmo.embedding.selection.VectorSelection` fields: ``pool="mean", layer="average"`` gives one (2P,)
        vector per sentence. ``batch_size`` overrides the embedder's for this call. Memory: one chunk of results at
        a time.
        """
        chosen = selection_of(**selection) if selection else None
        return embed_in_order(self, sentences, batch_size, progress, "Embedder.embed_sentences", chosen)

    def provenance(self) -> dict[str, str]:
        return ({} if self.model_name is None else {"model": self.model_name}) | {
            "precision": self.precision.value, "device": str(self.device), "initial_state": self.options.initial_state}

    def identity(self) -> dict[str, object]:
        return {"precision": self.precision.value, "stateful": self.options.stateful} | (
            {} if self.warm_state is None else {"warm_state_sha256": _sha256(torch.cat(
                [x.reshape(-1) for x in self.warm_state]))}
        ) | ({} if self.alignment is None else {"alignment_sha256": _sha256(self.alignment)})


def _sha256(tensor: torch.Tensor) -> str:
    return digest_of(tensor.cpu().numpy().tobytes())


def to_host(x: torch.Tensor) -> np.ndarray:
    """A tensor as a NumPy array on the host. From a GPU through pinned (page-locked) memory, which the array then
    lives in: a copy into pageable memory is several times slower, and copying out of the pinned buffer again costs
    as much as the copy itself (first-touch page faults); docs/benchmarks/gpu.md has the measurements."""
    if x.device.type != "cuda":
        return x.cpu().numpy()
    staging = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
    staging.copy_(x, non_blocking=True)
    torch.cuda.current_stream(x.device).synchronize()
    return staging.numpy()
