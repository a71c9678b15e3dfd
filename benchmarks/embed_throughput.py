"""Embedding throughput: this package vs the reference PyTorch ELMo (AllenNLP's code, as simple-elmo-pytorch 0.2).

Both load the same random weights, written in the original HDF5 format, and embed the same batches of real
sentences of 20-30 tokens (read at run time from the shared sample corpus), with gradients off and in eval mode.
Every measurement runs in its own subprocess (so peak RSS is per implementation), with a fixed thread count;
implementations are measured in interleaved rounds (so a change in the machine's load hits all of them), and
the table reports medians over all timed runs, tokens/s, the ratio of medians to the reference, and peak RSS.

It also prints the machine line and the machine's fp32 and bf16 GEMM throughput at the main shapes of the first
configuration's inference (:mod:`machine`; the median of a measurement in every round, between the workers), and
for each row the fraction of the peak in the row's precision that its GEMM FLOPs make up: ours counted as our code
computes them (:mod:`flops`: the token layer once per distinct word, the LSTMs at real positions only), the
reference's as its code does (every conv position and the highway for every token, the LSTMs over the padded
batch).

Environment (the reference needs AllenNLP's module code, installed without its dependencies):

    python -m venv /work/bench-venv
    /work/bench-venv/bin/pip install torch==2.13.0 h5py numpy safetensors tqdm
    /work/bench-venv/bin/pip install --no-deps simple-elmo-pytorch==0.2
    PYTHONPATH=src /work/bench-venv/bin/python benchmarks/embed_throughput.py --threads 2

Memory check (1M sentences, small config, through the ``elmo embed`` CLI; takes long, run it niced):

    PYTHONPATH=src nice /work/bench-venv/bin/python benchmarks/embed_throughput.py --memory-check 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import gemm_peaks, machine_line, median_peaks, peak_table

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "lm" / "sample"
CONFIGS = {"original": "2x4096_512_2048cnn_2xhighway", "small": "2x1024_128_2048cnn_1xhighway"}


def real_sentences(n: int, min_len: int = 20, max_len: int = 30, split: str = "valid") -> list[list[str]]:
    lines = (CORPUS / f"sample.{split}.txt").read_text(encoding="utf-8").splitlines()
    picked = [line.split() for line in lines if min_len <= len(line.split()) <= max_len]
    if len(picked) < n:
        raise SystemExit(f"only {len(picked)} sentences of {min_len}-{max_len} tokens in {CORPUS}")
    return picked[:n]


def write_random_model(config_name: str, directory: Path, seed: int = 0) -> Path:
    """Random weights (scaled like a trained model's) in the original options.json + weights.hdf5 format."""
    import torch

    from elmo.config import NAMED_CONFIGS
    from elmo.formats.model_files import save_bilm
    from elmo.modules.bilm import build_bilm

    bilm = build_bilm(NAMED_CONFIGS[config_name]())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in bilm.parameters():
            scale = p.shape[-1] ** -0.5 if p.dim() > 1 else 0.1
            p.copy_(torch.randn(p.shape, generator=generator) * scale)
    return save_bilm(bilm, directory)


# ---------------------------------------------------------------- workers (one measurement per subprocess)


def _time(run, repeats: int) -> list[float]:
    run()  # warm-up: first-call allocations, oneDNN kernel selection
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def worker_reference(model: Path, sentences: list[list[str]], repeats: int, save: Path | None) -> dict:
    import torch
    from simple_elmo_pytorch import ElmoBiLmSentence
    from simple_elmo_pytorch import batch_to_ids as reference_ids

    bilm = ElmoBiLmSentence(str(model / "options.json"), str(model / "weights.hdf5")).eval()
    outputs = []

    @torch.no_grad()
    def run():
        bilm._elmo_lstm.reset_states()  # the same zero start state as ours (its LSTM is stateful)
        out = bilm(reference_ids(sentences))
        outputs.append([x[:, 1:-1].numpy() for x in out["activations"]])

    times = _time(run, repeats)
    if save is not None:
        np.save(save, _per_token(outputs[-1], sentences))
    return {"times": times}


def worker_ours(model: Path, sentences: list[list[str]], repeats: int, save: Path | None, precision: str,
                vocab_cache: int) -> dict:
    from elmo.embedding.embedder import Embedder
    from elmo.formats.model_files import load_bilm

    embedder = Embedder(load_bilm(model), precision=precision, device="cpu", vocab_cache=vocab_cache,
                        batch_size=len(sentences), max_batch_tokens=1 << 30)
    outputs = []
    times = _time(lambda: outputs.append(embedder.embed_batch(sentences)), repeats)
    if save is not None:
        np.save(save, np.concatenate([x.transpose(1, 0, 2).reshape(x.shape[1], -1) for x in outputs[-1]]))
    return {"times": times}


def _per_token(layers: list[np.ndarray], sentences: list[list[str]]) -> np.ndarray:
    """Reference layers [(B, T, D)] -> (tokens, (L+1)*D) in our order."""
    stacked = np.stack(layers, axis=1)  # (B, L+1, T, D)
    return np.concatenate([stacked[b, :, : len(s)].transpose(1, 0, 2).reshape(len(s), -1)
                           for b, s in enumerate(sentences)])


def run_worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    spec = json.loads(args.worker)
    sentences = real_sentences(spec["n"])[: spec["n"]]
    if spec.get("latency"):
        sentences = [s[:20] for s in sentences[:1]]
    save = Path(spec["save"]) if spec.get("save") else None
    model = Path(spec["model"])
    if spec["impl"] == "reference":
        result = worker_reference(model, sentences, spec["repeats"], save)
    else:
        result = worker_ours(model, sentences, spec["repeats"], save, spec["precision"], spec.get("vocab_cache", 0))
    # VmHWM, not ru_maxrss: the latter keeps the driver's peak across fork + exec.
    result["peak_rss_mb"] = _proc_status(os.getpid())["VmHWM"]
    result["tokens"] = sum(len(s) for s in sentences)
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------- driver


def measure(spec: dict, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec), "--threads", str(threads)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"worker {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-token cosine over each layer separately: (tokens, (L+1)*D) pairs -> (tokens * (L+1),)."""
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-30)


def run_benchmarks(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)  # the GEMM peaks, measured here, with the workers' thread count
    shapes = main_shapes(args.configs[0], args.sentences)
    peaks = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for config in args.configs:
            model = write_random_model(config, tmp / config)
            cases = [("reference", "fp32", 0), ("ours", "fp32", 0)]
            if "bf16" in args.precision:
                cases += [("ours", "bf16", 0), ("ours", "bf16", 50000)]
            cases_n = ((f"{args.sentences} sentences", args.sentences, args.repeats),
                       ("1 sentence, 20 tokens", 1, args.repeats * 5))
            for label, n, repeats in cases_n:
                if config != "original" and n == 1 and not args.all_latency:
                    continue
                results: dict[str, tuple[dict, Path]] = {}
                # Rounds interleave the implementations, so a change in the machine's load hits all of them.
                for round_ in range(args.rounds):
                    for impl, precision, cache in cases:
                        if impl == "reference" and args.skip_reference:
                            continue
                        name = f"{impl} {precision}" + (" +vocab-cache" if cache else "")
                        save = tmp / f"{config}-{n}-{impl}-{precision}-{cache}.npy"
                        spec = {"impl": impl, "precision": precision, "vocab_cache": cache, "model": str(model),
                                "n": n, "repeats": repeats, "save": str(save), "latency": n == 1}
                        result = measure(spec, args.threads)
                        if name in results:
                            result["times"] += results[name][0]["times"]
                            result["peak_rss_mb"] = max(result["peak_rss_mb"], results[name][0]["peak_rss_mb"])
                        results[name] = (result, save)
                        print(f"  round {round_ + 1}: {config} / {label} / {name}", file=sys.stderr)
                    peaks.append(gemm_peaks(shapes))
                rows += table_rows(config, label, results, gemm_flops_per_run(config, n))
    peaks = median_peaks(peaks)
    print(f"\n{machine_line()}\n")
    print(f"GEMM throughput at the main shapes of the {args.configs[0]} configuration, {args.sentences} sentences:\n")
    print(peak_table(shapes, peaks))
    print_table(rows, args.threads, peaks)


def table_rows(config: str, label: str, results: dict, flops: dict[str, float]) -> list[dict]:
    ours32 = np.load(results["ours fp32"][1])
    reference = results.get("reference fp32")
    ref_median = statistics.median(reference[0]["times"]) if reference else None
    rows = []
    for name, (result, save) in results.items():
        median = statistics.median(result["times"])
        out = np.load(save)
        d = ours32.shape[1] // 3
        cos = np.concatenate([cosine(out[:, i * d:(i + 1) * d], ours32[:, i * d:(i + 1) * d]) for i in range(3)])
        rows.append({
            "config": config, "case": label, "impl": name, "median_s": median,
            "tokens_per_s": result["tokens"] / median,
            "speedup": ref_median / median if ref_median else float("nan"), "peak_rss_mb": result["peak_rss_mb"],
            "cos_mean": cos.mean(), "cos_min": cos.min(), "max_abs_vs_ours_fp32": np.abs(out - ours32).max(),
            "gflops_per_s": flops[name.split()[0] + (" cached" if "vocab-cache" in name else "")] / median / 1e9,
            "precision": name.split()[1],
        })
    return rows


def print_table(rows: list[dict], threads: int, peaks: dict[str, dict[str, float]]) -> None:
    print(f"\ntorch threads in the workers: {threads}\n")
    print("| config | case | implementation | median s | tokens/s | vs reference | GEMM GFLOP/s | fraction of peak "
          "| peak RSS MB | cosine to our fp32 (mean / min) | max abs diff to our fp32 |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        fraction = r["gflops_per_s"] / peaks[r["precision"]]["peak"]
        print(f"| {r['config']} | {r['case']} | {r['impl']} | {r['median_s']:.3f} | {r['tokens_per_s']:,.0f} | "
              f"{_ratio(r['speedup'])} | {r['gflops_per_s']:.1f} | {fraction:.2f} of {r['precision']} | "
              f"{r['peak_rss_mb']:,.0f} | {r['cos_mean']:.6f} / {r['cos_min']:.6f} | "
              f"{r['max_abs_vs_ours_fp32']:.2e} |")


def _ratio(speedup: float) -> str:
    """The ratio to the reference, or "-" when the reference was not measured (--skip-reference)."""
    return "-" if speedup != speedup else f"{speedup:.2f}x"


def main_shapes(config_name: str, sentences: int) -> dict[str, tuple[int, int, int]]:
    """The main GEMMs (m, k, n) of embedding ``sentences`` 20-30-token sentences in one batch."""
    from elmo.config import NAMED_CONFIGS

    config = NAMED_CONFIGS[config_name]()
    lstm, cnn = config.lstm, config.char_cnn
    positions = sentences * 27  # about 25 tokens + <S> and </S>
    return {"LSTM input half, all steps": (positions, lstm.projection_dim, 4 * lstm.dim),
            "LSTM recurrent step": (sentences, lstm.projection_dim, 4 * lstm.dim),
            "LSTM projection": (sentences, lstm.dim, lstm.projection_dim),
            "highway": (positions // 2, cnn.n_filters, 2 * cnn.n_filters)}


def gemm_flops_per_run(config_name: str, n: int) -> dict[str, float]:
    """GEMM FLOPs of one run over the case's sentences, by implementation (:mod:`flops`)."""
    import torch
    from flops import lstm_macs_per_position, our_lstm_macs, reference_token_macs, token_layer_macs

    from elmo.config import NAMED_CONFIGS
    from elmo.modules.bilm import build_bilm
    from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids

    bilm = build_bilm(NAMED_CONFIGS[config_name]())
    sentences = real_sentences(n)[:n] if n > 1 else [real_sentences(1)[0][:20]]
    rows = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    words = list(dict.fromkeys(w for row in rows for w in row))
    ids = torch.from_numpy(shifted_char_ids(words, bilm.token_encoder.config.max_characters_per_token))
    positions = sum(len(row) for row in rows)
    padded = len(rows) * max(len(row) for row in rows)
    lstm = our_lstm_macs(bilm, positions, len(words))
    ours = token_layer_macs(bilm.token_encoder, ids) + lstm
    reference = padded * (reference_token_macs(bilm.token_encoder) + lstm_macs_per_position(bilm))
    # with --vocab-cache every word is a hit after the warm-up run: only the LSTMs run
    return {"ours": 2 * ours, "ours cached": 2 * lstm, "reference": 2 * reference}


# ---------------------------------------------------------------- memory check


def memory_check(args: argparse.Namespace) -> None:
    """Embed ``--memory-check N`` real sentences (the sample corpus, cycled) with the small config; report peak RSS."""
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        model = write_random_model("small", tmp / "small")
        lines = (CORPUS / "sample.train.txt").read_text(encoding="utf-8").splitlines()
        text = tmp / "input.txt"
        with open(text, "w", encoding="utf-8") as f:
            for i in range(args.memory_check):
                f.write(lines[i % len(lines)] + "\n")
        out = tmp / "out.hdf5"
        cmd = [sys.executable, "-m", "elmo", "embed", str(text), str(out), "--top", "--model", str(model),
               "--dtype", "float16", "--precision", args.memory_precision, "--vocab-cache", "50000",
               "--no-progress"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        start = time.perf_counter()
        process = subprocess.Popen(cmd, env=env)
        peak = _watch_memory(process, out.with_name(out.name + ".parts"), start, args.memory_check)
        if process.wait() != 0:
            raise SystemExit(f"elmo embed failed with exit status {process.returncode}")
        elapsed = time.perf_counter() - start
        tokens = sum(len(lines[i % len(lines)].split()) for i in range(args.memory_check))
        print(f"memory check: {args.memory_check:,} sentences ({tokens:,} tokens), small config, --top float16 "
              f"{args.memory_precision}: peak RSS {peak:,.0f} MB, {elapsed:,.0f} s, "
              f"{args.memory_check / elapsed:,.0f} sentences/s, output {out.stat().st_size / 1e9:.2f} GB")


def _watch_memory(process: subprocess.Popen, parts: Path, start: float, total: int, every: float = 60.0) -> float:
    """Print the child's RSS and progress (finished chunks of 4096 lines) every ``every`` s; return the peak MB."""
    peak, last = 0.0, 0.0
    while process.poll() is None:
        status = _proc_status(process.pid)
        peak = max(peak, status.get("VmHWM", 0.0))
        if time.perf_counter() - last >= every:
            last = time.perf_counter()
            done = min(total, 4096 * len(list(parts.glob("part-*.hdf5")))) if parts.is_dir() else 0
            print(f"  {last - start:7.0f} s: ~{done:,} sentences done, RSS {status.get('VmRSS', 0):,.0f} MB, "
                  f"peak {peak:,.0f} MB", flush=True)
        time.sleep(1.0)
    return peak


def _proc_status(pid: int) -> dict[str, float]:
    """VmRSS / VmHWM of a live process, in MB (empty once it has exited)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {line.split(":")[0]: float(line.split()[1]) / 1024 for line in text.splitlines() if line.startswith("Vm")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["original", "small"], choices=sorted(CONFIGS))
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per round (after one warm-up run)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all implementations, interleaved")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32", "bf16"],
                        help="our precisions to measure (fp32 always: the other rows are compared with it); on a "
                        "CPU without bf16 units a bf16 run of the original configuration takes many minutes")
    parser.add_argument("--all-latency", action="store_true", help="also measure latency for the small config")
    parser.add_argument("--memory-check", type=int, default=0, metavar="N")
    parser.add_argument("--memory-precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--workdir", default=None, help="where the memory check writes its input and output")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
    elif args.memory_check:
        memory_check(args)
    else:
        run_benchmarks(args)


if __name__ == "__main__":
    main()
