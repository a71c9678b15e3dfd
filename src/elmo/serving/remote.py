"""``elmo embed --server URL``: an embedder whose batches are computed by a running ``elmo serve``.

:class:`RemoteEmbedder` keeps the :class:`~elmo.embedding.contract.SentenceEmbedder` contract, so the file job runs
as it does locally: lines read lazily in chunks, sorted by length into token-budget batches (one request each),
part files, ``--resume``, ``--all``/``--top``/``--average`` and the atomic merge into the same HDF5 layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from elmo.client import ElmoClient
from elmo.embedding.contract import Progress, embed_in_order, one_batch_at_a_time
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.selection import selection_of
from elmo.errors import ElmoError
from elmo.precision import Precision


class RemoteEmbedder:
    """The embedder over ``client``'s service. ``options``: how this side batches (the service runs every sentence
    from its own initial state: ``--initial-state`` belongs to ``elmo serve``)."""

    def __init__(self, client: ElmoClient, options: EmbedOptions | None = None) -> None:
        self.client = client
        self.options = options or EmbedOptions()
        if self.options.initial_state != "zero":
            raise ElmoError(f"--initial-state {self.options.initial_state} runs the model here; a service chooses "
                            "its own initial state (elmo serve --initial-state): drop --server or --initial-state")
        info = client.model()
        self.model_name = info["model"]
        self.precision = Precision(info["precision"])
        self.device = info.get("device", "unknown")
        self.initial_state = info.get("initial_state", "zero")
        self._num_layers, self._output_dim = info["num_layers"], info["output_dim"]

    @property
    def num_layers(self) -> int:
        return self._num_layers

    @property
    def output_dim(self) -> int:
        return self._output_dim

    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """One request per batch; the service's arrays are float32 (L + 1, n, 2P), as a local run's."""
        return self.client.embed(sentences, output="all", dtype="float32") if sentences else []

    embed_batches = one_batch_at_a_time  # one request after another

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int | None = None, progress: Progress | None = None,
        **selection: Any,
    ) -> Iterator[np.ndarray]:
        """As :meth:`Embedder.embed_sentences <elmo.embedding.embedder.Embedder.embed_sentences>`: the selection
        (pool, layer, ...) is applied here, to the float32 layers the service sends."""
        chosen = selection_of(**selection) if selection else None
        return embed_in_order(self, sentences, batch_size, progress, "RemoteEmbedder.embed_sentences", chosen)

    def provenance(self) -> dict[str, str]:
        return {"model": self.model_name, "precision": self.precision.value, "device": f"{self.device} at "
                f"{self.client.url}", "initial_state": self.initial_state}

    def identity(self) -> dict[str, object]:
        return {"precision": self.precision.value, "stateful": False}
