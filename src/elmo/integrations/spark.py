"""Spark: ELMo as a column function, so that a Spark job embeds a text column where its data already is
(docs/integrations.md, "Spark").

    embed = elmo_udf(model="demo", pool="mean", layer="average")
    df.withColumn("embedding", embed("text"))

It is a ``pyspark.ml.functions.predict_batch_udf``: Arrow batches of rows reach a Python worker, which loads the model
once (``predict_batch_udf`` caches what ``make_predict_fn`` returns per worker process) and embeds each batch sorted
by length like ``elmo embed``. Settings are checked, and the model's spelling looked at, when ``elmo_udf`` is called,
on the driver, so a typo is one line before Spark runs anything.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from elmo.embedding.contract import embed_in_order
from elmo.embedding.table_rows import table_settings, text_of
from elmo.formats.model_ref import ModelRef
from elmo.runtime.extras import require

OUTPUT_FIELD = "vectors"
"""The struct field that carries nested outputs through ``predict_batch_udf`` (see :func:`elmo_udf`)."""


def elmo_udf(model: ModelRef | str = "demo", *, device: str | None = None, **settings: Any) -> Any:
    """A column function: a string column of whitespace-tokenised text -> its ELMo vectors, one row per row.

    ``settings``: the fields of :class:`~elmo.embedding.selection.VectorSelection` (``layer``, ``pool``,
    ``mix_weights``, ``mix_gamma``, ``dtype``) and of :class:`~elmo.embedding.embed_options.EmbedOptions`
    (``precision``, ``batch_size``: sentences per model batch, ``max_batch_tokens``, ``initial_state``,
    ``chunk_size``: rows a worker sorts by length and embeds together); ``device``: default CUDA when the worker
    has one, else CPU. The column's type: ``array<float>`` for a pooled vector of one layer; one more ``array``
    level per further axis: ``pool="none"`` gives the token vectors (``array<array<float>>``), ``layer="all"``
    the layers. Spark has no 16-bit float: ``dtype="float16"`` gives float16-rounded values as floats.
    Each Python worker takes as many torch threads as ``spark.task.cpus`` (default 1).
    """
    selection, options = table_settings(settings, "elmo_udf")
    ref = ModelRef.parse(model)  # a spelling that names nothing is refused now, on the driver
    if ref.is_local:  # a published model not yet downloaded is fetched by the workers, not here
        selection.check_model(ref.read_config().num_layers)
    functions = require("pyspark.ml.functions", "spark", "elmo.integrations.spark.elmo_udf")
    types = require("pyspark.sql.types", "spark", "elmo.integrations.spark.elmo_udf")
    _local_workers_run_this_python()
    depth = len(selection.shape(2, 1)) + (0 if selection.pooled else 1)  # array levels of one row's output
    return_type = types.FloatType()
    for _ in range(depth):
        return_type = types.ArrayType(return_type)
    def make_predict_fn() -> Any:
        """In a Python worker, once: the model and the function that embeds a batch of rows."""
        from elmo.embedding.embedder import Embedder

        _threads_from_task_cpus()
        embedder = Embedder(ref.load(), options, device=device, model_name=ref.record)

        def predict(texts: np.ndarray) -> Any:  # (rows,) object array of str
            sentences = [text_of(text, f"elmo_udf: row {i} of a batch").split() for i, text in enumerate(texts)]
            vectors = [v.astype(np.float32, copy=False) for v in
                       embed_in_order(embedder, sentences, caller="elmo_udf", selection=selection)]
            if depth == 1:
                return np.stack(vectors) if vectors else np.zeros((0, embedder.output_dim), np.float32)
            return [{OUTPUT_FIELD: _nested(v)} for v in vectors]

        return predict

    if depth == 1:  # (rows, dim): predict_batch_udf's own array output
        return functions.predict_batch_udf(make_predict_fn, return_type=return_type, batch_size=options.chunk_size)
    # predict_batch_udf returns deeper arrays only as a struct's field, each row an object array of its sub-arrays
    nested = functions.predict_batch_udf(
        make_predict_fn, return_type=types.StructType([types.StructField(OUTPUT_FIELD, return_type)]),
        batch_size=options.chunk_size)

    def column(*columns: Any) -> Any:
        return nested(*columns).getField(OUTPUT_FIELD)

    return column


def _nested(array: np.ndarray) -> np.ndarray:
    """(a, ..., dim) float32 -> a 1-D object array of its (..., dim) sub-arrays, nested the same way: the only
    deeper-than-2-D row ``predict_batch_udf`` accepts."""
    if array.ndim == 1:
        return array
    out = np.empty(len(array), dtype=object)
    for i, sub in enumerate(array):
        out[i] = _nested(sub)
    return out


def _local_workers_run_this_python() -> None:
    """Spark starts its Python workers with ``$PYSPARK_PYTHON``, else whatever ``python3`` is first on PATH: from a
    virtual environment that is not activated, a Python without torch or this package, and every task fails. A local
    master (``local[N]``) runs its workers on this machine, so unless ``PYSPARK_PYTHON`` says otherwise they run this
    interpreter; a cluster's executors keep Spark's own choice (their Python is theirs to set)."""
    if os.environ.get("PYSPARK_PYTHON"):
        return
    context = require("pyspark", "spark", "elmo.integrations.spark.elmo_udf").SparkContext._active_spark_context
    if context is not None and context.master.startswith("local") and context.pythonExec != sys.executable:
        context.pythonExec = sys.executable  # read when a column function is applied, which comes after this call


def _threads_from_task_cpus() -> None:
    """One torch thread per CPU of a Spark task: ``local[N]`` and executors run several Python workers side by side,
    which must not each take all the cores."""
    from elmo.runtime.threads import set_process_threads

    context = require("pyspark", "spark", "elmo.integrations.spark.elmo_udf").TaskContext.get()
    set_process_threads(context.cpus() if context is not None else 1)
