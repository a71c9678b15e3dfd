"""Tables 5 and 6 and the example of Table 4 at our scale: what each layer of one biLM knows.

    python experiments/probes.py [--model corpus] [--out runs/probes-corpus] [--quick]

* POS (Table 6): ``elmo probe pos``, a linear probe per layer and on the learned mix, UD English EWT train -> test,
  with its XPOS column (the Penn Treebank tags the paper's PTB data has) and its UPOS column.
* WSD (Table 5): ``elmo probe wsd`` on the Senseval lexical sample, nearest sense centroid (the paper's method) and
  linear probe, per layer, on the fixed every-5th-instance split.
* Neighbours (Table 4): ``elmo neighbours --word play`` on EWT's training sentences, top layer and token layer.

Each claim of the paper about the layers' order is tested on the same test items (``_significance.compare_paired``:
McNemar's exact test, a bootstrap CI of the accuracy difference that resamples whole POS sentences / WSD
instances, and a verdict): POS layer 1 > layer 2 (97.3 vs 96.8 in the paper), per tagset; WSD layer 2 > layer 1
(69.0 vs 67.4, all-words), by centroid and by linear probe. The probes are deterministic (L-BFGS from zero
weights, no seeds), so the test items, not seeds, carry the statistics.

Writes ``<out>/probes.md``, ``probes.json`` and ``probes.png``; each measurement is kept in ``<out>/probes/``
(its JSON, and the per-item correctness as .npz) and reused by the next invocation, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import REPO, markdown_table, with_shown_paths
from _significance import PAIRED_HEADERS, compare_paired

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from elmo.probing.neighbours import format_neighbours, read_corpus, word_neighbours
from elmo.probing.pos import probe_pos
from elmo.probing.wsd import probe_wsd
from elmo.runtime.atomic_files import write_atomic, write_json_atomic, write_text_atomic

log = logging.getLogger("experiments")

DATA = REPO.parent / "shared" / "data" / "tasks"
EWT = DATA / "ud_english_ewt"
QUICK_SENTENCES = 200
"""--quick: the first sentences of each POS file, and the neighbours' corpus."""

PAPER = {"pos": {"1": 97.3, "2": 96.8}, "wsd": {"1": 67.4, "2": 69.0}}
"""The paper's biLM layers (Tables 5 and 6: PTB POS, all-words WSD F1), beside ours."""
CLAIMS = [("pos", "linear", "1", "2"), ("wsd", "centroid", "2", "1"), ("wsd", "linear", "2", "1")]
"""(probe, method, a, b): the paper has layer a > layer b (the POS claim once per tagset)."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="corpus", help="biLM: a model name or directory (default: corpus)")
    parser.add_argument("--out", type=Path, help="results directory (default runs/probes-<model name>)")
    parser.add_argument("--pos-train", default=str(EWT / "en_ewt-ud-train.conllu"), help="POS training file")
    parser.add_argument("--pos-test", default=str(EWT / "en_ewt-ud-test.conllu"), help="POS test file")
    parser.add_argument("--tagsets", nargs="+", choices=("xpos", "upos"), default=["xpos", "upos"],
                        help="POS tag columns to probe (default both)")
    parser.add_argument("--pos-train-sentences", type=int, help="first N training sentences only (default all)")
    parser.add_argument("--senseval", default=str(DATA / "senseval"), help="Senseval file or directory")
    parser.add_argument("--word", default="play", help="the neighbours' word (default play)")
    parser.add_argument("--neighbours-corpus", default=str(EWT / "en_ewt-ud-train.conllu"),
                        help="CoNLL-U or text (one tokenised sentence per line) for the neighbours")
    parser.add_argument("--neighbours-sentences", type=int, default=4000, help="its first N sentences (4000)")
    parser.add_argument("--device", help="torch device (default: cuda if available)")
    parser.add_argument("--quick", action="store_true", help="smoke run on the first lines of each file")
    args = parser.parse_args()
    args.out = args.out or REPO / "runs" / f"probes-{Path(args.model).name}{'-quick' if args.quick else ''}"
    return args


def measured(args: argparse.Namespace, name: str, measure) -> tuple[dict, dict[str, np.ndarray]]:
    """``measure()`` -> (JSON-ready result, per-item arrays), once: kept in ``<out>/probes/<name>.json|.npz``."""
    path = args.out / "probes" / name
    if path.with_suffix(".json").is_file():
        result = json.loads(path.with_suffix(".json").read_text())
        if result["model"] != args.model or result["quick"] != args.quick:
            raise SystemExit(f"{path}.json was made with another model or mode; delete it or use another --out")
        with np.load(path.with_suffix(".npz")) as items:
            return result, dict(items)
    result, items = measure()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **items)

    write_atomic(path.with_suffix(".npz"), write)  # first: the JSON marks the measurement as done
    result = {"model": args.model, "quick": args.quick, **with_shown_paths(result)}
    write_json_atomic(path.with_suffix(".json"), result)
    return result, items


def pos(args: argparse.Namespace, embedder: Embedder, tagset: str) -> tuple[dict, dict[str, np.ndarray]]:
    def measure():
        train, test = Path(args.pos_train), Path(args.pos_test)
        limit = args.pos_train_sentences
        if args.quick:
            train, test, limit = quick_copy(args, train), quick_copy(args, test), None
        result = probe_pos(embedder, train, test, tagset, limit, per_word=True)
        items = {f"linear/{k}": v for k, v in result.pop("correct").items()} | {"cluster": result.pop("sentence")}
        return result, items

    return measured(args, f"pos-{tagset}", measure)


def wsd(args: argparse.Namespace, embedder: Embedder) -> tuple[dict, dict[str, np.ndarray]]:
    def measure():
        result = probe_wsd(embedder, args.senseval, per_instance=True)
        correct = result.pop("correct")
        items = {f"{method}/{k}": v for method, layers in correct.items() for k, v in layers.items()}
        return result, items | {"cluster": np.arange(result["test_instances"])}

    return measured(args, "wsd", measure)


def quick_copy(args: argparse.Namespace, conllu: Path) -> Path:
    """The first QUICK_SENTENCES sentences of a CoNLL-U file, as a file in <out>."""
    blocks = conllu.read_text(encoding="utf-8").split("\n\n")[:QUICK_SENTENCES]
    path = args.out / "probes" / f"quick-{conllu.name}"
    write_text_atomic(path, "\n\n".join(blocks).strip("\n") + "\n\n")
    return path


def neighbours(args: argparse.Namespace, embedder: Embedder) -> str:
    path = args.out / "probes" / f"neighbours-{args.word}.txt"
    if not path.is_file():
        fmt = "conllu" if args.neighbours_corpus.endswith((".conllu", ".conllu.gz")) else "text"
        limit = QUICK_SENTENCES if args.quick else args.neighbours_sentences
        sentences = read_corpus(args.neighbours_corpus, fmt, limit)
        write_text_atomic(path, format_neighbours(word_neighbours(embedder, sentences, args.word, k=3)))
    return path.read_text(encoding="utf-8")


def layer_cells(accuracy: dict[str, float], names: list[str]) -> list[str]:
    best = max(accuracy[n] for n in names if n in accuracy)
    return [("–" if n not in accuracy else f"**{100 * accuracy[n]:.1f}**" if accuracy[n] == best
             else f"{100 * accuracy[n]:.1f}") for n in names]


def plot(path: Path, pos_results: list[dict], wsd_result: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    names = list(pos_results[0]["accuracy"])
    width = 0.8 / len(pos_results)
    for i, result in enumerate(pos_results):
        offset = (i - (len(pos_results) - 1) / 2) * width
        axes[0].bar([j + offset for j in range(len(names))], [100 * result["accuracy"][n] for n in names], width,
                    label=result["tagset"].upper())
    axes[0].set_xticks(range(len(names)), names)
    axes[0].set_title("POS, linear probe")
    axes[0].set_ylim(min(100 * r["accuracy"]["0"] for r in pos_results) - 5, 100)
    width = 0.4
    for offset, method in ((-width / 2, "centroid"), (width / 2, "linear")):
        values = wsd_result["overall"][method]
        axes[1].bar([i + offset for i in range(len(names))], [100 * values.get(n, np.nan) for n in names], width,
                    label=method)
    axes[1].set_xticks(range(len(names)), names)
    axes[1].axhline(100 * wsd_result["overall"]["baseline_most_frequent_sense"], color="gray", ls="--",
                    label="most frequent sense")
    axes[1].set_title("word sense (Senseval lexical sample)")
    axes[1].set_ylim(0, 112)  # room for the legend above the bars
    axes[0].legend(fontsize=7, loc="upper left")  # above the token layer's lower bars
    axes[1].legend(fontsize=7, loc="upper center", ncol=3)
    for ax in axes:
        ax.set_xlabel("layer")
        ax.set_ylabel("test accuracy (%)")
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    embedder = Embedder(load_bilm(args.model), device=args.device)
    pos_runs = {tagset: pos(args, embedder, tagset) for tagset in args.tagsets}
    wsd_result, wsd_items = wsd(args, embedder)
    shown = neighbours(args, embedder)
    names = list(next(iter(pos_runs.values()))[0]["accuracy"])  # "0", "1", "2", "mix"
    headers = ["", *[f"layer {n}" if n != "mix" else "mix" for n in names], "baseline"]
    rows = [["paper, POS (PTB, Table 6)", *[PAPER["pos"].get(n, "") for n in names], ""]]
    for tagset, (result, _) in pos_runs.items():
        rows.append([f"POS {tagset.upper()} ({result['train_words']:,} training / {result['test_words']:,} test "
                     f"words)", *layer_cells(result["accuracy"], names),
                     f"{100 * result['baseline_most_frequent_tag']:.1f} (most frequent tag)"])
    rows.append(["paper, WSD (all-words F1, Table 5)", *[PAPER["wsd"].get(n, "") for n in names],
                 "65.9 (WordNet 1st sense)"])
    for method in ("centroid", "linear"):
        rows.append([f"WSD {method} ({wsd_result['test_instances']:,} test instances)",
                     *layer_cells(wsd_result["overall"][method], names),
                     f"{100 * wsd_result['overall']['baseline_most_frequent_sense']:.1f} (most frequent sense)"])
    claim_rows, comparisons = [], {}
    for probe, method, a, b in CLAIMS:
        for name, items in ({f"POS {t.upper()}": run[1] for t, run in pos_runs.items()} if probe == "pos"
                            else {"WSD": wsd_items}).items():
            comparison = compare_paired(items[f"{method}/{a}"], items[f"{method}/{b}"], items["cluster"])
            comparisons[f"{name.lower().replace(' ', '-')}/{method}/{a}-vs-{b}"] = comparison.__dict__
            claim_rows.append([f"{name} {method}: layer {a} > layer {b}", *comparison.cells()])
    title = f"What each layer knows: `{args.model}`" + (" (QUICK SMOKE RUN: not a result)" if args.quick else "")
    text = (f"### {title}\n\nTest accuracy (%) per layer (0: token layer; mix: the learned scalar mix); the best "
            f"layer of each row in bold.\n\n{markdown_table(headers, rows)}\nThe paper's claims about the layers' "
            f"order, tested on the same test items:\n\n"
            f"{markdown_table(['the paper has', *PAIRED_HEADERS], claim_rows)}\nΔ: accuracy(a) - accuracy(b); McNemar: "
            f"exact, two-sided; CI: percentile bootstrap resampling POS test sentences / WSD instances; claim: "
            f"\"reproduced\" where p < 0.05 and the CI excludes 0 in the paper's direction "
            f"(experiments/_significance.py).\n\nContextual neighbours of \"{args.word}\" (Table 4):\n\n```text\n"
            f"{shown.rstrip()}\n```\n")
    write_text_atomic(args.out / "probes.md", text)
    write_json_atomic(args.out / "probes.json", {"model": args.model, "quick": args.quick,
                                                 "pos": {t: run[0] for t, run in pos_runs.items()},
                                                 "wsd": wsd_result, "claims": comparisons})
    plot(args.out / "probes.png", [run[0] for run in pos_runs.values()], wsd_result)
    print(text)


if __name__ == "__main__":
    main()
