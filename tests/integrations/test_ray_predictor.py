"""``elmo.integrations.ray.ElmoPredictor`` on a real local Ray instance (2 CPUs, loopback only): the vectors a Ray
pipeline gets are the local Embedder's, every row comes back once with its other columns, and the actor sizes its
torch threads from its CPU allotment. The pipeline is the one docs/integrations.md shows."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from elmo.errors import ConfigError, InputFileError, MissingExtraError
from elmo.integrations.ray import ElmoPredictor

pytestmark = pytest.mark.engine


def test_pooled_vectors_equal_the_embedders_and_every_row_comes_back_once(ray_local, lines, reference) -> None:
    ray = ray_local
    ds = ray.data.from_items([{"id": i, "text": line, "source": f"doc-{i % 7}"} for i, line in enumerate(lines)])
    # one actor of one CPU on a 2-CPU instance: a CPU stays free for the tasks that feed it
    out = ds.map_batches(
        ElmoPredictor, fn_constructor_kwargs={"model": "demo", "pool": "mean", "layer": "average", "precision": "fp32"},
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1, batch_size=16, batch_format="numpy",
    ).take_all()

    assert sorted(row["id"] for row in out) == list(range(len(lines)))  # every row exactly once
    expected = list(reference.embed_sentences([line.split() for line in lines], pool="mean", layer="average"))
    for row in out:
        i = row["id"]
        assert row["text"] == lines[i] and row["source"] == f"doc-{i % 7}"
        assert row["embedding"].shape == (reference.output_dim,) and row["embedding"].dtype == np.float32
        np.testing.assert_allclose(row["embedding"], expected[i], atol=1e-5, rtol=0)


def test_token_vectors_from_a_tokens_column_in_pandas_batches(ray_local, lines, reference) -> None:
    ray = ray_local
    ds = ray.data.from_items([{"id": i, "tokens": line.split()} for i, line in enumerate(lines)])
    out = ds.map_batches(
        ElmoPredictor, fn_constructor_kwargs={"model": "demo", "pool": "none", "layer": "top", "precision": "fp32"},
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1, batch_size=16, batch_format="pandas",
    ).take_all()

    assert sorted(row["id"] for row in out) == list(range(len(lines)))
    expected = list(reference.embed_sentences([line.split() for line in lines], pool="none", layer="top"))
    for row in out:
        i = row["id"]
        assert list(row["tokens"]) == lines[i].split()
        assert row["embedding"].shape == (len(lines[i].split()), reference.output_dim)
        np.testing.assert_allclose(row["embedding"], expected[i], atol=1e-5, rtol=0)


def test_an_actor_takes_one_torch_thread_per_cpu_it_holds(ray_local) -> None:
    ray = ray_local

    @ray.remote
    def threads_in_worker() -> int:
        import ray as worker_ray
        import torch

        from elmo.runtime.extras import threads_from_ray_allotment

        torch.set_num_threads(4)  # whatever the process had before
        threads_from_ray_allotment(worker_ray)
        return torch.get_num_threads()

    assert ray.get(threads_in_worker.options(num_cpus=1).remote()) == 1
    assert ray.get(threads_in_worker.options(num_cpus=2).remote()) == 2


def test_in_process_batches_and_one_line_errors(ray_local, reference) -> None:
    import pandas as pd

    predictor = ElmoPredictor("demo", pool="max", layer="all", dtype="float16")
    out = predictor({"id": np.arange(2), "text": np.array(["the cat sat", ""], dtype=object)})
    assert out["embedding"].shape == (2, reference.num_layers, reference.output_dim)
    assert out["embedding"].dtype == np.float16 and not out["embedding"][1].any()  # an empty line pools to zeros
    np.testing.assert_array_equal(out["id"], np.arange(2))

    with pytest.raises(InputFileError, match=r"no column 'tokens' or 'text' \(its columns: body\)") as error:
        predictor(pd.DataFrame({"body": ["a b"]}))
    assert "\n" not in str(error.value)
    with pytest.raises(InputFileError, match="column 'text', row 1 of a batch: expected a string, got None"):
        predictor({"text": np.array(["a b", None], dtype=object)})
    with pytest.raises(ConfigError, match="ElmoPredictor: pool must be one of none, mean, max, first-last; got 'avg'"):
        ElmoPredictor("demo", pool="avg")
    with pytest.raises(ConfigError, match="ElmoPredictor: unknown setting 'pol'"):
        ElmoPredictor("demo", pol="mean")
    with pytest.raises(ConfigError, match="initial_state carry"):
        ElmoPredictor("demo", initial_state="carry")


def test_without_ray_the_error_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without the package
    with pytest.raises(MissingExtraError, match=r'needs ray: pip install "elmo-bilm\[ray\]"'):
        ElmoPredictor("demo", pool="mean")
