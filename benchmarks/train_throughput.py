"""Training throughput of our step (data packing excluded): forward, backward, clip and the optimizer update.

    PYTHONPATH=src python benchmarks/train_throughput.py [--reference] [--precision fp32 bf16]
    (defaults: --config small --batch-size 32 --vocab-size 50000, the issue's setting)

Batches are random words over a synthetic frequency-sorted vocabulary, so no corpus is needed. Prints a JSON line
per precision, the machine line and its measured fp32 and bf16 GEMM throughput at the step's main shapes
(:mod:`machine`), and a table: median tokens/s (B x T positions per step, each predicted in both directions, as the
trainer's log counts them) and the fraction of the machine's measured GEMM throughput (in the step's precision)
that the step uses, counted two ways: with the FLOPs the reference computes (char CNN over all 50 positions and
highway for every token), and with the FLOPs our step actually does (char CNN and highway once per distinct word,
CNN over the needed positions only). The second says how much faster our step could still get without doing less
arithmetic.

``--reference`` also times AllenNLP's biLM modules (``_ElmoCharacterEncoder`` + ``ElmoLstm``, from
``pip install --no-deps simple-elmo-pytorch==0.2``), built from the same weights, with gradients enabled, trained
with the same softmax head (``head_losses``: both directions in one fused call), negatives, clip and optimizer
(Adagrad's sparse update of the sampled softmax rows, as ``elmo train`` runs one process) on the same batches.
Every round runs one step of each implementation at each precision, interleaved, so a machine whose speed drifts
(shared cores) moves every column alike. The speed-up is given two ways: the ratio of the median
tokens/s, and the median over rounds of each round's ratio (the two steps of a round run back to back, so drift
between rounds cancels). With ``--precision bf16`` both run under bfloat16 autocast; the table also compares ours
in bf16 with the reference in float32 (how AllenNLP trains on a CPU) when both precisions are measured. Our step
runs as the preset configures it (``compile``: the LSTM step loops, softmax blocks, max-pool and highway compile
during the warm-up rounds, which the medians exclude); the reference's softmax head runs as ours does.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import time

import torch
from flops import lstm_macs_per_position, reference_token_macs, token_layer_macs
from machine import gemm_peaks, machine_line, median_peaks, peak_table

from elmo.modules.softmax import head_losses
from elmo.runtime.compile_switch import set_compile
from elmo.runtime.memory import keep_freed_memory
from elmo.training.optimizer import clipped_step, gradient_norm, make_optimizer
from elmo.training.presets import load_preset
from elmo.training.run_files import build_language_model
from elmo.training.windows import LMBatch


def random_batch(batch: int, steps: int, vocab_size: int, width: int, generator: torch.Generator) -> LMBatch:
    """Zipf-like word ids; each word's characters are derived from its id (a stand-in for real text).

    The backward rows hold the same words reversed, as in training (both directions read the same sentences).
    """
    u = torch.rand(batch, steps + 1, generator=generator, dtype=torch.float64)
    ids = (torch.exp(u * torch.log(torch.tensor(vocab_size + 1.0))) - 1).long().clamp(0, vocab_size - 1)
    fwd_in, fwd_out = ids[:, :-1], ids[:, 1:]
    bwd_in, bwd_out = ids.flip(1)[:, :-1], ids.flip(1)[:, 1:]
    words, index = torch.unique(torch.stack([fwd_in, bwd_in]), return_inverse=True)
    chars = torch.full((words.numel(), width), 261, dtype=torch.long)  # PAD + 1
    chars[:, 0] = 259  # BOW + 1
    for k in range(6):  # six "letters" from the id's digits
        chars[:, 1 + k] = 98 + (words // 26**k) % 26
    chars[:, 7] = 260  # EOW + 1
    return LMBatch(chars, index[0], index[1], fwd_out.contiguous(), bwd_out.contiguous())


def reference_flops_per_token(lm) -> float:
    """Training FLOPs per token position (both directions) of the reference's computation: the char CNN over all W
    character positions and the highway layers for every token, as AllenNLP's encoder runs them."""
    token = reference_token_macs(lm.bilm.token_encoder)
    return 2 * 3 * (token + lstm_macs_per_position(lm.bilm) + _softmax_macs(lm))  # training ~ 3x the forward


def our_flops_per_step(lm, batch: LMBatch) -> float:
    """Training FLOPs of our step on ``batch`` (:mod:`flops`: the token layer once per distinct word)."""
    positions = batch.forward_index.numel()
    token = token_layer_macs(lm.bilm.token_encoder, batch.word_char_ids)
    return 2 * 3 * (token + positions * (lstm_macs_per_position(lm.bilm) + _softmax_macs(lm)))


def _softmax_macs(lm) -> float:
    """Multiply-adds per position of the softmax of both directions (the sampled rows, or the whole vocabulary)."""
    rows = lm.sampler.num_sampled + 1 if lm.sampler is not None else lm.softmax.vocab_size
    return 2 * rows * lm.softmax.weight.shape[1]


def main_shapes(lm, batch_size: int, unroll_steps: int) -> dict[str, tuple[int, int, int]]:
    """The step's main GEMMs (m, k, n): the GEMM peak is measured at these."""
    lstm, enc = lm.bilm.config.lstm, lm.bilm.token_encoder.config
    rows = batch_size * unroll_steps
    softmax_rows = lm.sampler.num_sampled + 1 if lm.sampler is not None else lm.softmax.vocab_size
    return {"LSTM input half, all steps": (rows, lstm.projection_dim, 4 * lstm.dim),
            "LSTM recurrent step": (batch_size, lstm.projection_dim, 4 * lstm.dim),
            "softmax": (rows, lm.softmax.weight.shape[1], softmax_rows),
            "highway": (rows, enc.n_filters, 2 * enc.n_filters)}


class ReferenceStep:
    """AllenNLP's biLM (the reference PyTorch implementation) under our loss head and optimizer."""

    def __init__(self, lm, train) -> None:
        import tempfile

        from simple_elmo_pytorch.models.elmo import _ElmoCharacterEncoder
        from simple_elmo_pytorch.models.elmo_lstm import ElmoLstm

        from elmo.formats.model_files import save_bilm

        self.dir = tempfile.TemporaryDirectory()
        save_bilm(lm.bilm, self.dir.name)
        options, weights = f"{self.dir.name}/options.json", f"{self.dir.name}/weights.hdf5"
        lstm = lm.bilm.config.lstm
        self.encoder = _ElmoCharacterEncoder(options, weights, requires_grad=True)
        self.lstm = ElmoLstm(lstm.projection_dim, lstm.projection_dim, lstm.dim, lstm.n_layers, requires_grad=True,
                             memory_cell_clip_value=lstm.cell_clip, state_projection_clip_value=lstm.proj_clip)
        self.lstm.load_weights(weights)
        self.softmax = copy.deepcopy(lm.softmax)  # the same head (a copy): only the biLM differs
        self.sampler = lm.sampler
        self.dropout = copy.deepcopy(lm.output_dropout)  # the same dropout before the head
        params = [*self.encoder.parameters(), *self.lstm.parameters(), *self.softmax.parameters()]
        self.params = [p for p in params if p.requires_grad]
        self.optimizer = make_optimizer(self.params, train)  # the trainer's optimizer and clip, as for ours
        self.unroll_steps = train.unroll_steps
        self.clip = train.all_clip_norm_val

    def step(self, batch: LMBatch, samples) -> None:
        chars = batch.word_char_ids[batch.forward_index[:, 1:-1]]  # (B, T-2, W); the encoder adds <S> and </S>
        self.optimizer.zero_grad()
        encoded = self.encoder(chars)
        top = self.lstm(encoded["token_embedding"], encoded["mask"])[-1]  # (B, T, 2P), state kept inside
        dim = top.shape[-1] // 2
        hiddens = [self.dropout(top[..., :dim]).reshape(-1, dim), self.dropout(top[..., dim:]).reshape(-1, dim)]
        targets = [batch.forward_targets.reshape(-1), batch.backward_targets.reshape(-1)]
        # the head ours uses, run as ours runs it
        loss, _ = head_losses(self.softmax, self.sampler, hiddens, targets, samples)
        (loss * self.unroll_steps).backward()
        clipped_step(self.optimizer, gradient_norm(self.params), self.clip)  # the trainer's clip and update


def measure(config: str, batch_size: int, vocab_size: int, steps: int, precisions: list[str], full_softmax: bool,
            reference: bool = False) -> tuple[list[dict], dict, dict]:
    """Median step times of ours (and of the reference) at each precision, all interleaved step by step.

    Every round runs one step of each (precision, implementation) pair on the same batch, so a machine that speeds
    up or slows down during the run moves every column alike, and any two columns can be compared (the table
    compares ours in bf16 with the reference in float32 too). Returns the results, the main GEMM shapes and the
    machine's GEMM throughput at them (:func:`machine.median_peaks` of a measurement after every round in the
    precisions timed; the other precision once, before the rounds)."""
    overrides = {"batch_size": batch_size, "sample_softmax": not full_softmax}
    cfg, train = load_preset(config, overrides)
    set_compile(train.compile)  # as the trainer does
    torch.manual_seed(0)
    lm = build_language_model(cfg, train, vocab_size).train()
    lm.softmax.sparse = lm.sampler is not None and train.optimizer == "adagrad"  # as `elmo train` in one process
    opt = make_optimizer(lm.parameters(), train)
    generator = torch.Generator().manual_seed(0)
    h, c = lm.bilm.zero_state(batch_size)
    width = cfg.char_cnn.max_characters_per_token
    ref = ReferenceStep(lm, train) if reference else None
    times = {(p, who): [] for p in precisions for who in ("ours", "reference")}
    step_flops = []
    shapes = main_shapes(lm, batch_size, train.unroll_steps)
    dtypes = tuple(torch.bfloat16 if p == "bf16" else torch.float32 for p in precisions)
    untimed = tuple(d for d in (torch.float32, torch.bfloat16) if d not in dtypes)  # measured once, up front
    peaks = [gemm_peaks(shapes, dtypes=untimed)] if untimed else []
    for step in range(steps + 2):
        batch = random_batch(batch_size, train.unroll_steps, vocab_size, width, generator)
        samples = [lm.sampler.sample(generator) for _ in range(2)] if lm.sampler is not None else None
        for precision in precisions:
            autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
            if ref is not None:
                start = time.perf_counter()
                with autocast:
                    ref.step(batch, samples)
                times[precision, "reference"].append(time.perf_counter() - start)
            start = time.perf_counter()
            opt.zero_grad()
            with autocast:
                out = lm(batch.word_char_ids, batch.forward_index, batch.backward_index, batch.forward_targets,
                         batch.backward_targets, (h, c), samples)
                (out.loss * train.unroll_steps).backward()
            clipped_step(opt, gradient_norm(lm.parameters()), train.all_clip_norm_val)
            h, c = (s.detach() for s in out.state)
            times[precision, "ours"].append(time.perf_counter() - start)
        step_flops.append(our_flops_per_step(lm, batch))
        if step >= 2:  # after the warm-up rounds, like the step times
            peaks.append(gemm_peaks(shapes, dtypes=dtypes))
    peaks = median_peaks(peaks)
    tokens = batch_size * train.unroll_steps
    results = []
    for precision in precisions:
        step_s = statistics.median(times[precision, "ours"][2:])  # two warm-up rounds excluded
        gemm = peaks[precision]["peak"] * 1e9
        result = {"config": config, "batch_size": batch_size, "unroll_steps": train.unroll_steps,
                  "vocab_size": vocab_size, "precision": precision,
                  "softmax": "full" if full_softmax else f"sampled({train.n_negative_samples_batch})",
                  "threads": torch.get_num_threads(), "tokens_per_s": round(tokens / step_s, 1),
                  "gemm_gflops": round(gemm / 1e9, 1),
                  "gemm_fraction_reference_count": round(reference_flops_per_token(lm) * tokens / step_s / gemm, 3),
                  "gemm_fraction_our_count": round(statistics.median(step_flops[2:]) / step_s / gemm, 3)}
        if ref is not None:
            result["reference_tokens_per_s"] = round(tokens / statistics.median(times[precision, "reference"][2:]), 1)
            result["speedup_vs_reference"] = round(result["tokens_per_s"] / result["reference_tokens_per_s"], 2)
            result["speedup_per_round"] = _per_round(times[precision, "reference"], times[precision, "ours"])
            if precision != "fp32" and "fp32" in precisions:
                result["speedup_vs_reference_fp32_per_round"] = _per_round(times["fp32", "reference"],
                                                                           times[precision, "ours"])
        results.append(result)
    return results, shapes, peaks


def _per_round(reference: list[float], ours: list[float]) -> float:
    """Median over rounds of reference time / our time, each pair measured back to back in one round: the ratio
    least moved by a machine whose speed drifts between rounds (warm-up rounds excluded)."""
    return round(statistics.median(r / o for r, o in zip(reference[2:], ours[2:])), 2)


def table(results: list[dict]) -> str:
    """One markdown row per precision (ratios against the reference at the same precision), plus ours at each
    precision against the reference in float32 when both were measured."""
    lines = ["| precision | ours tokens/s | reference tokens/s | ours / reference | per-round median "
             "| GEMM fraction (our FLOPs) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        ref = r.get("reference_tokens_per_s")
        lines.append(f"| {r['precision']} | {r['tokens_per_s']:.0f} | {ref if ref is not None else '-'} | "
                     f"{str(r['speedup_vs_reference']) + 'x' if ref is not None else '-'} | "
                     f"{str(r['speedup_per_round']) + 'x' if ref is not None else '-'} | "
                     f"{r['gemm_fraction_our_count']:.2f} of {r['gemm_gflops']:.0f} GFLOP/s |")
    fp32 = next((r for r in results if r["precision"] == "fp32" and "reference_tokens_per_s" in r), None)
    for r in results:
        if fp32 is not None and r is not fp32:
            lines.append(f"| ours {r['precision']} vs reference fp32 | {r['tokens_per_s']:.0f} | "
                         f"{fp32['reference_tokens_per_s']} | "
                         f"{r['tokens_per_s'] / fp32['reference_tokens_per_s']:.2f}x | "
                         f"{r['speedup_vs_reference_fp32_per_round']}x | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small", help="preset name or JSON file")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--vocab-size", type=int, default=50000)
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after 2 warm-up steps); medians reported")
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32"],
                        help="one measurement per precision (bf16: autocast for ours and for the reference)")
    parser.add_argument("--full-softmax", action="store_true")
    parser.add_argument("--reference", action="store_true", help="also time AllenNLP's biLM (simple-elmo-pytorch)")
    parser.add_argument("--system-malloc", action="store_true",
                        help="leave glibc's default malloc policy (elmo train applies "
                        "elmo.runtime.memory.keep_freed_memory)")
    args = parser.parse_args()
    if not args.system_malloc:
        keep_freed_memory()  # as `elmo train` does; the reference runs in this process too, so it gains alike
    results, shapes, peaks = measure(args.config, args.batch_size, args.vocab_size, args.steps, args.precision,
                                     args.full_softmax, args.reference)
    for result in results:
        print(json.dumps(result), flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{machine_line()}\n")
    print(peak_table(shapes, peaks))
    print(f"\n{args.config}, {args.batch_size} x {results[0]['unroll_steps']} tokens, {results[0]['softmax']} "
          f"softmax over {args.vocab_size} words, {results[0]['threads']} threads, median of {args.steps} steps, "
          f"{'system' if args.system_malloc else 'reusing'} malloc; peak resident memory of the process "
          f"{peak_mb:.0f} MB\n")
    print(table(results))


if __name__ == "__main__":
    main()
