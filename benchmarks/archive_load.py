"""Loading a model from a zip archive vs from its directory, at the size of the largest published weights.

Builds the ``original`` architecture (93.6M parameters, a 374 MB weights.hdf5) with random weights in a temporary
directory, packs options.json + model.hdf5 into a stored and a deflated zip, and measures, each in its own
subprocess (fresh page cache state is not controlled; peak RSS is per run), in interleaved rounds:

* ``h5py``: opening the weights and reading every dataset: from the file, from the zip member read into memory
  (what :mod:`elmo.formats.archives` did before it streamed the member to a temporary file, within the archive
  caps of :mod:`elmo.formats.archive_limits`), and from the zip member as a file object (what simple_elmo does;
  one round only with ``--direct``, it takes minutes for the deflated member);
* ``load_bilm``: the whole load (build on the meta device, check, fill each parameter once) from the directory and
  from both zips.

    PYTHONPATH=src nice .venv/bin/python benchmarks/archive_load.py --rounds 3 --direct
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from machine import machine_line

CHILD = r"""
import io, json, resource, sys, time, zipfile
import h5py
what, path = sys.argv[1], sys.argv[2]

def read_all(source):
    with h5py.File(source, "r") as handle:
        names = []
        handle.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        return sum(handle[name][...].nbytes for name in names)

start = time.perf_counter()
if what == "h5py-file":
    read_all(path)
elif what == "h5py-memory":
    with zipfile.ZipFile(path) as zf:
        read_all(io.BytesIO(zf.read("model.hdf5")))
elif what == "h5py-member":
    with zipfile.ZipFile(path) as zf, zf.open("model.hdf5") as member:
        read_all(member)
else:
    from elmo import load_bilm
    load_bilm(path)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(root: Path) -> dict[str, Path]:
    from elmo.config import BiLMConfig
    from elmo.formats.model_files import save_bilm
    from elmo.modules.bilm import build_bilm

    preset = json.loads((Path(__file__).parents[1] / "src/elmo/presets/original.json").read_text())
    options = {key: preset[key] for key in ("bidirectional", "char_cnn", "lstm")}
    directory = save_bilm(build_bilm(BiLMConfig.from_options(options, source="original preset")), root / "model")
    paths = {"dir": directory}
    for name, method in (("stored", zipfile.ZIP_STORED), ("deflated", zipfile.ZIP_DEFLATED)):
        paths[name] = root / f"{name}.zip"
        with zipfile.ZipFile(paths[name], "w", method) as zf:
            zf.write(directory / "options.json", "options.json")
            zf.write(directory / "weights.hdf5", "model.hdf5")
    return paths


def run(what: str, path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, what, str(path)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--direct", action="store_true", help="also h5py on the zip members themselves (slow)")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        paths = build(Path(tmp))
        weights = paths["dir"] / "weights.hdf5"
        sizes = {name: paths[name].stat().st_size for name in ("stored", "deflated")}
        print(f"weights.hdf5 {weights.stat().st_size} bytes; stored zip {sizes['stored']}, deflated zip "
              f"{sizes['deflated']}")
        cases = [("h5py-file", weights), ("h5py-memory", paths["stored"]), ("h5py-memory", paths["deflated"]),
                 ("load_bilm", paths["dir"]), ("load_bilm", paths["stored"]), ("load_bilm", paths["deflated"])]
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for what, path in cases:
                results.setdefault((what, path.name), []).append(run(what, path))
        if args.direct:
            for name in ("stored", "deflated"):
                results[("h5py-member", paths[name].name)] = [run("h5py-member", paths[name])]
    print("| what | from | runs | median s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for (what, source), runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        print(f"| {what} | {source} | {len(runs)} | {seconds:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
