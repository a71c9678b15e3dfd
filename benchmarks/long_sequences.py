"""Peak memory of embedding one long sequence (a protein of 1k, 5k, 20k residues, SeqVec-style: one token per
residue), so that docs/embedding.md can state a bound.

Each run is its own subprocess (peak RSS, ``resource.getrusage(...).ru_maxrss``, is per process): it builds the model
(``small``: the shipped demo biLM; ``original``: the original architecture, 2048 char-CNN filters, 4096 cells, 512
projections, random weights, which cost the same memory as trained ones), embeds one short sentence as a warm-up,
notes the peak RSS so far (the model), then runs the ``elmo embed`` file job (:class:`EmbedFileJob`, all layers,
float32) on a FASTA file holding one random record of N residues and notes the peak again. What the sequence adds is
the difference; the output itself, (L + 1, N, 2P) float32, is part of it (the job holds it while writing).

    PYTHONPATH=src nice .venv/bin/python benchmarks/long_sequences.py --arch small original --lengths 1000 5000 20000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from machine import machine_line

CHILD = r"""
import json, random, resource, sys, tempfile, time
from pathlib import Path

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

arch, residues, precision = sys.argv[1], int(sys.argv[2]), sys.argv[3]
window = {"sequence_window": int(sys.argv[4])} if len(sys.argv) > 4 else {}
import torch
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import EmbedFileJob

if arch == "small":
    from elmo.formats.model_files import load_bilm
    bilm = load_bilm("demo")
else:
    from elmo.config import BiLMConfig
    from elmo.modules.bilm import build_bilm
    from elmo.presets import preset_path
    preset = json.loads(Path(preset_path("original")).read_text())
    options = {key: preset[key] for key in ("bidirectional", "char_cnn", "lstm")}
    bilm = build_bilm(BiLMConfig.from_options(options, source="original preset"))
embedder = Embedder(bilm, EmbedOptions(precision=precision, **window), device="cpu")
embedder.embed_batch([list("MKTAYIAKQR")])  # warm-up: kernels, thread pools, first allocations
model_mb = peak_mb()
rng = random.Random(residues)
with tempfile.TemporaryDirectory() as tmp:
    fasta = Path(tmp) / "protein.fasta"
    fasta.write_text(">p1 random\n" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(residues)) + "\n")
    start = time.perf_counter()
    EmbedFileJob(embedder).run(fasta, Path(tmp) / "out.hdf5")
    seconds = time.perf_counter() - start
output_mb = embedder.num_layers * residues * embedder.output_dim * 4 / 2**20
print(json.dumps({"model_mb": model_mb, "peak_mb": peak_mb(), "output_mb": output_mb, "seconds": seconds,
                  "layers": embedder.num_layers, "dim": embedder.output_dim}))
"""


def run(arch: str, residues: int, precision: str, window: int | None) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, arch, str(residues), precision,
                          *([] if window is None else [str(window)])], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", nargs="+", default=["small", "original"], choices=["small", "original"])
    parser.add_argument("--lengths", nargs="+", type=int, default=[1000, 5000, 20000])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--window", type=int, help="EmbedOptions.sequence_window (default: the embedder's)")
    args = parser.parse_args()
    print(machine_line())
    window = "the default" if args.window is None else f"{args.window:,}"
    print(f"precision {args.precision}; sequence window {window}; one record per run, `elmo embed`'s file job, all "
          "layers written as float32\n")
    print("| architecture | residues | model (MB) | peak RSS (MB) | added by the sequence (MB) | of which the output "
          "(MB) | added per 1k residues (MB) | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for arch in args.arch:
        for residues in args.lengths:
            r = run(arch, residues, args.precision, args.window)
            added = r["peak_mb"] - r["model_mb"]
            print(f"| {arch} ({r['layers']} x {r['dim']}) | {residues:,} | {r['model_mb']:.0f} | {r['peak_mb']:.0f} | "
                  f"{added:.0f} | {r['output_mb']:.0f} | {added / residues * 1000:.1f} | {r['seconds']:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
