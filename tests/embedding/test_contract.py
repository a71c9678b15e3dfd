"""The embedding contract: any object that keeps it runs the file job, with no subclass of ``Embedder``."""

from __future__ import annotations

import h5py
import numpy as np

from elmo.embedding.contract import SentenceEmbedder, embed_in_order, one_batch_at_a_time
from elmo.embedding.embed_options import EmbedOptions, OutputOptions
from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import EmbedFileJob
from elmo.embedding.selection import VectorSelection
from elmo.precision import Precision
from elmo.serving.remote import RemoteEmbedder
from tests.conftest import random_bilm


class LengthEmbedder:
    """A made-up embedder: every token's vector holds its sentence's length, per layer (L + 1 = 2, 2P = 3)."""

    def __init__(self) -> None:
        self.options = EmbedOptions(max_batch_tokens=12)
        self.precision = Precision.FP32
        self.batches: list[int] = []

    num_layers, output_dim = 2, 3

    def embed_batch(self, sentences):
        self.batches.append(len(sentences))
        return [np.full((2, len(s), 3), len(s), dtype=np.float32) for s in sentences]

    embed_batches = one_batch_at_a_time

    def embed_sentences(self, sentences, batch_size=None, progress=None):
        return embed_in_order(self, sentences, batch_size, progress)

    def provenance(self):
        return {"model": "lengths", "precision": "fp32", "device": "nowhere", "initial_state": "zero"}

    def identity(self):
        return {"precision": "fp32", "stateful": False}


def test_any_embedder_that_keeps_the_contract_runs_the_file_job(tmp_path):
    embedder = LengthEmbedder()
    assert isinstance(embedder, SentenceEmbedder)
    (tmp_path / "in.txt").write_text("a b c\n\nd\ne f g h i\n", encoding="utf-8")
    assert EmbedFileJob(embedder, OutputOptions(), selection=VectorSelection(layer="top")).run(
        tmp_path / "in.txt", tmp_path / "o.hdf5") == 4
    with h5py.File(tmp_path / "o.hdf5", "r") as f:
        assert [f[k].shape for k in "0123"] == [(3, 3), (0, 3), (1, 3), (5, 3)]
        assert f["3"][0, 0] == 5 and dict(f.attrs)["model"] == "lengths"
    assert sum(embedder.batches) == 3  # the empty line needs no model run; batches of at most 12 padded tokens
    assert [len(x[0]) for x in embedder.embed_sentences([["x"], ["y", "z"]])] == [1, 2]  # input order


def test_the_local_and_the_remote_embedder_keep_the_contract_without_inheriting():
    assert isinstance(Embedder(random_bilm()), SentenceEmbedder)
    assert not issubclass(RemoteEmbedder, Embedder) and not issubclass(Embedder, RemoteEmbedder)
    assert all(hasattr(RemoteEmbedder, name) for name in ("embed_batch", "embed_sentences", "provenance", "identity"))
