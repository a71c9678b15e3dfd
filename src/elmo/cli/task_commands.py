"""``elmo task train | evaluate | word-vectors``: task models consuming ELMo (:mod:`elmo.tasks`)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from elmo.cli.outputs import DIRECTORY, FILE, Output, add_output, check_output_path
from elmo.cli.setting_flags import (
    add_flag,
    add_parameter_flag,
    add_setting_flags,
    checked,
    settings_from_args,
    show_progress,
)
from elmo.errors import ElmoError
from elmo.presets import TASK_PRESET_DIR, preset_names
from elmo.runtime.extras import require
from elmo.settings import at_least, fraction
from elmo.shared_settings import DEVICE, PROGRESS, SEED
from elmo.tasks.data import load_task_data
from elmo.tasks.kinds import TASK_KINDS
from elmo.tasks.task_config import TaskTrainConfig
from elmo.tasks.word_vectors import train_word_vectors

log = logging.getLogger("elmo")


def cmd_task_train(args: argparse.Namespace) -> int:
    require("seqeval", "tasks", "elmo task train")  # the tasks extra: one line, before any file is read or written
    from elmo.tasks import build_runner, train_task
    from elmo.tasks.task_config import read_task_config

    config = read_task_config(args.config)
    if config.task != args.task:
        raise ElmoError(f"{args.config} is a '{config.task}' config, but the command says '{args.task}'")
    overrides = {f"train.{key}": value for key, value in settings_from_args(TaskTrainConfig, args).items()}
    if args.no_elmo:
        overrides["elmo.enabled"] = False
    if args.on_the_fly:
        overrides["elmo.cached"] = False
    config = config.replace(**{k: v for k, v in overrides.items() if v is not None})
    data = load_task_data(
        args.task, args.train, args.dev, args.test, args.train_fraction, args.limit, seed=config.train.seed
    )
    progress = show_progress(args)
    bilm = args.bilm
    if bilm is None and config.elmo.enabled:  # as `elmo embed` without --model
        log.info("no --bilm given: using the small demo biLM shipped with the package (see --bilm)")
        bilm = "demo"
    runner = build_runner(config, data, args.word_vectors, bilm, args.cache, args.device, progress)
    result = train_task(runner, data, args.output, bilm, progress, force=args.force)
    test = "" if result.test_score is None else f", test {result.test_score:.2f}"
    log.info("best epoch %d: dev %.2f%s; model in %s", result.best_epoch, result.dev_score, test, args.output)
    return 0


def cmd_task_evaluate(args: argparse.Namespace) -> int:
    require("seqeval", "tasks", "elmo task evaluate")
    from elmo.tasks import load_task_model, read_examples
    from elmo.tasks.task_trainer import write_predictions

    output = Path(args.predictions or Path(args.model) / f"predictions.{Path(args.input).name}")
    if not args.predictions:  # the default path: the rule a given one passed in elmo.cli.main, before any work
        check_output_path(output, FILE, args.force)
    cached = False if args.on_the_fly else None  # None: as trained
    runner = load_task_model(args.model, args.bilm, cached, device=args.device, progress=show_progress(args))
    examples = read_examples(runner.config.task, args.input)
    predicted = runner.predict(examples, progress=show_progress(args))
    write_predictions(runner, output, examples, predicted)
    print(json.dumps({"input": str(args.input), runner.kind.metric_name: round(runner.score(examples, predicted), 4),
                      "sentences": len(examples), "predictions": str(output)}))
    return 0


def cmd_task_word_vectors(args: argparse.Namespace) -> int:
    require("gensim", "tasks", "elmo task word-vectors")
    count = train_word_vectors(args.corpus, args.output, dim=args.dim, algorithm=args.algorithm,
                               min_count=args.min_count, epochs=args.epochs, seed=args.seed, workers=args.workers)
    log.info("wrote %d word vectors to %s", count, args.output)
    return 0


def _kinds_help() -> str:
    return "; ".join(f"{kind.name}: {kind.description}" for kind in TASK_KINDS.values())


def add_task_commands(commands) -> None:
    task = commands.add_parser("task", help="train and evaluate task models (NER tagger, sentence classifier)")
    sub = task.add_subparsers(dest="task_command", required=True, metavar="TASK_COMMAND")

    train = sub.add_parser("train", help="train a task model, with or without ELMo")
    train.add_argument("task", choices=tuple(TASK_KINDS), help=f"the task kind: {_kinds_help()}")
    train.add_argument("--config", required=True,
                       help=f"task config: a shipped one ({', '.join(preset_names(TASK_PRESET_DIR))}) or a JSON file")
    train.add_argument("--train", required=True, help="training file")
    train.add_argument("--dev", required=True, help="dev file (selects the best epoch)")
    train.add_argument("--test", help="test file, scored with the dev-selected model")
    add_output(train, "--output", output=Output(DIRECTORY), required=True, help="directory for the checkpoint, "
               "predictions and result.json (an existing non-empty one only with --force, which replaces it as a "
               "whole)")
    train.add_argument("--bilm", help="biLM: a model directory or archive, or a model name such as corpus or demo "
                       "(`elmo models`); default: the shipped demo; task.json records a name as is, a path absolute")
    train.add_argument("--word-vectors", help="word2vec text file (from 'elmo task word-vectors'); default random")
    train.add_argument("--cache", help="HDF5 file caching biLM activations across runs (default: in memory)")
    train.add_argument("--no-elmo", action="store_true", help="the baseline: same model without ELMo")
    train.add_argument("--on-the-fly", action="store_true", help="run the biLM every batch instead of caching")
    add_setting_flags(train, TaskTrainConfig, ["seed", "epochs"], from_preset=True)  # over the config's train.*
    add_parameter_flag(train, "--train-fraction", load_task_data, "random fraction of the training data",
                       fraction(upper_open=False, lower_open=True))
    train.add_argument("--limit", type=checked(int, at_least(1)),
                       help="at most this many sentences per split (smoke tests)")
    add_flag(train, "device", DEVICE)
    add_flag(train, "progress", PROGRESS, bool)
    train.set_defaults(func=cmd_task_train)

    evaluate = sub.add_parser("evaluate", help="predict and score any file with a trained task model")
    evaluate.add_argument("--model", required=True, help="task model directory (from 'elmo task train')")
    evaluate.add_argument("--input", required=True, help=f"a file of the model's task kind: {_kinds_help()}")
    add_output(evaluate, "--predictions", help="output file (default: MODEL/predictions.<input name>)")
    evaluate.add_argument("--bilm", help="biLM (directory, archive or name), if not where it was at training time")
    evaluate.add_argument("--on-the-fly", action="store_true", help="run the biLM inside the model")
    add_flag(evaluate, "device", DEVICE)
    add_flag(evaluate, "progress", PROGRESS, bool)
    evaluate.set_defaults(func=cmd_task_evaluate)

    vectors = sub.add_parser("word-vectors", help="train baseline word vectors (gensim) on the biLM's corpus")
    vectors.add_argument("--corpus", required=True, help="text file, one tokenised sentence per line (.gz ok)")
    add_output(vectors, "--output", required=True, help="word2vec text file to write")
    add_parameter_flag(vectors, "--dim", train_word_vectors, "vector size", at_least(1))
    add_parameter_flag(vectors, "--algorithm", train_word_vectors, "skip-gram model", choices=("word2vec", "fasttext"))
    add_parameter_flag(vectors, "--min-count", train_word_vectors, "ignore rarer words", at_least(1))
    add_parameter_flag(vectors, "--epochs", train_word_vectors, "passes over the corpus", at_least(1))
    add_flag(vectors, "seed", SEED)
    add_parameter_flag(vectors, "--workers", train_word_vectors, "threads", at_least(1))
    vectors.set_defaults(func=cmd_task_word_vectors)
