"""Shared machinery of the experiment scripts: arguments, resumable runs, tables and plots.

Every run (task x variant x seed x training fraction) writes ``<out>/runs/<task>/<name>/summary.json`` when it
finishes; a later invocation reuses it, so an interrupted experiment resumes where it stopped, and runs shared by
several tables (e.g. the +ELMo seeds) are trained once. The frozen biLM's activations are computed once per
sentence into ``<out>/cache/<biLM fingerprint>-<task>.h5`` and shared by all runs of the task.

With ``--finetune-epochs N`` the +ELMo runs of a task use a copy of the biLM whose language model was first trained
N more epochs on the task's training sentences, labels unused (the paper's section 3.4), made once per task into
``<out>/bilm-finetuned/``, with its held-out perplexity on the dev sentences before and after.

Every table gives mean ± std per cell and, for each compared pair of settings, a Welch t-test, a bootstrap
confidence interval and a verdict on the paper's claim (``_significance.py``); beside ``<name>.md`` it writes
``<name>.json`` with the per-seed scores.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import shutil
import sys
from dataclasses import asdict
from itertools import islice
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # run from a checkout without installing

from _significance import COMPARISON_HEADERS, compare, mean_std  # noqa: E402, F401 (mean_std: for the scripts)

from elmo.errors import ElmoError, InputFileError  # noqa: E402
from elmo.formats.model_ref import ModelRef  # noqa: E402
from elmo.runtime.atomic_files import write_json_atomic, write_text_atomic  # noqa: E402
from elmo.tasks import build_runner, load_task_data, train_task, train_word_vectors  # noqa: E402
from elmo.tasks.elmo_features import bilm_fingerprint  # noqa: E402
from elmo.tasks.task_config import read_task_config  # noqa: E402
from elmo.training.finetune import finetune  # noqa: E402
from elmo.training.presets import training_only  # noqa: E402
from elmo.training.run_files import VOCAB_FILE, export_run  # noqa: E402
from elmo.training.trainer import TrainSpec  # noqa: E402
from elmo.training.vocab_counts import count_words, vocabulary_from_counts  # noqa: E402

log = logging.getLogger("experiments")

FILES = {
    "ner": ("conll2003/train.txt", "conll2003/dev.txt", "conll2003/test.txt"),
    "sst": ("sst/sst5.train.tsv", "sst/sst5.dev.tsv", "sst/sst5.test.tsv"),
}
METRIC = {"ner": "F1", "sst": "accuracy"}
VARIANTS = {
    "baseline": {"elmo.enabled": False},
    "elmo": {},  # the configs' default: all layers, lambda = 0.001, input only
    "elmo-lambda1": {"elmo.l2_coef": 1.0},
    "elmo-top": {"elmo.layers": "top"},
    "elmo-in-out": {"elmo.at_output": True},
    "elmo-carry": {"elmo.initial_state": "carry"},  # experiments/initial_state.py: the biLM's initial state
    "elmo-warm": {"elmo.initial_state": "warm"},
}
QUICK_MODEL = {"model.hidden_dim": 16, "model.classifier_hidden_dim": 16, "model.word_dim": 16}
QUICK_LIMIT = 60  # sentences per split
QUICK_CORPUS_LINES = 3000


DEFAULT_BILM = "corpus"
"""The corpus biLM shipped in the package (src/elmo/pretrained/corpus, made by experiments/corpus.sh; its card is
the README.md there)."""
HEADLINE_SEEDS = 5
"""Seeds per setting of the headline comparisons (Table 1, Figure 1); the ablations (Tables 2, 3) default to 3."""


def parse_args(description: str, default_seeds: int = 3, more_args=None) -> argparse.Namespace:
    """The scripts' common flags; ``more_args(parser)`` adds a script's own."""
    parser = argparse.ArgumentParser(description=description)
    if more_args is not None:
        more_args(parser)
    parser.add_argument(
        "--bilm", default=DEFAULT_BILM,
        help="pretrained biLM: a model directory or a model name (default: corpus, the biLM shipped in the package)",
    )
    parser.add_argument("--corpus", required=True, help="the biLM's training text, for the baseline word vectors")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "tasks"), help="task data root")
    parser.add_argument("--out", help="results directory (default runs/experiments, or runs/experiments-quick)")
    parser.add_argument(
        "--tasks", nargs="+", choices=tuple(FILES), default=list(FILES),
        help="tasks to run (default both); two processes with one task each use both cores, then a run without "
        "--tasks reuses their runs and writes the whole table",
    )
    parser.add_argument("--seeds", type=int, default=default_seeds, help=f"seeds per setting (default {default_seeds})")
    parser.add_argument("--device", help="torch device (default: cuda if available)")
    parser.add_argument(
        "--sst-classifier", choices=("maxpool", "bcn"), default="maxpool", help="SST-5 model (bcn: the paper's)"
    )
    parser.add_argument("--epochs", type=int, help="override train.epochs of the task configs (e.g. on a CPU)")
    parser.add_argument(
        "--finetune-epochs", type=int, default=0,
        help="first fine-tune the biLM's LM this many epochs on each task's training sentences, labels unused "
        "(paper section 3.4; default 0: use --bilm as it is)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke test: {QUICK_LIMIT} sentences per split, 1 epoch, tiny model"
    )
    args = parser.parse_args()
    if args.finetune_epochs < 0:
        parser.error(f"--finetune-epochs must be >= 0, got {args.finetune_epochs}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    args.out = Path(args.out or REPO / "runs" / ("experiments-quick" if args.quick else "experiments"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    sys.excepthook = _one_line_errors
    args.bilm = str(bilm_path(args.bilm))
    return args


def bilm_path(bilm: str) -> Path:
    """``--bilm`` as a model folder or archive: any spelling ``--model`` takes (a published name is fetched once)."""
    return ModelRef.parse(bilm).path()


def _one_line_errors(kind, error, traceback) -> None:
    """Bad input (a missing file, a malformed line) ends the script with its one-line message, like ``elmo``."""
    if isinstance(error, ElmoError):
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    sys.__excepthook__(kind, error, traceback)


def word_vectors(args: argparse.Namespace) -> Path:
    """Baseline vectors trained once on ``--corpus`` (its first lines only with ``--quick``)."""
    path = args.out / "word_vectors.txt"
    if path.is_file():
        return path
    corpus, dim, epochs = Path(args.corpus), 100, 3
    if not corpus.is_file():
        raise InputFileError(f"{corpus}: no such corpus file")
    if args.quick:
        with (gzip.open if corpus.suffix == ".gz" else open)(corpus, "rt", encoding="utf-8") as f:
            write_text_atomic(args.out / "corpus.quick.txt", "".join(islice(f, QUICK_CORPUS_LINES)))
        corpus, dim, epochs = args.out / "corpus.quick.txt", 16, 1
    train_word_vectors(corpus, path, dim=dim, epochs=epochs)
    return path


def run(args: argparse.Namespace, task: str, variant: str, seed: int, fraction: float = 1.0) -> dict:
    """Train (or reuse) one run; returns its summary with ``dev``, ``test`` and ``layer_weights``."""
    name = f"{variant}-seed{seed}" + ("" if fraction == 1.0 else f"-frac{fraction:g}")
    run_dir = args.out / "runs" / task / name
    summary_path = run_dir / "summary.json"
    overrides = {**VARIANTS[variant], "train.seed": seed}
    if args.quick:
        overrides.update({**QUICK_MODEL, "train.epochs": 1})
    if args.epochs is not None:
        overrides["train.epochs"] = args.epochs
    if task == "sst":
        overrides["model.classifier"] = args.sst_classifier
    config = read_task_config(task).replace(**overrides)
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        finetuned = args.finetune_epochs if config.elmo.enabled else 0
        if (summary["config"] != asdict(config) or summary["quick"] != args.quick
                or summary.get("finetune_epochs", 0) != finetuned):
            raise SystemExit(f"{summary_path} was made with other settings; delete it or use another --out")
        return summary
    train, dev, test = (Path(args.data_dir) / f for f in FILES[task])
    limit = QUICK_LIMIT if args.quick else None
    data = load_task_data(task, train, dev, test, train_fraction=fraction, limit=limit, seed=seed)
    log.info("run %s/%s: %d train sentences", task, name, len(data.train))
    cache, bilm = None, None  # one cache per task (one writer per file); the baseline needs no biLM
    if config.elmo.enabled:
        bilm = task_bilm(args, task)
        started = "" if config.elmo.initial_state == "zero" else f"-{config.elmo.initial_state}"  # one cache each
        cache = args.out / "cache" / f"{bilm_fingerprint(bilm)}-{task}{started}.h5"
    runner = build_runner(config, data, word_vectors(args), bilm, cache, args.device)
    try:
        result = train_task(runner, data, run_dir, bilm, force=True)  # no summary.json: an unfinished run
    finally:
        if runner.cache is not None:
            runner.cache.close()
    summary = {"task": task, "variant": variant, "seed": seed, "fraction": fraction, "n_train": len(data.train),
               "dev": result.dev_score, "test": result.test_score, "best_epoch": result.best_epoch,
               "layer_weights": result.layer_weights, "quick": args.quick, "config": asdict(config),
               "finetune_epochs": args.finetune_epochs if config.elmo.enabled else 0}
    write_json_atomic(summary_path, summary)
    return summary


def task_bilm(args: argparse.Namespace, task: str) -> Path:
    """The biLM of ``task``'s +ELMo runs: ``--bilm``, or its copy fine-tuned on the task's text (made once)."""
    if not args.finetune_epochs:
        return Path(args.bilm)
    root = args.out / "bilm-finetuned" / f"{task}-{bilm_fingerprint(args.bilm)}-epochs{args.finetune_epochs}"
    done = root / "perplexity.json"  # written last: the fine-tuned export is complete
    if done.is_file():
        return root / "export"
    if root.exists():
        shutil.rmtree(root)  # an interrupted fine-tuning starts again (minutes)
    train, dev, _ = (Path(args.data_dir) / f for f in FILES[task])
    data = load_task_data(task, train, dev, limit=QUICK_LIMIT if args.quick else None)
    for split, examples in (("train", data.train), ("dev", data.dev)):
        write_text_atomic(root / f"{split}.txt", "".join(" ".join(e.words) + "\n" for e in examples))
    vocab = Path(args.bilm) / VOCAB_FILE  # an export's vocabulary keeps its trained softmax
    if not vocab.is_file():  # e.g. a published model: a new softmax over the task's words
        vocab = root / VOCAB_FILE
        vocabulary_from_counts(count_words([root / "train.txt"])).save(vocab)
    options = {"n_epochs": args.finetune_epochs, "state_reset_prob": 0.05, "eval_every": 0, "log_every": 20,
               "checkpoint_every": 10_000}
    if args.quick:  # a few tiny sentences: small batches, the full softmax over their handful of words
        options.update(batch_size=2, unroll_steps=5, sample_softmax=False)
    spec = TrainSpec(config=None, train=training_only(options), vocab_path=vocab,
                     train_patterns=[str(root / "train.txt")], run_dir=root / "run", valid_path=root / "dev.txt",
                     device=args.device, progress=False)
    log.info("fine-tuning %s on the %s training sentences for %d epochs", args.bilm, task, args.finetune_epochs)
    result = finetune(spec, args.bilm)
    export_run(root / "run", root / "export")
    write_json_atomic(done, {"task": task, "bilm": str(args.bilm), "epochs": args.finetune_epochs,
                             "dev_perplexity_before": result["before"], "dev_perplexity_after": result["after"]})
    return root / "export"


def seed_scores(args: argparse.Namespace, task: str, variant: str, split: str = "test",
                fraction: float = 1.0) -> list[float]:
    """``split`` scores of seeds 0 .. ``--seeds`` - 1 of one setting; each run is trained, or reused if done."""
    return [run(args, task, variant, seed, fraction)[split] for seed in range(args.seeds)]


def comparison_cells(a: list[float], b: list[float], paper_sign: int = 1) -> tuple[list[str], dict]:
    """The cells of :data:`COMPARISON_HEADERS` for ``a`` against ``b`` and the same as JSON."""
    result = compare(a, b, paper_sign)
    return result.cells(), {"a": a, "b": b, "paper_sign": paper_sign, **asdict(result)}


def shown_path(path: str | Path) -> str:
    """``path`` as the tables show it: relative to the checkout when inside it (the shipped models), as
    ``../shared/...`` when in the data beside it, else as given: committed results name no machine's directories."""
    resolved = Path(path).resolve()
    for root, prefix in ((REPO, ""), (REPO.parent / "shared", "../shared/")):
        try:
            return prefix + str(resolved.relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def with_shown_paths(result: dict) -> dict:
    """``result`` with its input files (a probe's ``train``, ``test``, ``data``) as :func:`shown_path` shows them."""
    return {k: shown_path(v) if k in ("train", "test", "data") and isinstance(v, str) else v for k, v in result.items()}


def markdown_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_table(args: argparse.Namespace, name: str, title: str, table: str, results: dict | None = None) -> Path:
    """``<out>/<name>.md`` (printed too) and, with ``results``, ``<out>/<name>.json``: the per-seed scores behind
    the table and each comparison's statistics."""
    note = " (QUICK SMOKE RUN: tiny data slice, 1 epoch; not a result)" if args.quick else ""
    path = args.out / f"{name}.md"
    if results is not None:
        write_json_atomic(args.out / f"{name}.json", {"title": title, "bilm": shown_path(args.bilm),
                                                      "seeds": args.seeds, "quick": args.quick, **results})
    bilm = f"biLM: `{shown_path(args.bilm)}`"
    if args.finetune_epochs:
        bilm += f", fine-tuned {args.finetune_epochs} epochs on each task's training sentences"
        pattern = f"bilm-finetuned/*-{bilm_fingerprint(args.bilm)}-epochs{args.finetune_epochs}/perplexity.json"
        for report in sorted(args.out.glob(pattern)):
            r = json.loads(report.read_text())
            before, after = r["dev_perplexity_before"]["geometric_mean"], r["dev_perplexity_after"]["geometric_mean"]
            bilm += f"; {r['task']} dev perplexity {before:.1f} -> {after:.1f}"
    statistics = "" if "comparisons" not in (results or {}) else (
        "\nCells: mean ± std over seeds. Δ: difference of the means; Welch p: two-sided Welch t-test; 95% CI: "
        "percentile bootstrap of Δ (seeded); claim: \"reproduced\" only where p < 0.05 in the paper's direction "
        "(experiments/_significance.py).\n")
    write_text_atomic(path, f"### {title}{note}\n\n{bilm}\n\n{table}{statistics}")
    print(path.read_text())
    return path
