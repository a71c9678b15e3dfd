"""What the benchmarks compare with: the machine they ran on, and its measured GEMM throughput.

Every benchmark prints :func:`machine_line` (CPU model, the instruction sets that decide our speed, cores and
threads used, torch version, device, what precision ``auto`` picks there) and :func:`gemm_peaks` at its own main
GEMM shapes, in fp32 and bf16: the peak its fraction of peak is taken against (:func:`peak_table`). On a shared
machine the peak is measured in every round of the benchmark, between its timed runs, and the median taken
(:func:`median_peaks`), so that load moves the peak as it moves the timed runs. A CPU without bf16 units (no
AVX512-BF16, no AMX) runs bf16 products tens of times slower than fp32, which the bf16 column then shows.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import torch

from elmo.precision import bf16_support, cpu_features

ISA_FLAGS = {"avx2": ("avx2",), "fma": ("fma", "fma3"), "avx512f": ("avx512f", "avx512_f"),
             "avx512_bf16": ("avx512_bf16",), "amx": ("amx_bf16",)}
"""The instruction sets the machine line reports: name -> its flag as /proc/cpuinfo or torch spells it."""

MEASURED_ROWS = 512
"""GEMMs with more rows are measured with this many: the throughput is the same."""

PROBE_ROWS = 16
"""Rows of the first, small product of each measurement: when the full one would take several times the time
allowed, the product is measured with as many rows (a multiple of these) as fit in that time: bf16 on a CPU without
bf16 units runs at well under 1 GFLOP/s, where the small product alone is what fits; a loaded machine may only
slow an fp32 product down so far that fewer rows fit (reporting the small product's far lower throughput there
made the peak too low and fractions of it above 1)."""


def cpu_model() -> str:
    """The CPU's model name and family (Linux's /proc/cpuinfo; the platform's processor string elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines[:30])}
    model = fields.get("model name", platform.processor() or "unknown CPU")
    return model + (f" (family {fields['cpu family']}, model {fields.get('model', '?')})" if "cpu family" in fields
                    else "")


def machine_line(device: str = "cpu") -> str:
    """One line: CPU model, ISA, the instruction set PyTorch's own kernels use (lower than the ISA where
    ``ATEN_CPU_CAPABILITY`` restricts it, e.g. to measure an AVX2-only CPU's code paths on a newer one), cores and
    torch threads, torch version, device (the GPU's name on CUDA), and whether precision ``auto`` picks bf16 there
    and why."""
    flags = cpu_features()
    isa = [name for name, spellings in ISA_FLAGS.items() if flags & set(spellings)]
    where = device
    if device.startswith("cuda") and torch.cuda.is_available():
        where = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    fast, why = bf16_support(device)
    return (f"machine: {cpu_model()}; ISA {'+'.join(isa) or 'none of ' + '/'.join(ISA_FLAGS)} (ATen kernels "
            f"{torch.backends.cpu.get_cpu_capability()}); {os.cpu_count()} "
            f"cores, {torch.get_num_threads()} torch threads; torch {torch.__version__}; device {where}; "
            f"precision auto -> {'bf16' if fast else 'fp32'} ({why})")


def gemm_flops(m: int, k: int, n: int, dtype: torch.dtype = torch.float32, device: str = "cpu",
               seconds: float = 0.3, rounds: int = 3) -> float:
    """Measured FLOP/s of (m, k) x (k, n) in ``dtype`` (m capped at :data:`MEASURED_ROWS`, fewer rows where the
    product would take far longer than ``seconds``: :data:`PROBE_ROWS`): the best of ``rounds``
    timed loops of about ``seconds`` / ``rounds`` each (other jobs on the machine only ever slow a loop down)."""
    rows = min(m, MEASURED_ROWS)
    b = torch.randn(k, n, device=device).to(dtype)

    def timed(a: torch.Tensor, repeat: int) -> float:
        if device != "cpu":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeat):
            a @ b
        if device != "cpu":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - start) / repeat

    probe = torch.randn(min(rows, PROBE_ROWS), k, device=device).to(dtype)
    timed(probe, 1)  # warm-up: kernel selection, first-touch allocations
    probe_s = timed(probe, 1)
    estimate = probe_s * rows / probe.shape[0]
    if estimate > 3 * seconds:  # the full product would take too long: as many rows as fit
        rows = int(rows * 3 * seconds / estimate) // PROBE_ROWS * PROBE_ROWS
        if rows <= probe.shape[0]:
            return 2 * probe.shape[0] * k * n / probe_s
    a = torch.randn(rows, k, device=device).to(dtype)
    one = timed(a, 1)
    repeat = max(1, int(seconds / rounds / max(one, 1e-6)))
    return 2 * rows * k * n / min(timed(a, repeat) for _ in range(rounds))


def median_peaks(measurements: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Several :func:`gemm_peaks` results (one per round of a benchmark, each dtype measured in at least one) ->
    the median of each shape's, and their best as the peak: what a benchmark's medians are compared with, moved by
    the machine's load as they are."""
    dtypes = sorted({d for m in measurements for d in m}, key=lambda d: d != "fp32")  # fp32 first
    medians = {}
    for d in dtypes:
        shapes = [shape for shape in next(m[d] for m in measurements if d in m) if shape != "peak"]
        medians[d] = {shape: statistics.median(m[d][shape] for m in measurements if d in m) for shape in shapes}
        medians[d]["peak"] = max(medians[d].values())
    return medians


def gemm_peaks(shapes: dict[str, tuple[int, int, int]], device: str = "cpu",
               dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16)) -> dict[str, dict[str, float]]:
    """{dtype name: {shape name: GFLOP/s, ..., "peak": the best of them}} at the benchmark's main ``shapes``
    ({name: (m, k, n)}), each in every dtype."""
    peaks = {}
    for dtype in dtypes:
        measured = {name: gemm_flops(*shape, dtype=dtype, device=device) / 1e9 for name, shape in shapes.items()}
        measured["peak"] = max(measured.values())
        peaks[str(dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float32", "fp32")] = measured
    return peaks


def peak_table(shapes: dict[str, tuple[int, int, int]], peaks: dict[str, dict[str, float]]) -> str:
    """The measured GEMM throughput as a markdown table: one row per shape, one column per dtype."""
    names = list(peaks)
    lines = ["| GEMM (m x k x n) | " + " | ".join(f"{d} GFLOP/s" for d in names) + " |",
             "|---|" + "---:|" * len(names)]
    for shape, (m, k, n) in shapes.items():
        size = f"{m} x {k} x {n}" + (f" (measured at {MEASURED_ROWS} rows)" if m > MEASURED_ROWS else "")
        lines.append(f"| {shape}: {size} | " + " | ".join(f"{peaks[d][shape]:.1f}" for d in names) + " |")
    lines.append("| peak (the best of these) | " + " | ".join(f"**{peaks[d]['peak']:.1f}**" for d in names) + " |")
    return "\n".join(lines)
