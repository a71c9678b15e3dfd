"""``elmo embed --server URL``: the ``elmo embed`` file job with the vectors computed by a running service.

:class:`RemoteEmbedder` is an :class:`~elmo.embedding.embedder.Embedder` whose model batches go to the service,
so everything else is the same code as a local run: lines read lazily in chunks, sorted by length into
token-budget batches (one request each), part files, ``--resume``, ``--all``/``--top``/``--average`` and the atomic
merge into the same HDF5 layout.
"""

from __future__ import annotations

import numpy as np

from elmo.client import ElmoClient
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.embedder import Embedder
from elmo.errors import ElmoError
from elmo.precision import Precision


class RemoteEmbedder(Embedder):
    """An Embedder over ``client``'s service (stateless only: the service runs every sentence from zero states)."""

    def __init__(self, client: ElmoClient, options: EmbedOptions | None = None) -> None:  # noqa: D107
        # no super().__init__: there is no local model; the attributes the file job reads are set here
        self.client = client
        self.options = options or EmbedOptions()
        if self.options.stateful:
            raise ElmoError("--stateful carries LSTM states through the file: a service embeds statelessly; "
                            "drop --server or --stateful")
        if self.options.initial_state == "warm":
            raise ElmoError("--initial-state warm runs the model here; a service starts every sentence from zero "
                            "states: drop --server or --initial-state")
        self.warm_state = None
        info = client.model()
        self.model_name = info["model"]
        self.precision = Precision(info["precision"])
        self._num_layers, self._output_dim = info["num_layers"], info["output_dim"]
        self._stateful = None
        self.alignment = None

    @property
    def num_layers(self) -> int:
        return self._num_layers

    @property
    def output_dim(self) -> int:
        return self._output_dim

    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """One request per batch; the service's arrays are float32 (L + 1, n, 2P), as a local run's."""
        return self.client.embed(sentences, output="all", dtype="float32") if sentences else []
