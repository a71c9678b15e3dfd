"""Where `elmo embed`'s time goes against this machine's own limit: a per-shape, per-phase roofline on the CPU.

    PYTHONPATH=src .venv/bin/python benchmarks/roofline.py                       # original model, fp32 (+ bf16
                                                                                 # where the CPU has bf16 units)
    PYTHONPATH=src .venv/bin/python benchmarks/roofline.py --config small --precision fp32 bf16 --sentences 512

It prints four tables:

1. The machine's GEMM peak in fp32 and bf16, on all torch threads and on one (the biLM's two directions run side by
   side, one core each: their products are one-thread products), at a square shape (4096^3); ``--peaks profiled``
   measures only the profiled precisions' (a quick smoke run where bf16 products are slow).
2. Every GEMM shape the model runs, at the row counts the batcher makes for these sentences (the most common
   rows of each phase, taken from the profiled run), measured alone with the thread count it gets in the model.
3. The profile: the original model (random weights scaled like a trained model's, written in the original format)
   embeds real sentences of the sample corpus, all lengths, through :class:`elmo.embedding.embedder.Embedder` with
   `elmo embed`'s default options (its batches: sorted by length, 256 sentences / 8,192 tokens). Every torch call
   of the run is timed on the thread that makes it (a torch function mode on the caller's thread and on each
   thread the two directions run on) and put into a phase: the char CNN, the highway layers, the token projection,
   the LSTMs' input half, recurrent step and projection (GEMMs, by their shapes), the LSTM cell and step glue (the
   rest of an LSTM layer's calls), other torch calls (the token layer's max-pool and activations, the residual adds,
   the output's assembly). Per phase:
   core-seconds (wall x the threads the call ran on), share, GEMM FLOPs, achieved GFLOP/s per core and its fraction
   of the one-core peak; what is left of cores x wall is Python, waiting and imbalance.
4. End to end, without the timing mode (median of ``--runs`` runs after a warm-up): tokens/s, GEMM GFLOP/s (FLOPs
   counted from the profiled run's own calls, so exactly what our code computes) and the fraction of the
   all-threads peak.

The timing mode costs a few microseconds a call (tens of thousands of calls a run, each a step's product of
milliseconds): the profiled wall and the plain one are printed side by side. bf16 on a CPU without bf16 units
(no AVX512-BF16, no AMX) runs products at well under 1 GFLOP/s; its profile is skipped there unless asked for with
``--precision bf16``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from embed_throughput import CORPUS, write_random_model
from machine import MEASURED_ROWS, gemm_flops, machine_line
from torch.overrides import TorchFunctionMode

import elmo.runtime.side_by_side as side_by_side_module
from elmo.config import NAMED_CONFIGS
from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from elmo.modules.lstm import LstmCellWithProjection
from elmo.precision import bf16_support
from elmo.runtime.side_by_side import side_by_side
from elmo.runtime.threads import small_ops_on_one_thread

PEAK_SHAPES = ((4096, 4096, 4096), (2048, 2048, 4096))
"""The machine's peak: the best of these (measured with at most 512 rows: :data:`machine.MEASURED_ROWS`)."""
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

GEMMS = {  # function -> (mat1, mat2 as (K, N), in place)
    torch.nn.functional.linear: lambda a, k: (a[0], a[1].t(), False),
    torch.matmul: lambda a, k: (a[0], a[1], False),
    torch.Tensor.matmul: lambda a, k: (a[0], a[1], False),
    torch.Tensor.__matmul__: lambda a, k: (a[0], a[1], False),
    torch.mm: lambda a, k: (a[0], a[1], False),
    torch.addmm: lambda a, k: (a[1], a[2], False),
    torch.Tensor.addmm_: lambda a, k: (a[1], a[2], True),
}
"""The products the model runs, as the timing mode sees them: each call's operands, and whether it adds in place
(the recurrent step adds into the input half's buffer; the input half is written with ``out=``)."""

_inside = threading.local()  # .layer: this thread is inside an LSTM layer's call


@dataclass
class Phase:
    core_seconds: float = 0.0
    calls: int = 0
    flops: float = 0.0
    threads: Counter = field(default_factory=Counter)  # torch threads -> calls
    shapes: Counter = field(default_factory=Counter)  # (m, k, n) -> calls


class PhaseTimer(TorchFunctionMode):
    """Times every torch call of the thread it is entered on and books it to a phase (:func:`phase_of`)."""

    def __init__(self, phases: dict[str, Phase], lock: threading.Lock, config) -> None:
        super().__init__()
        self.phases, self.lock, self.config = phases, lock, config

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        start = time.perf_counter()
        result = func(*args, **kwargs)
        seconds = time.perf_counter() - start
        threads = torch.get_num_threads()
        name, shape = phase_of(func, args, kwargs, getattr(_inside, "layer", False), self.config)
        with self.lock:
            phase = self.phases[name]
            phase.core_seconds += seconds * threads
            phase.calls += 1
            phase.threads[threads] += 1
            if shape is not None:
                phase.flops += 2 * shape[0] * shape[1] * shape[2]
                phase.shapes[shape] += 1
        return result


def phase_of(func, args, kwargs, in_layer: bool, config) -> tuple[str, tuple[int, int, int] | None]:
    """A call's phase, by its product's (K, N) and whether an LSTM layer makes it, and its (m, k, n) if it is a
    product."""
    if func not in GEMMS:
        return ("LSTM cell and step glue" if in_layer else "other torch calls"), None
    mat1, mat2, in_place = GEMMS[func](args, kwargs)
    k, n = mat2.shape[-2], mat2.shape[-1]
    shape = (mat1.numel() // mat1.shape[-1], k, n)
    lstm, cnn = config.lstm, config.char_cnn
    kernel = cnn.embedding_dim * max(w for w, _ in cnn.filters)
    if in_layer and k == lstm.projection_dim:
        return ("LSTM recurrent step" if in_place else "LSTM input half"), shape
    if in_layer and k == lstm.dim and n == lstm.projection_dim:
        return "LSTM projection", shape
    if k == kernel:
        return "char CNN", shape
    if k == cnn.n_filters and n == cnn.n_filters:
        return "highway", shape
    if k == cnn.n_filters and n == lstm.projection_dim:
        return "token projection", shape
    return "other products", shape


@contextmanager
def timed_phases(phases: dict[str, Phase], config):
    """The timing mode on the caller's thread and, through the hook every direction's thread enters
    (``beside_others``), on each of those; an LSTM layer's calls marked as its own (a function mode holds for the
    thread that entered it only, and the directions run on threads of their own when two cores are given)."""
    lock = threading.Lock()
    original_beside, original_layer = side_by_side_module.beside_others, LstmCellWithProjection.forward

    @contextmanager
    def beside_and_timed():
        with original_beside(), PhaseTimer(phases, lock, config):
            yield

    def layer_marked(self, *args, **kwargs):
        _inside.layer = True
        try:
            return original_layer(self, *args, **kwargs)
        finally:
            _inside.layer = False

    side_by_side_module.beside_others = beside_and_timed
    LstmCellWithProjection.forward = layer_marked
    try:
        with PhaseTimer(phases, lock, config):
            yield
    finally:
        side_by_side_module.beside_others = original_beside
        LstmCellWithProjection.forward = original_layer


def corpus_sentences(n: int) -> list[list[str]]:
    """The first ``n`` non-empty lines of the sample corpus's validation split, every length."""
    lines = (CORPUS / "sample.valid.txt").read_text(encoding="utf-8").splitlines()
    sentences = [line.split() for line in lines if line.split()][:n]
    if len(sentences) < n:
        raise SystemExit(f"only {len(sentences)} sentences in {CORPUS}")
    return sentences


def embed(embedder: Embedder, sentences: list[list[str]]) -> float:
    start = time.perf_counter()
    for _ in embedder.embed_sentences(sentences):
        pass
    return time.perf_counter() - start


def peaks(threads: int, precisions: list[str], side_by_side_too: list[str]) -> dict[tuple[str, str], float]:
    """GFLOP/s per (precision, how): "all" (every torch thread on one product: the best of :data:`PEAK_SHAPES`),
    "one" (one thread alone), "beside" (per core, one product a thread on ``threads`` threads side by side, as the
    biLM's directions run: what a direction's phase can reach while the other core works too)."""
    out = {}
    for precision in precisions:
        dtype = DTYPES[precision]
        out[precision, "all"] = max(gemm_flops(*shape, dtype=dtype) for shape in PEAK_SHAPES) / 1e9
        out[precision, "one"] = shape_alone(PEAK_SHAPES[0], precision, 1, threads)
        if precision in side_by_side_too:
            out[precision, "beside"] = max(beside_flops(shape, precision, threads) for shape in PEAK_SHAPES)
    return out


def shape_alone(shape: tuple[int, int, int], precision: str, threads: int, restore: int) -> float:
    """GFLOP/s of one product of ``shape`` alone, on ``threads`` torch threads."""
    torch.set_num_threads(threads)
    try:
        return gemm_flops(*shape, dtype=DTYPES[precision]) / 1e9
    finally:
        torch.set_num_threads(restore)


def beside_flops(shape: tuple[int, int, int], precision: str, threads: int, seconds: float = 0.6) -> float:
    """GFLOP/s per core of ``threads`` products of ``shape`` side by side, one thread each, through the package's
    own :func:`~elmo.runtime.side_by_side.side_by_side` under the inference thread policy: the best of 5 rounds."""
    m, k, n = min(shape[0], MEASURED_ROWS), shape[1], shape[2]
    a, b = torch.randn(m, k).to(DTYPES[precision]), torch.randn(k, n).to(DTYPES[precision])
    a @ b
    start = time.perf_counter()
    a @ b
    repeat = max(1, int(seconds / 3 / (time.perf_counter() - start) / 2))

    def loop() -> None:
        for _ in range(repeat):
            a @ b

    best = float("inf")
    with small_ops_on_one_thread("cpu"):
        for _ in range(5):
            start = time.perf_counter()
            side_by_side(*[loop] * threads)
            best = min(best, time.perf_counter() - start)
    return 2 * m * k * n * repeat / best / 1e9


@dataclass
class Profile:
    """One precision's measurements: the plain runs' seconds, the profiled run's phases and wall time, and each
    phase's most common product measured alone (GFLOP/s per core, and how it ran: "beside" or N threads)."""

    precision: str
    tokens: int
    plain: list[float]
    phases: dict[str, Phase]
    profiled_wall: float
    alone: dict[str, tuple[tuple[int, int, int], str, float]] = field(default_factory=dict)


def profile(config_name: str, precision: str, sentences: list[list[str]], runs: int, model: Path,
            threads: int) -> Profile:
    config = NAMED_CONFIGS[config_name]()
    embedder = Embedder(load_bilm(model), precision=precision, device="cpu")
    embed(embedder, sentences[: len(sentences) // 4])  # warm-up: kernel selection, first allocations
    plain = [embed(embedder, sentences) for _ in range(runs)]
    phases: dict[str, Phase] = defaultdict(Phase)
    with timed_phases(phases, config):
        profiled_wall = embed(embedder, sentences)
    result = Profile(precision, sum(map(len, sentences)), plain, dict(phases), profiled_wall)
    for name, phase in phases.items():
        if phase.flops:
            shape = max(phase.shapes, key=lambda s: phase.shapes[s] * s[0])  # the rows that carry most FLOPs
            used = max(phase.threads, key=phase.threads.get)
            if name.startswith("LSTM"):  # the directions' threads: one core each, side by side
                result.alone[name] = shape, "beside", beside_flops(shape, precision, threads)
            else:
                result.alone[name] = shape, f"{used} thread{'s' * (used > 1)}", shape_alone(
                    shape, precision, used, threads) / used
    return result


def report(config_name: str, result: Profile, peak: dict[tuple[str, str], float], threads: int) -> None:
    precision, phases = result.precision, result.phases
    wall = statistics.median(result.plain)
    flops = sum(p.flops for p in phases.values())
    all_cores = peak[precision, "all"]
    print(f"\n### {config_name}, {precision}: {result.tokens:,} tokens\n")
    print(f"End to end (median of {len(result.plain)} plain runs: {', '.join(f'{t:.2f}' for t in result.plain)} s): "
          f"**{result.tokens / wall:,.0f} tokens/s**, GEMM work {flops / wall / 1e9:.1f} GFLOP/s = "
          f"**{flops / wall / 1e9 / all_cores:.2f} of the {threads}-thread {precision} peak** "
          f"({all_cores:.1f} GFLOP/s). The profiled run: {result.profiled_wall:.2f} s.\n")
    print("| phase | calls | core-s | share of cores x wall | GFLOP | GFLOP/s per core | of the per-core peak "
          "| the rows that carry most FLOPs: m x k x n, threads | that shape alone, GFLOP/s per core | of the "
          "per-core peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    budget = threads * result.profiled_wall
    for name, phase in sorted(phases.items(), key=lambda item: -item[1].core_seconds):
        cells = [""] * 5
        if name in result.alone:
            shape, how, alone = result.alone[name]
            ceiling = peak[precision, "beside"] if how == "beside" else all_cores / threads
            per_core = phase.flops / phase.core_seconds / 1e9
            cells = [f"{per_core:.1f}", f"{per_core / ceiling:.2f}", f"{' x '.join(map(str, shape))}, {how}",
                     f"{alone:.1f}", f"{alone / ceiling:.2f}"]
        print(f"| {name} | {phase.calls:,} | {phase.core_seconds:.2f} | {phase.core_seconds / budget:.1%} | "
              f"{phase.flops / 1e9:,.1f} | " + " | ".join(cells) + " |")
    rest = budget - sum(p.core_seconds for p in phases.values())
    print(f"| Python, waiting, imbalance (the rest of {threads} x {result.profiled_wall:.2f} s) | | {rest:.2f} | "
          f"{rest / budget:.1%} | | | | | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="original", choices=("original", "small"))
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=None,
                        help="profiles to run (default: fp32, and bf16 where the CPU has bf16 units)")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3, help="plain timed runs after the warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peaks", choices=("both", "profiled"), default="both",
                        help="whose GEMM peaks to measure: fp32's and bf16's (the table's bf16 / fp32 column), or "
                             "only the profiled precisions' (quicker where bf16 products are slow)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fast_bf16, _ = bf16_support("cpu")
    precisions = args.precision or (["fp32", "bf16"] if fast_bf16 else ["fp32"])
    print(machine_line())
    flags = Path("/proc/cpuinfo").read_text().partition("\nflags")[2].partition("\n")[0].partition(":")[2].strip()
    print(f"\nCPU flags: {flags}\n")
    # the peak before and after the profiles, the best of the two: other jobs on a shared host only slow it down
    measured = ["fp32", "bf16"] if args.peaks == "both" else precisions
    peak = peaks(args.threads, measured, precisions)
    sentences = corpus_sentences(args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        model = write_random_model(args.config, Path(tmp) / args.config)
        results = [profile(args.config, precision, sentences, args.runs, model, args.threads)
                   for precision in precisions]
    again = peaks(args.threads, measured, precisions)
    peak = {key: max(value, again[key]) for key, value in peak.items()}
    shapes = " or ".join(" x ".join(map(str, shape)) for shape in PEAK_SHAPES)
    print(f"| GEMM peak, GFLOP/s (the best of {shapes}, measured before and after the profiles) | fp32 | bf16 | "
          "bf16 / fp32 |")
    print("|---|---:|---:|---:|")
    plural = "s" * (args.threads > 1)
    for how, label in (("all", f"one product on {args.threads} thread{plural}"), ("one", "one product on one thread"),
                       ("beside", f"per core, {args.threads} one-thread products side by side")):
        fp32, bf16 = peak.get(("fp32", how)), peak.get(("bf16", how))
        if fp32 is None and bf16 is None:
            continue
        cells = ["not measured" if value is None else f"{value:.1f}" for value in (fp32, bf16)]
        ratio = f"{bf16 / fp32:.2f}x" if fp32 and bf16 else ""
        print(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    print(f"\n{len(sentences)} sentences of the sample corpus, every length, `elmo embed`'s default batches")
    for result in results:
        report(args.config, result, peak, args.threads)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
