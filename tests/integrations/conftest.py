"""What the engine tests share: real sentences, the local Embedder their vectors must equal, and a Ray instance."""

from __future__ import annotations

import pytest

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from tests.conftest import SHARED

BROWN = SHARED / "data" / "lm" / "brown" / "brown.valid.txt"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """The first 50 sentences of the Brown corpus' held-out part."""
    with open(BROWN, encoding="utf-8") as f:
        return [next(f).strip() for _ in range(50)]


@pytest.fixture(scope="module")
def reference() -> Embedder:
    return Embedder(load_bilm("demo"), precision="fp32", device="cpu")


@pytest.fixture(scope="module")
def ray_local():
    """One Ray instance for a module: 2 CPUs, on loopback (as `elmo embed --engine ray` starts its own)."""
    import ray

    from elmo.runtime.extras import loopback_only

    with loopback_only(ray):
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="error")
    try:
        assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
        yield ray
    finally:
        ray.shutdown()
