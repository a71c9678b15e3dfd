"""``elmo embed --engine ray`` on a real local Ray instance (2 CPUs, loopback): the same files as ``--engine local``,
every line once, a killed worker or driver costs nothing but time, and the one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from elmo.cli import main
from elmo.embedding.embed_options import EmbedOptions, EngineOptions, OutputOptions
from elmo.embedding.engines.ray import RayEngine, WorkerModel
from elmo.embedding.file_job import EmbedFileJob
from elmo.embedding.parquet_output import MANIFEST
from elmo.embedding.selection import VectorSelection
from elmo.errors import UsageError
from elmo.formats.model_ref import ModelRef

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def text(tmp_path_factory, lines) -> Path:
    path = tmp_path_factory.mktemp("ray-engine") / "brown.txt"
    path.write_text("\n".join([*lines[:20], "", *lines[20:]]) + "\n", encoding="utf-8")  # an empty line too
    return path


def _embed(text, out, *flags) -> int:
    return main(["-q", "embed", str(text), str(out), "--chunk-size", "8", "--precision", "fp32", *flags])


def _rows(directory) -> tuple[list[int], list[np.ndarray]]:
    table = pq.read_table(directory).sort_by("line")
    return table["line"].to_pylist(), [np.array(v, dtype=np.float32) for v in table["embedding"].to_pylist()]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("flags", [["--pool", "mean"], ["--all"]],
                         ids=["pooled", "tokens"])
def test_parquet_shards_equal_the_local_engines(ray_local, text, tmp_path, flags) -> None:
    assert _embed(text, tmp_path / "local", "--format", "parquet", *flags) == 0
    assert _embed(text, tmp_path / "ray", "--format", "parquet", "--engine", "ray", *flags) == 0

    local, ray = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert ray[0] == local[0] == list(range(51))  # every line exactly once
    for a, b in zip(ray[1], local[1]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    manifests = [json.loads((tmp_path / d / MANIFEST).read_text()) for d in ("local", "ray")]
    assert manifests[0]["embed_settings"] == manifests[1]["embed_settings"]  # the engine is not a setting
    assert manifests[1]["complete"] and [s["first_line"] for s in manifests[1]["shards"]] == list(range(0, 51, 8))


def test_hdf5_output_on_ray_equals_the_local_one(ray_local, text, tmp_path) -> None:
    assert _embed(text, tmp_path / "local.hdf5", "--top") == 0
    assert _embed(text, tmp_path / "ray.hdf5", "--top", "--engine", "ray", "--workers", "2") == 0
    with h5py.File(tmp_path / "local.hdf5") as local, h5py.File(tmp_path / "ray.hdf5") as ray:
        assert set(local) == set(ray)
        for key in local:
            if key != "sentence_to_index":
                np.testing.assert_allclose(ray[key][()], local[key][()], atol=1e-5, rtol=0)
    assert not (tmp_path / "ray.hdf5.parts").exists()


def test_a_killed_worker_is_replaced_and_its_chunk_redone(ray_local, text, tmp_path) -> None:
    options = EmbedOptions(precision="fp32", chunk_size=4)
    killed: list[int] = []
    with RayEngine(WorkerModel(options, ModelRef.parse("demo")), EngineOptions(engine="ray")) as workers:
        pids = [w["pid"] for w in workers.describe_workers()]

        def kill_one_after_the_first_chunk(sentences: int, tokens: int) -> None:
            if sentences and not killed:
                killed.append(pids[0])
                os.kill(pids[0], signal.SIGKILL)  # mid-run: it holds its next chunk, or gets one soon

        job = EmbedFileJob(workers, OutputOptions(output_format="parquet"),
                           selection=VectorSelection(pool="mean", layer="average"))
        assert job.run(text, tmp_path / "out", progress=kill_one_after_the_first_chunk) == 51
        assert killed and {w["pid"] for w in workers.describe_workers()} != set(pids)  # a new one took its place
    assert _embed(text, tmp_path / "local", "--format", "parquet", "--pool", "mean", "--chunk-size", "4") == 0
    ray, local = _rows(tmp_path / "out"), _rows(tmp_path / "local")
    assert ray[0] == local[0] == list(range(51))
    np.testing.assert_allclose(np.stack(ray[1]), np.stack(local[1]), atol=1e-5, rtol=0)
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("part-")) == [MANIFEST]


def test_a_driver_killed_mid_run_resumes_to_the_complete_output(tmp_path, lines) -> None:
    """kill -9 of `elmo embed` itself (its own Ray instance), then --resume: every line once, the same vectors."""
    text = tmp_path / "long.txt"
    text.write_text("\n".join(lines * 4) + "\n", encoding="utf-8")  # 200 lines, 25 chunks of 8
    command = [sys.executable, "-m", "elmo", "-q", "embed", str(text), str(tmp_path / "out"), "--format", "parquet",
               "--pool", "mean", "--chunk-size", "8", "--precision", "fp32", "--engine", "ray"]
    driver = subprocess.Popen(command, stderr=subprocess.PIPE, start_new_session=True)
    manifest = tmp_path / "out" / MANIFEST
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
        if manifest.is_file() and len(json.loads(manifest.read_text())["shards"]) >= 3:
            break
        time.sleep(0.05)
    assert driver.poll() is None, driver.stderr.read().decode()
    driver.kill()  # SIGKILL: no cleanup runs
    driver.wait()
    killed_at = json.loads(manifest.read_text())
    assert not killed_at["complete"] and 3 <= len(killed_at["shards"]) < 25

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(manifest.read_text())["complete"]
    assert main(["-q", "embed", str(text), str(tmp_path / "local"), "--format", "parquet", "--pool", "mean",
                 "--chunk-size", "8", "--precision", "fp32"]) == 0
    ray, local = _rows(tmp_path / "out"), _rows(tmp_path / "local")
    assert ray[0] == local[0] == list(range(200))  # every line exactly once
    np.testing.assert_allclose(np.stack(ray[1]), np.stack(local[1]), atol=1e-5, rtol=0)
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("part-")) == [MANIFEST]


def test_a_changed_setting_refuses_to_resume(ray_local, text, tmp_path, capsys) -> None:
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--pool", "mean") == 0
    capsys.readouterr()
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--pool", "max", "--engine", "ray", "--resume") == 1
    assert _one_line(capsys) == (
        f"elmo: error: --resume: {tmp_path / 'out'}: setting 'pool' was 'mean' in the complete run, now 'max'; rerun "
        "with the same settings, or without --resume to replace it")


def test_a_bad_input_line_is_one_line_and_nothing_is_reported_done(ray_local, tmp_path, capsys) -> None:
    records = tmp_path / "records.jsonl"
    good = [json.dumps({"text": f"sentence number {i}"}) for i in range(20)]
    records.write_text("\n".join([*good[:12], "{not json", *good[12:]]) + "\n", encoding="utf-8")
    assert _embed(records, tmp_path / "out", "--format", "parquet", "--pool", "mean", "--engine", "ray") == 1
    assert _one_line(capsys).startswith(f"elmo: error: {records}:13: not a JSON object")
    assert not (tmp_path / "out" / MANIFEST).exists()  # the shards of lines before it are not kept as done


@pytest.mark.parametrize("flags, message", [
    (["--address", "127.0.0.1:1"], "elmo: error: --address 127.0.0.1:1: cannot reach a Ray cluster there (Connection "
     "refused); check the address `ray start --head` printed, or drop --address to run one on this machine"),
    (["--address", "head-node"], "elmo: error: --address head-node: expected auto or HOST:PORT (the head node's GCS "
     "address, as `ray start --head` prints it)"),
    (["--workers", "3"], "elmo: error: --workers 3: the Ray cluster has 2 CPUs, and each worker needs one of its own; "
     "lower --workers"),
    (["--initial-state", "carry"], "elmo: error: --initial-state carry carries state through the whole file in order; "
     "--engine ray embeds chunks side by side: use --initial-state zero or warm"),
])
def test_engine_refusals_are_one_line(ray_local, text, tmp_path, capsys, flags, message) -> None:
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--pool", "mean", "--engine", "ray", *flags) == 1
    assert _one_line(capsys) == message


def test_ray_settings_need_the_ray_engine(text, tmp_path, capsys) -> None:
    with pytest.raises(UsageError, match="--workers is a setting of --engine ray"):
        EngineOptions(workers=2)
    assert _embed(text, tmp_path / "out", "--pool", "mean", "--address", "auto") == 2
    assert _one_line(capsys) == "elmo: error: --address is a setting of --engine ray; add --engine ray, or drop it"


def test_a_model_that_does_not_load_is_the_local_engines_one_line(ray_local, text, tmp_path, capsys) -> None:
    flags = ["--format", "parquet", "--pool", "mean", "--engine", "ray", "--workers", "1"]
    assert _embed(text, tmp_path / "a", *flags, "--model", str(tmp_path / "missing")) == 1  # before Ray is asked
    assert _one_line(capsys) == f"elmo: error: {tmp_path / 'missing'}: no such model directory or archive"
    (tmp_path / "empty").mkdir()
    assert _embed(text, tmp_path / "b", *flags, "--model", str(tmp_path / "empty")) == 1  # found by the worker
    assert _one_line(capsys).startswith(f"elmo: error: {tmp_path / 'empty'}: a folder, but not a model in any "
                                        "format read here (tried: a TF-Hub module archive (.tar.gz); ")


def test_rays_own_error_lines_go_to_the_log_not_the_terminal(capsys, caplog) -> None:
    """Ray's driver prints what its raylet reports (a worker killed, "... so the task will be retried") from a thread
    that calls this module-level name; inside a session of ours (``ray_session``) it logs at DEBUG instead, without
    colour codes, and the name is Ray's own again afterwards."""
    import importlib

    from elmo.embedding.engines.ray import log as engine_log
    from elmo.runtime.extras import ray_errors_to

    worker = importlib.import_module("ray._private.worker")
    printed = worker.print_to_stdstream
    line = "\x1b[33mTask ChunkWorker.embed failed. There are 2 retries remaining, so the task will be retried.\x1b[0m"
    with caplog.at_level("DEBUG", logger="elmo.embedding.engines.ray"), ray_errors_to(engine_log):
        worker.print_to_stdstream({"lines": [line], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    assert worker.print_to_stdstream is printed
    captured = capsys.readouterr()
    assert "retried" not in captured.out + captured.err
    assert [r.getMessage() for r in caplog.records if r.name == "elmo.embedding.engines.ray"] == [
        "ray (raylet): Task ChunkWorker.embed failed. There are 2 retries remaining, so the task will be retried."]
