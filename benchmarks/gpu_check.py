"""The parts of ``benchmarks/gpu_check.sh``: each runs in its own process (so peak memory is per part) and appends
one JSON record to a results file; ``table`` prints them as one markdown table.

    python benchmarks/gpu_check.py parity  --device cuda --results r.jsonl
    python benchmarks/gpu_check.py embed   --device cuda --results r.jsonl --config original --sentences 20000 \\
        --precision bf16 --pipeline on
    python benchmarks/gpu_check.py train   --device cuda --results r.jsonl --config original --steps 200 \\
        --sentences 20000 --corpus dir --out run-dir     (also writes the corpus and its vocabulary into dir)
    python benchmarks/gpu_check.py table   --results r.jsonl

Real sentences come from the shared Brown corpus (``$ELMO_DATA``, default ``../shared/data`` beside the repo:
``lm/brown/brown.train.txt``); where that is missing, from the prose lines of this repository's Markdown files
(README and docs/, real English, always in a checkout), cycled to the number asked for. The record says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BROWN = Path("lm") / "brown" / "brown.train.txt"
PARITY_ATOL = 1e-5
BF16_MIN_MEAN_COSINE = 0.999


def real_sentences(n: int) -> tuple[list[list[str]], str]:
    """n tokenised sentences (1-60 tokens) and where they came from."""
    data = Path(os.environ.get("ELMO_DATA", REPO.parent / "shared" / "data"))
    if (data / BROWN).is_file():
        source = data / BROWN
        lines = source.read_text(encoding="utf-8").splitlines()
    else:
        source = REPO / "README.md and docs/*.md"
        lines = [line for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
                 for line in path.read_text(encoding="utf-8").splitlines() if line[:1].isalpha()]  # prose lines
    sentences = [line.split()[:60] for line in lines if line.split()]
    return [sentences[i % len(sentences)] for i in range(n)], str(source)


def peak_memory_mb(device) -> float:
    """Peak memory of this process so far: allocated GPU memory on CUDA, resident memory (VmHWM) on the CPU."""
    if device.type == "cuda":
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**20
    status = Path("/proc/self/status").read_text().splitlines()
    return next(float(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))


def synchronize(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def record(path: Path, entry: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    print(json.dumps(entry), flush=True)


# ---------------------------------------------------------------- parts


def parity(args: argparse.Namespace) -> None:
    """bilm-tf's fixture on the device: our top layer (fp32) against TensorFlow's, within 1e-5; then the same in
    bf16, its cosine to our fp32 top layer (the fixture's protocol: 10 stateful batches of 3 sentences). The first
    part: it also records the machine line, for the table."""
    import h5py
    from machine import machine_line

    from elmo import load_bilm
    from elmo.embedding.embedder import Embedder

    record(args.results, {"machine": machine_line(args.device)})
    fixture = Path(os.environ.get("ELMO_FIXTURE", REPO.parent / "shared" / "reference" / "bilm-tf-fixture"))
    if not fixture.is_dir():
        record(args.results, {"check": "parity with bilm-tf", "ok": None, "result": f"skipped: no {fixture}"})
        return
    sentences = [[s.split() for s in group] for group in json.loads((fixture / "lm_embeddings_sentences.json")
                                                                   .read_text())]
    expected = []
    for k in range(3):
        with h5py.File(fixture / f"lm_embeddings_{k}.hdf5", "r") as f:
            expected.append([np.concatenate([f[str(i)][0], f[str(i)][1]], axis=-1) for i in range(10)])
    tops = {}
    for precision in ("fp32", "bf16"):
        bilm = load_bilm(options_file=fixture / "options.json", weight_file=fixture / "lm_weights.hdf5")
        embedder = Embedder(bilm, device=args.device, precision=precision, initial_state="carry", batch_size=3)
        tops[precision] = [embedder.embed_batch([sentences[k][i] for k in range(3)]) for i in range(10)]
    diff = max(np.abs(tops["fp32"][i][k][-1] - expected[k][i]).max() for i in range(10) for k in range(3))
    ours, low = (np.concatenate([layers[-1] for batch in tops[p] for layers in batch]) for p in ("fp32", "bf16"))
    cosine = (ours * low).sum(-1) / (np.linalg.norm(ours, axis=-1) * np.linalg.norm(low, axis=-1))
    ok = bool(diff <= PARITY_ATOL and cosine.mean() >= BF16_MIN_MEAN_COSINE)
    record(args.results, {"check": "parity with bilm-tf", "ok": ok,
                          "result": f"fp32 max abs diff {diff:.1e} (<= {PARITY_ATOL:g}); bf16 cosine to fp32 mean "
                                    f"{cosine.mean():.6f} (>= {BF16_MIN_MEAN_COSINE}), worst {cosine.min():.6f}"})


def embed(args: argparse.Namespace) -> None:
    """``--sentences`` real sentences through the Embedder (sorted batches) with random weights of ``--config``'s
    architecture, once to warm up on the first batch, then timed. With the pipeline (``--pipeline``) the result says
    how much its stages overlapped in the timed run and how many host buffers it allocated and reused."""
    import torch

    from elmo.embedding.embedder import Embedder
    from elmo.embedding.pipeline import PipelineStats, pipelined
    from elmo.modules.bilm import build_bilm
    from elmo.training.presets import load_preset

    device = torch.device(args.device)
    config, _ = load_preset(args.config)
    bilm = build_bilm(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # scaled like a trained model's weights
        for p in bilm.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (p.shape[-1] ** -0.5 if p.dim() > 1 else 0.1))
    sentences, source = real_sentences(args.sentences)
    embedder = Embedder(bilm, device=args.device, precision=args.precision, pipeline=args.pipeline,
                        max_batch_tokens=args.max_batch_tokens, batch_size=args.batch_size)
    list(embedder.embed_sentences(sentences[: args.batch_size]))  # warm-up
    synchronize(device)
    embedder.pipeline_stats = stats = PipelineStats()  # the timed run's only
    buffers = embedder.host_buffers
    allocated, reused = buffers.allocations, buffers.reuses
    start = time.perf_counter()
    tokens = sum(layers.shape[1] for layers in embedder.embed_sentences(sentences))
    synchronize(device)
    seconds = time.perf_counter() - start
    on = pipelined(args.pipeline, device)
    pipeline = (f"; pipeline {stats.describe()}; host buffers: {buffers.allocations - allocated} allocated "
                f"({buffers.allocations} in all, {buffers.allocated_bytes / 2**20:,.0f} MiB"
                f"{', pinned' if buffers.pinned else ''}), {buffers.reuses - reused} reused, at most "
                f"{buffers.most_lent} lent at once") if on else ""
    record(args.results, {"check": f"embed {args.sentences:,} sentences, {args.config}, {args.precision}, pipeline "
                                   f"{'on' if on else 'off'}",
                          "ok": tokens == sum(map(len, sentences)), "tokens_per_s": tokens / seconds,
                          "peak_memory_mb": peak_memory_mb(device),
                          "result": f"{tokens:,} tokens in {seconds:.1f} s, sorted batches of up to {args.batch_size} "
                                    f"sentences / {args.max_batch_tokens:,} tokens; sentences from {source}"
                                    + pipeline})


def write_corpus(directory: Path, n: int) -> str:
    """n real sentences (one a line) and their vocabulary into ``directory``, for ``train`` and the torchrun run;
    returns where the sentences came from."""
    from elmo.training.vocab_counts import count_words, vocabulary_from_counts

    directory.mkdir(parents=True, exist_ok=True)
    sentences, source = real_sentences(n)
    (directory / "train.txt").write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    vocabulary_from_counts(count_words([directory / "train.txt"])).save(directory / "vocab.txt")
    return source


def train(args: argparse.Namespace) -> None:
    """``--steps`` steps of ``--config`` (sampled softmax) on ``--sentences`` real sentences (written to
    ``--corpus``), through the trainer's API; tokens/s is the median of the trainer's logged rates after its first
    log line (compiling, warm-up)."""
    import torch

    from elmo.training.presets import load_preset
    from elmo.training.trainer import TrainSpec
    from elmo.training.trainer import train as run_training

    device = torch.device(args.device)
    source = write_corpus(args.corpus, args.sentences)
    overrides = {"precision": args.precision, "log_every": args.log_every, "sample_softmax": True,
                 "checkpoint_every": args.steps, "compile": args.compile}
    if args.batch_size:
        overrides["batch_size"] = args.batch_size
    config, train_config = load_preset(args.config, overrides)
    spec = TrainSpec(config=config, train=train_config, vocab_path=args.corpus / "vocab.txt",
                     train_patterns=[str(args.corpus / "train.txt")], run_dir=args.out, max_steps=args.steps,
                     device=args.device, progress=False)
    start = time.perf_counter()
    state = run_training(spec, device=device)
    seconds = time.perf_counter() - start
    rates = [entry["tokens_per_s"] for entry in state.history if "tokens_per_s" in entry]
    steady = float(np.median(rates[1:] if len(rates) > 1 else rates)) if rates else state.tokens / seconds
    record(args.results, {"check": f"train {args.config}, sampled softmax, {args.precision}, "
                                   f"{train_config.batch_size} x {train_config.unroll_steps} tokens a step"
                                   + (", torch.compile" if args.compile else ""),
                          "ok": state.step == args.steps, "tokens_per_s": steady,
                          "peak_memory_mb": peak_memory_mb(device),
                          "result": f"{state.step} steps, {state.tokens:,} tokens in {seconds:.0f} s "
                                    f"(compiling and warm-up included); sentences from {source}"})


def table(args: argparse.Namespace) -> None:
    """The records as one markdown table, after the machine line; exit 1 if a check failed."""
    entries = [json.loads(line) for line in args.results.read_text(encoding="utf-8").splitlines() if line]
    print("".join(f"\n{e['machine']}\n" for e in entries if "machine" in e))
    entries = [e for e in entries if "check" in e]
    print("| check | ok | tokens/s | peak memory MB | result |")
    print("|---|---|---:|---:|---|")
    for e in entries:
        ok = {True: "yes", False: "**NO**", None: "skipped"}[e["ok"]]
        rate = f"{e['tokens_per_s']:,.0f}" if "tokens_per_s" in e else ""
        memory = f"{e['peak_memory_mb']:,.0f}" if "peak_memory_mb" in e else ""
        print(f"| {e['check']} | {ok} | {rate} | {memory} | {e['result']} |")
    if any(e["ok"] is False for e in entries):
        sys.exit(1)


def main() -> None:
    from elmo.embedding.embed_options import PIPELINE_CHOICES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("parity", "embed", "train", "table"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--results", type=Path, help="the JSON-lines file the parts append to")
    parser.add_argument("--config", default="original", help="preset whose architecture runs")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=None, help="embed: sentences per batch; train: rows")
    parser.add_argument("--max-batch-tokens", type=int, default=4096)
    parser.add_argument("--pipeline", default="auto", choices=PIPELINE_CHOICES,
                        help="embed: overlap host work with the model's (auto: on with CUDA)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--corpus", type=Path, help="train: where to write the sentences and their vocabulary")
    parser.add_argument("--out", type=Path, help="train: the run directory")
    parser.add_argument("--compile", action="store_true", help="train: torch.compile the step's elementwise loops")
    args = parser.parse_args()
    if args.part == "embed" and args.batch_size is None:
        args.batch_size = 64
    {"parity": parity, "embed": embed, "train": train, "table": table}[args.part](args)


if __name__ == "__main__":
    main()
