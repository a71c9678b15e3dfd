"""The embedding contract: tokenised sentences in, one float32 array (L + 1, n_tokens, 2P) per sentence out.

Two halves. :class:`ModelDescription` says what makes the vectors (options, precision, layers, width, provenance,
identity): what an output records and a resumed job checks. :class:`SentenceEmbedder` is a description that also
runs batches, here: :class:`~elmo.embedding.embedder.Embedder` runs a biLM in this process,
:class:`~elmo.serving.remote.RemoteEmbedder` sends the batches to ``elmo serve``. An engine whose batches run
elsewhere (``elmo.embedding.engines.ray``) has only the description, as plain values (:class:`DescribedModel`).
What is built on embedders (the file job, the service, the AllenNLP API) takes any :class:`SentenceEmbedder`, and
batches through :func:`embed_unordered`, so sentences are grouped the same way whoever computes the vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from itertools import islice
from typing import Protocol, runtime_checkable

import numpy as np

from elmo.embedding.batch_plan import ordered_batches, token_budget_batches
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.selection import VectorSelection
from elmo.precision import Precision
from elmo.text.char_encoding import token_lists

Progress = Callable[[int, int], None]
"""Called after each batch with (sentences, tokens) done in it."""


@runtime_checkable
class ModelDescription(Protocol):
    """What makes the vectors, whoever runs the batches: recorded in every output, checked by ``--resume``."""

    options: EmbedOptions
    precision: Precision
    """What the vectors were computed in (never ``auto``)."""

    @property
    def num_layers(self) -> int:
        """L + 1: the token layer and one per LSTM layer."""

    @property
    def output_dim(self) -> int:
        """2P: both directions' projections."""

    def provenance(self) -> dict[str, str]:
        """What made the vectors (model, precision, device, initial state): recorded in every output."""

    def identity(self) -> dict[str, object]:
        """What a resumed file job must share with the run that wrote the first parts (beyond the output's
        settings): the precision, the initial state and any weights outside the model (warm state, alignment)."""


@runtime_checkable
class SentenceEmbedder(ModelDescription, Protocol):
    """A model description that runs batches here, as given."""

    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """B sentences, run as one batch in the given order -> B float32 arrays (L + 1, n_tokens, 2P)."""

    def embed_batches(self, batches: Iterable[list[list[str]]]) -> Generator[list[np.ndarray], None, None]:
        """Each batch as :meth:`embed_batch` embeds it, in order, as a generator (closed when its consumer stops
        early): where an embedder can overlap batches (the local one's pipeline), here. One that cannot takes
        :func:`one_batch_at_a_time`."""


def one_batch_at_a_time(
    embedder: SentenceEmbedder, batches: Iterable[list[list[str]]]
) -> Generator[list[np.ndarray], None, None]:
    """``embed_batches`` of an embedder that has nothing to overlap: each batch's ``embed_batch`` in turn. A class
    takes it as its method: ``embed_batches = one_batch_at_a_time``."""
    for batch in batches:
        yield embedder.embed_batch(batch)


@dataclass(frozen=True)
class DescribedModel:
    """A :class:`ModelDescription` as plain values, small and picklable: what the workers of an engine in other
    processes report of the model they run."""

    options: EmbedOptions
    precision: Precision
    num_layers: int
    output_dim: int
    provenance_record: dict[str, str]
    identity_record: dict[str, object]

    @classmethod
    def of(cls, model: ModelDescription) -> DescribedModel:
        return cls(model.options, model.precision, model.num_layers, model.output_dim, model.provenance(),
                   model.identity())

    def provenance(self) -> dict[str, str]:
        return dict(self.provenance_record)

    def identity(self) -> dict[str, object]:
        return dict(self.identity_record)


def embed_unordered(
    embedder: SentenceEmbedder, sentences: list[list[str]], progress: Progress | None = None,
    batch_size: int | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """(index into ``sentences``, layers) as each batch finishes; empty sentences need no model run.

    Stateless runs sort by length into batches of at most ``options.max_batch_tokens`` padded tokens (a sentence's
    vectors do not depend on its batch); carried states keep the input order. The batches go to the embedder's
    ``embed_batches``, which may overlap them (the local embedder's pipeline).
    """
    options = embedder.options
    lengths = [len(s) for s in sentences]
    batch_size = batch_size or options.sentences_per_batch
    if options.stateful:
        batches = ordered_batches(lengths, batch_size)
    else:
        batches = token_budget_batches(lengths, options.max_batch_tokens, batch_size)
        empty = np.zeros((embedder.num_layers, 0, embedder.output_dim), dtype=np.float32)
        yield from ((i, empty) for i, n in enumerate(lengths) if n == 0)
    # closed when this generator stops early: a pipeline's threads stop then, not when it is collected
    with closing(embedder.embed_batches([sentences[i] for i in batch] for batch in batches)) as results:
        for batch, layers in zip(batches, results, strict=True):
            yield from zip(batch, layers)
            if progress is not None:
                progress(len(batch), sum(lengths[i] for i in batch))


def chunk_size(options: EmbedOptions, batch_size: int | None = None) -> int:
    """Lines sorted together. With carried states a chunk holds whole batches, so batch i is the same as without
    chunks."""
    if not options.stateful:
        return options.chunk_size
    batch_size = batch_size or options.sentences_per_batch
    return -(-options.chunk_size // batch_size) * batch_size


def embed_in_order(
    embedder: SentenceEmbedder, sentences: Iterable[list[str]], batch_size: int | None = None,
    progress: Progress | None = None, caller: str = "embed_sentences", selection: VectorSelection | None = None,
) -> Iterator[np.ndarray]:
    """Lazily embed many sentences; results come in input order, all layers or as ``selection`` says. Memory: one
    chunk of results at a time."""
    if selection is not None:
        selection.check_model(embedder.num_layers)
    iterator = token_lists(sentences, caller)
    while chunk := list(islice(iterator, chunk_size(embedder.options, batch_size))):
        results: list[np.ndarray | None] = [None] * len(chunk)
        for i, layers in embed_unordered(embedder, chunk, progress, batch_size):
            results[i] = layers if selection is None else selection.apply(layers)
        yield from results  # type: ignore[misc]
