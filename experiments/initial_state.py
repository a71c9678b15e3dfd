"""Issue 31, item 4: how the biLM's initial LSTM state at inference changes what it gives, per mode (zero, carry,
warm: elmo.modules.initial_state), on one biLM: held-out perplexity, POS probe accuracy per layer, NER test F1.

    python experiments/initial_state.py --bilm BILM_DIR --corpus LM_TRAIN.txt [--seeds 3] [--no-ner] [--quick]

Run it once per biLM, each with its own --out (the corpus biLM; the pair of experiments/state_reset_pair.sh, trained
with and without state resets); the table is ``<out>/initial_state.md`` (and .json). Per mode, in this order:

* perplexity: ``elmo perplexity --initial-state MODE`` on each --valid file (carry: the file as one stream, the
  bilm-tf protocol; zero and warm: each sentence on its own from its start state); needs the export's
  softmax.hdf5 (without it the column says so);
* POS: ``elmo probe pos`` (a linear probe per layer and on the learned mix) trained on --pos-train, tested on
  --pos-test, with the vectors of that mode (carry: sentences embedded in file order, batches of 64);
* NER (skipped with --no-ner): the Table 1 +ELMo tagger (cached activations made in that mode,
  ``elmo.initial_state``), N seeds; the zero runs are Table 1's +ELMo runs (with the same --out). Each other
  mode is compared with zero (Welch t-test, bootstrap CI, and the paired t-test of the seed-matched runs).

Resumable: every measurement is written to ``<out>/initial-state/`` as it finishes (NER: one run per seed, as in
every table) and reused by the next invocation.
"""

from __future__ import annotations

import argparse
import json
from itertools import islice
from pathlib import Path

from _common import (
    COMPARISON_HEADERS,
    QUICK_LIMIT,
    REPO,
    comparison_cells,
    markdown_table,
    mean_std,
    parse_args,
    seed_scores,
    shown_path,
    with_shown_paths,
    write_table,
)
from _significance import p_cell, seed_paired_p

from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm
from elmo.formats.softmax_hdf5 import SOFTMAX_FILE
from elmo.probing.pos import probe_pos
from elmo.runtime.atomic_files import write_json_atomic, write_text_atomic
from elmo.shared_settings import INITIAL_STATES
from elmo.tasks.elmo_features import bilm_fingerprint
from elmo.training.perplexity import model_perplexity

NER_VARIANT = {"zero": "elmo", "carry": "elmo-carry", "warm": "elmo-warm"}
DATA = REPO.parent / "shared" / "data"


def more_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--modes", nargs="+", choices=INITIAL_STATES, default=list(INITIAL_STATES),
                        help="initial states to measure (default all three)")
    parser.add_argument("--valid", nargs="+", default=[str(DATA / "lm" / "bbcnews" / "bbcnews.valid.txt")],
                        help="held-out text files for perplexity (default: BBC News validation)")
    ewt = DATA / "tasks" / "ud_english_ewt"
    parser.add_argument("--pos-train", default=str(ewt / "en_ewt-ud-train.conllu"), help="POS probe training file")
    parser.add_argument("--pos-test", default=str(ewt / "en_ewt-ud-test.conllu"), help="POS probe test file")
    parser.add_argument("--pos-train-sentences", type=int, help="first N training sentences only (default all)")
    parser.add_argument("--no-ner", action="store_true",
                        help="perplexity and POS only (minutes); the NER column (--seeds runs per mode, ~17 "
                        "minutes each on a CPU core) says 'not run'")


def measured(args: argparse.Namespace, name: str, measure) -> dict:
    """``measure()`` once: its JSON is kept in ``<out>/initial-state/<name>.json`` and reused."""
    path = args.out / "initial-state" / f"{name}.json"
    fingerprint = bilm_fingerprint(args.bilm)
    if path.is_file():
        result = json.loads(path.read_text())
        if result["bilm_fingerprint"] != fingerprint or result["quick"] != args.quick:
            raise SystemExit(f"{path} was made with another biLM or mode; delete it or use another --out")
        return result
    result = {"bilm": shown_path(args.bilm), "bilm_fingerprint": fingerprint, "quick": args.quick,
              **with_shown_paths(measure())}
    write_json_atomic(path, result)
    return result


def perplexity(args: argparse.Namespace, mode: str, valid: Path) -> dict:
    def measure() -> dict:
        if not (Path(args.bilm) / SOFTMAX_FILE).is_file():
            return {"perplexity": None, "why": f"no {SOFTMAX_FILE} (a published model or a converted one)"}
        data = valid
        if args.quick:  # its first lines only
            data = args.out / "initial-state" / f"quick-{valid.name}"
            with open(valid, encoding="utf-8") as f:
                write_text_atomic(data, "".join(islice(f, QUICK_LIMIT)))
        return {"perplexity": model_perplexity(args.bilm, data, initial_state=mode, device=args.device).to_dict()}

    return measured(args, f"{mode}-perplexity-{valid.name}", measure)


def pos(args: argparse.Namespace, mode: str) -> dict:
    def measure() -> dict:
        embedder = Embedder(load_bilm(args.bilm), device=args.device, initial_state=mode)
        limit = QUICK_LIMIT if args.quick else args.pos_train_sentences
        return probe_pos(embedder, args.pos_train, args.pos_test, max_train_sentences=limit)

    return measured(args, f"{mode}-pos", measure)


def main() -> None:
    args = parse_args(__doc__, more_args=more_args)
    valid = [Path(v) for v in args.valid]
    perplexities = {(mode, v): perplexity(args, mode, v)["perplexity"] for mode in args.modes for v in valid}
    accuracies = {mode: pos(args, mode)["accuracy"] for mode in args.modes}  # the minutes-long columns first
    ner = {} if args.no_ner else {mode: seed_scores(args, "ner", NER_VARIANT[mode]) for mode in args.modes}
    rows, results = [], {"perplexity": {}, "pos": accuracies, "ner": ner, "versus_zero": {}}
    for mode in args.modes:
        cells = []
        for v in valid:
            ppl = perplexities[mode, v]
            results["perplexity"][f"{mode}/{v.name}"] = ppl
            cells.append("–" if ppl is None else f"{ppl['geometric_mean']:.1f} ({ppl['forward']:.1f} / "
                         f"{ppl['backward']:.1f})")
        accuracy = accuracies[mode]
        cells.append(" / ".join(f"{100 * accuracy[k]:.2f}" for k in sorted(accuracy, key=lambda k: (k == "mix", k))))
        cells.append(mean_std(ner[mode]) if ner else "not run (--no-ner)")
        against_zero = ["", "", "", "", ""]
        if mode != "zero" and "zero" in ner:
            compared, comparison = comparison_cells(ner[mode], ner["zero"])
            comparison["paired_p_value"] = seed_paired_p(ner[mode], ner["zero"])  # the runs share seeds
            compared[-1] = {"reproduced": "higher", "opposite": "lower"}.get(compared[-1], "no difference")
            against_zero = [*compared[:2], p_cell(comparison["paired_p_value"]), *compared[2:]]
            results["versus_zero"][f"ner/{mode}"] = comparison
        rows.append([mode, *cells, *against_zero])
    layers = " / ".join(f"{k}" for k in sorted(results["pos"][args.modes[0]], key=lambda k: (k == "mix", k)))
    headers = ["initial state", *[f"perplexity {v.name}: geo (fwd / bwd)" for v in valid],
               f"POS accuracy, layer {layers}", "NER test F1", *[f"{h} vs zero" for h in COMPARISON_HEADERS[:2]],
               "paired t p vs zero (same seeds)", f"{COMPARISON_HEADERS[2]} vs zero", "NER vs zero (Welch p < 0.05)"]
    note = ("\nCells: perplexity of the full softmax (geometric mean of the directions); POS: linear-probe accuracy "
            "(%) per layer and on the learned mix; NER: mean ± std over seeds; against zero: Welch t-test and "
            "percentile-bootstrap 95% CI of the F1 difference (experiments/_significance.py), and the paired t-test "
            "of the per-seed differences (run i of each mode has seed i: the same tagger initialisation, data order "
            "and dropout; only the ELMo features differ).\n")
    seeds = "NER not run" if args.no_ner else f"{args.seeds} NER seeds"
    write_table(args, "initial_state", f"Initial LSTM state at inference ({seeds})",
                markdown_table(headers, rows) + note, results)


if __name__ == "__main__":
    main()
