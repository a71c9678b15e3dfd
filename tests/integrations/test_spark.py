"""``elmo.integrations.spark.elmo_udf`` on a real Spark ``local[2]`` (loopback): the vectors a Spark job gets are the
local Embedder's for pooled and token outputs, every row once, next to its other columns; a bad model or setting is
one line on the driver before Spark runs anything. The job is the one docs/integrations.md shows."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from elmo.errors import ConfigError, ElmoError
from elmo.integrations.spark import elmo_udf

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def spark(monkeypatch_module):
    """local[2] on loopback, started as the docs' recipe is from a virtual environment that is not activated: no
    PYSPARK_PYTHON, and this interpreter's folder not on PATH (so `python3` there is another Python, or none);
    elmo_udf has its workers run this interpreter (the venv's torch and elmo)."""
    from pyspark.sql import SparkSession

    monkeypatch_module.delenv("PYSPARK_PYTHON", raising=False)
    here = os.path.dirname(sys.executable)
    monkeypatch_module.setenv("PATH", os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                     if p and os.path.realpath(p) != os.path.realpath(here)))
    monkeypatch_module.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master("local[2]").appName("elmo-test")
               .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_pooled_and_token_vectors_equal_the_embedders(spark, lines, reference) -> None:
    df = spark.createDataFrame([(i, line) for i, line in enumerate(lines)], "id long, text string").repartition(2)
    mean = elmo_udf(model="demo", pool="mean", layer="average")
    tokens = elmo_udf(model="demo", pool="none", layer="top")
    rows = df.select("id", mean("text").alias("mean"), tokens("text").alias("tokens")).collect()
    assert sorted(r.id for r in rows) == list(range(len(lines)))  # every row once
    want_mean = list(reference.embed_sentences([line.split() for line in lines], layer="average", pool="mean"))
    want_tokens = list(reference.embed_sentences([line.split() for line in lines], layer="top"))
    for row in rows:
        np.testing.assert_allclose(np.array(row.mean, np.float32), want_mean[row.id], atol=1e-5)
        np.testing.assert_allclose(np.array(row.tokens, np.float32), want_tokens[row.id], atol=1e-5)


def test_bad_settings_are_one_line_on_the_driver() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'pooling'"):
        elmo_udf(model="demo", pooling="mean")
    with pytest.raises(ElmoError, match="no-such-model"):
        elmo_udf(model="no-such-model", pool="mean")
    with pytest.raises(ConfigError, match="carry"):
        elmo_udf(model="demo", pool="mean", initial_state="carry")
