"""Inference's recurrent step with its weights laid out four ways, A/B in one process, interleaved.

    PYTHONPATH=src python benchmarks/recurrent_step.py --rows 256 --steps 16 --rounds 7

The step is 42% of `elmo embed`'s time for the original model on Zen 3 and runs at ~0.75 of the machine's per-core
fp32 peak there (docs/benchmarks/embedding.md), bound by streaming its 32 MB weight matrix at every step; this
script asks whether another layout of those weights streams better. Each variant runs one direction's steps as
`LstmCellWithProjection._run_inference` does: the step's gate rows (the input half, already computed) get h W added,
then the cell (exact tanh, in place) and the clipped projection give the next h. Random weights scaled like a
trained model's, ``--rows`` rows at every step, one torch thread (a direction's share while the other direction
runs on the other core).

- ``blocks`` (the baseline, the code's): ``addmm_`` into the gate rows, :data:`elmo.modules.lstm.CPU_GEMM_COLUMNS`
  output columns at a time, each block a transposed view of the (4C, P) weight;
- ``contiguous``: the same blocks copied once into contiguous (P, columns) matrices;
- ``one-gemm``: one ``addmm_`` over all 4C columns;
- ``mkl-packed``: MKL's prepacked weights (``torch.ops.mkl._mkl_linear``, packed once for this row count; it only
  uses them for exactly that many rows), the product added to the gate rows afterwards, block by block.

The table gives each variant's median time per step, the median of its per-round ratios to the baseline (>1:
faster), the rounds it won, a Wilcoxon signed-rank test of the paired times, the memory its layout adds, the time
to make that layout, and the largest difference of its outputs (every step's h) from the baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from machine import machine_line
from scipy.stats import wilcoxon

from elmo.modules.lstm import CPU_GEMM_COLUMNS, addmm_by_columns
from elmo.modules.lstm_kernel import cell_forward, project

AddStep = Callable[[torch.Tensor, torch.Tensor], None]
"""gates (n, 4C) += h (n, P) @ W^T, in place."""


def layouts(weight: torch.Tensor, rows: int, columns: int) -> dict[str, tuple[AddStep, int, float] | str]:
    """Per variant: its step, the bytes its layout adds and the seconds it took to make, or why it cannot run
    here. ``weight``: (4C, P)."""
    w_t = weight.t()  # (P, 4C), the code's view
    starts = range(0, weight.shape[0], columns)
    variants: dict[str, tuple[AddStep, int, float] | str] = {
        "blocks": (lambda gates, h: addmm_by_columns(gates, h, w_t, columns=columns), 0, 0.0),
        "one-gemm": (lambda gates, h: gates.addmm_(h, w_t), 0, 0.0),
    }
    start = time.perf_counter()
    contiguous = [w_t[:, s : s + columns].contiguous() for s in starts]  # (P, columns) each

    def contiguous_step(gates: torch.Tensor, h: torch.Tensor) -> None:
        for block, s in zip(contiguous, starts):
            gates[:, s : s + columns].addmm_(h, block)

    variants["contiguous"] = (contiguous_step, weight.numel() * weight.element_size(), time.perf_counter() - start)
    linear = getattr(getattr(torch.ops, "mkl", None), "_mkl_linear", None)
    if linear is None or not torch.backends.mkl.is_available():
        variants["mkl-packed"] = "this torch has no MKL packed GEMM"
        return variants
    start = time.perf_counter()
    dense = [weight[s : s + columns].contiguous() for s in starts]  # (columns, P) each
    packed = [torch.ops.mkl._mkl_reorder_linear_weight(block, rows) for block in dense]

    def packed_step(gates: torch.Tensor, h: torch.Tensor) -> None:
        for block, pack, s in zip(dense, packed, starts):
            gates[:, s : s + columns].add_(linear(h, pack, block, None, rows))

    packed_bytes = sum(pack.numel() * 4 for pack in packed) + weight.numel() * weight.element_size()
    variants["mkl-packed"] = (packed_step, packed_bytes, time.perf_counter() - start)
    return variants


def run_steps(add_step: AddStep, x_gates: torch.Tensor, w_proj_t: torch.Tensor, steps: int,
              clip: float) -> torch.Tensor:
    """``steps`` inference steps from a zero state: (steps, n, P), every step's h."""
    rows = x_gates.shape[0] // steps
    gates_all = x_gates.clone()  # (steps * n, 4C): the input half, consumed in place as the code does
    c = torch.zeros(rows, w_proj_t.shape[0])  # (n, C)
    h = torch.zeros(rows, w_proj_t.shape[1])  # (n, P)
    outputs = torch.empty(steps, rows, h.shape[1])
    for t in range(steps):
        gates = gates_all[t * rows : (t + 1) * rows]  # (n, 4C)
        add_step(gates, h)
        *_, hidden = cell_forward(gates, c, None, clip, exact_tanh=True, in_place=True)  # (n, C)
        h = project(hidden, w_proj_t, clip, out=outputs[t])[1]  # (n, P)
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=256, help="rows at every step (default: a full default batch)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cells", type=int, default=4096, help="C (the original model's: 4096)")
    parser.add_argument("--projection", type=int, default=512, help="P (the original model's: 512)")
    parser.add_argument("--columns", type=int, default=CPU_GEMM_COLUMNS, help="the block width")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    gen = torch.Generator().manual_seed(0)
    cells, width = args.cells, args.projection
    weight = torch.randn(4 * cells, width, generator=gen) / width**0.5  # (4C, P), as state_linearity.weight
    w_proj_t = torch.randn(cells, width, generator=gen) / cells**0.5  # (C, P), the projection transposed
    x_gates = torch.randn(args.steps * args.rows, 4 * cells, generator=gen)  # (steps * n, 4C)
    columns = min(args.columns, 4 * cells)

    made: dict[str, tuple[AddStep, int, float]] = {}
    for name, variant in layouts(weight, args.rows, columns).items():
        if isinstance(variant, str):
            print(f"{name}: not run ({variant})")
        else:
            made[name] = variant
    baseline = run_steps(made["blocks"][0], x_gates, w_proj_t, args.steps, 3.0)
    difference = {name: float((run_steps(step, x_gates, w_proj_t, args.steps, 3.0) - baseline).abs().max())
                  for name, (step, *_) in made.items()}
    times: dict[str, list[float]] = {name: [] for name in made}
    names = list(made)
    for round_ in range(args.rounds):
        for name in names[round_ % len(names):] + names[: round_ % len(names)]:  # rotated order
            start = time.perf_counter()
            run_steps(made[name][0], x_gates, w_proj_t, args.steps, 3.0)
            times[name].append((time.perf_counter() - start) / args.steps)

    gemm_flop = 2 * args.rows * width * 4 * cells
    print(f"{args.rows} rows x {width} x {4 * cells} per step ({gemm_flop / 1e9:.2f} GFLOP), {args.steps} steps, "
          f"{args.rounds} rounds, {args.threads} thread(s), blocks of {columns} columns")
    print("| variant | median ms per step | baseline / variant (paired median) | rounds won | Wilcoxon p | "
          "layout MB | layout made in ms | largest difference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base = times["blocks"]
    for name, (_, extra, made_in) in made.items():
        ratios = [b / v for b, v in zip(base, times[name])]
        won = sum(r > 1 for r in ratios)
        p = "" if name == "blocks" else f"{wilcoxon(base, times[name]).pvalue:.3f}"
        label = f"{name} (baseline)" if name == "blocks" else name
        print(f"| {label} | {statistics.median(times[name]) * 1e3:.2f} | {statistics.median(ratios):.3f}x | "
              f"{won}/{args.rounds} | {p} | {extra / 2**20:.0f} | {made_in * 1e3:.1f} | {difference[name]:.2e} |")


if __name__ == "__main__":
    main()
