"""What ``elmo embed --engine ray`` costs against ``--engine local`` on the same cores, what the outputs weigh, and
whether a Ray worker's memory stays flat as the input grows (docs/scale-out.md).

Every run is a fresh process of this script (``--one``), so start-up and peak memory are each run's own:

* start-up: local, loading the model; ray, starting Ray (or joining it) and its workers, each loading the model;
* embed: the file job (read, embed, write the Parquet shards and manifest), timed apart from start-up;
* overhead: median ray embed time / median local embed time (rounds interleaved), and the same for start + embed;
* a Welch t-test on the embed times of the two engines (are they told apart at all by 3 runs?).

Bytes per sentence are the shards' size on disk over the lines (pooled fp16 vs token output), and worker memory is
each Ray worker's peak resident set, at two input sizes.

    PYTHONPATH=src nice .venv/bin/python benchmarks/ray_engine.py                      # 20,000 sentences, demo
    PYTHONPATH=src nice .venv/bin/python benchmarks/ray_engine.py --memory-sizes 10000,100000

The sentences are the first lines of the shared Reuters-21578 training text (cycled for sizes beyond it).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine_line
from scipy.stats import ttest_ind

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "lm" / "reuters21578" / "reuters21578.train.txt"


def write_sentences(path: Path, n: int) -> None:
    lines = [line for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.split()]
    path.write_text("".join(lines[i % len(lines)] + "\n" for i in range(n)), encoding="utf-8")


def one_run(engine: str, text: Path, out: Path, model: str, workers: int | None, flags: dict) -> dict:
    """One run in this process: start-up and embed seconds, peak memory of the driver and of each worker."""
    from elmo.embedding.embed_options import EmbedOptions, EngineOptions, OutputOptions
    from elmo.embedding.file_job import EmbedFileJob
    from elmo.embedding.selection import VectorSelection

    options = EmbedOptions(precision="fp32", chunk_size=flags.pop("chunk_size"))
    output = OutputOptions(output_format="parquet")
    selection = VectorSelection(**flags)
    started = time.perf_counter()
    if engine == "local":
        from elmo.embedding.embedder import Embedder
        from elmo.formats.model_files import load_bilm

        embedder = Embedder(load_bilm(model), options, device="cpu")
        ready = time.perf_counter()
        count = EmbedFileJob(embedder, output, selection=selection).run(text, out)
        finished, workers_rss = time.perf_counter(), []
    else:
        from elmo.embedding.engines.ray import RayEngine, WorkerModel
        from elmo.formats.model_ref import ModelRef

        spec = WorkerModel(options, ModelRef.parse(model), device="cpu")
        with RayEngine(spec, EngineOptions("ray", None, workers)) as pool:
            ready = time.perf_counter()
            count = EmbedFileJob(pool, output, selection=selection).run(text, out)
            finished = time.perf_counter()
            workers_rss = [w["peak_rss_bytes"] for w in pool.describe_workers()]
    size = sum(p.stat().st_size for p in out.glob("part-*.parquet"))
    return {"engine": engine, "lines": count, "startup_s": ready - started, "embed_s": finished - ready,
            "driver_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10,
            "workers_peak_rss": workers_rss, "bytes": size}


def run_fresh(engine: str, text: Path, work: Path, args: argparse.Namespace, **flags) -> dict:
    out = work / f"out-{engine}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, __file__, "--one", engine, "--text", str(text), "--out", str(out), "--model",
               args.model, "--flags", json.dumps({"chunk_size": args.chunk_size} | flags)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{engine} run failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    shutil.rmtree(out, ignore_errors=True)
    return result


def mb(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="demo")
    parser.add_argument("--workers", type=int, default=None, help="Ray workers (default: one per CPU)")
    parser.add_argument("--chunk-size", type=int, default=1000, help="lines per shard, both engines")
    parser.add_argument("--memory-sizes", default="10000,100000", help="input sizes for the worker memory rows")
    parser.add_argument("--one", choices=("local", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--text", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--flags", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one, args.text, args.out, args.model, args.workers, json.loads(args.flags))))
        return

    print(machine_line())
    work = Path(tempfile.mkdtemp(prefix="ray-engine-bench-"))
    try:
        text = work / "sentences.txt"
        write_sentences(text, args.sentences)
        pooled = {"pool": "mean", "layer": "average", "dtype": "float16"}
        runs: dict[str, list[dict]] = {"local": [], "ray": []}
        for _ in range(args.rounds):
            for engine in runs:
                runs[engine].append(run_fresh(engine, text, work, args, **pooled))
        print(f"\n{args.sentences:,} sentences, model {args.model}, --pool mean --layer average --dtype float16, "
              f"--chunk-size {args.chunk_size}, fp32; median of {args.rounds} fresh processes per engine, "
              "rounds interleaved\n")
        print("| engine | start-up s | embed s | sentences/s | start + embed s | driver peak MB | worker peak MB |")
        print("|---|---|---|---|---|---|---|")
        medians = {}
        for engine, results in runs.items():
            start = statistics.median(r["startup_s"] for r in results)
            embed = statistics.median(r["embed_s"] for r in results)
            both = statistics.median(r["startup_s"] + r["embed_s"] for r in results)
            medians[engine] = (embed, both)
            workers = max((max(r["workers_peak_rss"]) for r in results if r["workers_peak_rss"]), default=0)
            print(f"| {engine} | {start:.1f} | {embed:.1f} (spread {min(r['embed_s'] for r in results):.1f}-"
                  f"{max(r['embed_s'] for r in results):.1f}) | {args.sentences / embed:,.0f} | {both:.1f} | "
                  f"{mb(statistics.median(r['driver_peak_rss'] for r in results))} | "
                  f"{mb(workers) if workers else '-'} |")
        p = ttest_ind([r["embed_s"] for r in runs["ray"]], [r["embed_s"] for r in runs["local"]],
                      equal_var=False).pvalue
        print(f"\nray / local, embed: {medians['ray'][0] / medians['local'][0]:.3f}x (Welch p = {p:.3f}); "
              f"start + embed: {medians['ray'][1] / medians['local'][1]:.3f}x")

        print("\n| output (local engine) | bytes on disk | bytes per sentence |")
        print("|---|---|---|")
        sizes = {"pooled mean, float16 (2P)": runs["local"][0]["bytes"]}
        for name, flags in (("tokens, top layer, float16 (n, 2P)", {"layer": "top", "dtype": "float16"}),
                            ("tokens, top layer, float32 (n, 2P)", {"layer": "top", "dtype": "float32"})):
            sizes[name] = run_fresh("local", text, work, args, pool="none", **flags)["bytes"]
        for name, size in sizes.items():
            print(f"| {name} | {size:,} | {size / args.sentences:,.0f} |")

        print("\n| sentences | ray embed s | each worker's peak MB |")
        print("|---|---|---|")
        for n in (int(s) for s in args.memory_sizes.split(",")):
            write_sentences(text, n)
            result = run_fresh("ray", text, work, args, **pooled)
            print(f"| {n:,} | {result['embed_s']:.1f} | {', '.join(mb(r) for r in result['workers_peak_rss'])} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
