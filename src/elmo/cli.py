"""Command line: a thin layer over the Python API (``elmo --help``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from elmo.errors import ElmoError

log = logging.getLogger("elmo")


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model (a directory, or the original options/weights pair)")
    group.add_argument("--model", help="model directory: options.json + weights.hdf5, or config.json + model.safetensors")
    group.add_argument("--options-file", help="original options.json")
    group.add_argument("--weight-file", help="original weights.hdf5")


def _load_model(args: argparse.Namespace):
    from elmo.model_files import load_bilm

    if args.model and (args.options_file or args.weight_file):
        raise ElmoError("give either --model or --options-file/--weight-file, not both")
    if args.model:
        return load_bilm(args.model)
    if args.options_file or args.weight_file:
        if not (args.options_file and args.weight_file):
            raise ElmoError("--options-file and --weight-file go together")
        return load_bilm(options_file=args.options_file, weight_file=args.weight_file)
    raise ElmoError("no model given: use --model DIR or --options-file F --weight-file W")


def cmd_embed(args: argparse.Namespace) -> int:
    from elmo.embed import Embedder

    if args.batch_size < 1:
        raise ElmoError(f"--batch-size must be >= 1, got {args.batch_size}")
    embedder = Embedder(_load_model(args), batch_size=args.batch_size, stateful=args.stateful, device=args.device)
    count = embedder.embed_file(
        args.input,
        args.output,
        output_layers=args.layers,
        use_sentence_keys=args.use_sentence_keys,
        forget_sentences=args.forget_sentences,
    )
    log.info("embedded %d sentences into %s", count, args.output)
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from elmo.model_files import save_bilm

    bilm = _load_model(args)
    save_bilm(bilm, args.output, native=args.to == "native")
    log.info("wrote %s model to %s", args.to, args.output)
    return 0


def cmd_dump_token_embeddings(args: argparse.Namespace) -> int:
    from elmo.token_embeddings import dump_token_embeddings

    bilm = _load_model(args)
    count = dump_token_embeddings(bilm, args.vocab, args.output, batch_size=args.batch_size)
    log.info("wrote %d token vectors to %s", count, args.output)
    return 0


# ---- elmo task ...: task models consuming ELMo (elmo.tasks) -------------------------------------------------


def cmd_task_train(args: argparse.Namespace) -> int:
    from elmo.tasks import build_runner, load_task_data, train_task
    from elmo.tasks.config import read_task_config

    config = read_task_config(args.config)
    if config.task != args.task:
        raise ElmoError(f"{args.config} is a '{config.task}' config, but the command says '{args.task}'")
    overrides = {"train.seed": args.seed, "train.epochs": args.epochs}
    if args.no_elmo:
        overrides["elmo.enabled"] = False
    if args.on_the_fly:
        overrides["elmo.cached"] = False
    config = config.replace(**{k: v for k, v in overrides.items() if v is not None})
    data = load_task_data(
        args.task, args.train, args.dev, args.test, args.train_fraction, args.limit, seed=config.train.seed
    )
    progress = not args.quiet
    runner = build_runner(config, data, args.word_vectors, args.bilm, args.cache, args.device, progress)
    result = train_task(runner, data, args.output, args.bilm, progress)
    test = "" if result.test_score is None else f", test {result.test_score:.2f}"
    log.info("best epoch %d: dev %.2f%s; model in %s", result.best_epoch, result.dev_score, test, args.output)
    return 0


def cmd_task_evaluate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from elmo.tasks import load_task_model, read_examples
    from elmo.tasks.training import write_predictions

    cached = False if args.on_the_fly else None  # None: as trained
    runner = load_task_model(args.model, args.bilm, cached, device=args.device, progress=not args.quiet)
    examples = read_examples(runner.config.task, args.input)
    predicted = runner.predict(examples, progress=not args.quiet)
    output = Path(args.predictions or Path(args.model) / f"predictions.{Path(args.input).name}")
    write_predictions(runner, output, examples, predicted)
    metric = "f1" if runner.is_tagger else "accuracy"
    print(json.dumps({"input": str(args.input), metric: round(runner.score(examples, predicted), 4),
                      "sentences": len(examples), "predictions": str(output)}))
    return 0


def cmd_task_word_vectors(args: argparse.Namespace) -> int:
    from elmo.tasks import train_word_vectors

    count = train_word_vectors(args.corpus, args.output, dim=args.dim, algorithm=args.algorithm,
                               min_count=args.min_count, epochs=args.epochs, seed=args.seed, workers=args.workers)
    log.info("wrote %d word vectors to %s", count, args.output)
    return 0


def _add_task_commands(commands) -> None:
    task = commands.add_parser("task", help="train and evaluate task models (NER tagger, sentence classifier)")
    sub = task.add_subparsers(dest="task_command", required=True, metavar="TASK_COMMAND")

    train = sub.add_parser("train", help="train a task model, with or without ELMo")
    train.add_argument("task", choices=("ner", "sst"), help="ner: CoNLL tagging (CRF); sst: label TAB sentence")
    train.add_argument("--config", required=True, help="task config JSON (configs/tasks/*.json)")
    train.add_argument("--train", required=True, help="training file")
    train.add_argument("--dev", required=True, help="dev file (selects the best epoch)")
    train.add_argument("--test", help="test file, scored with the dev-selected model")
    train.add_argument("--output", required=True, help="directory for the checkpoint, predictions and result.json")
    train.add_argument("--bilm", help="biLM model directory (needed unless --no-elmo)")
    train.add_argument("--word-vectors", help="word2vec text file (from 'elmo task word-vectors'); default random")
    train.add_argument("--cache", help="HDF5 file caching biLM activations across runs (default: in memory)")
    train.add_argument("--no-elmo", action="store_true", help="the baseline: same model without ELMo")
    train.add_argument("--on-the-fly", action="store_true", help="run the biLM every batch instead of caching")
    train.add_argument("--seed", type=int, help="override train.seed")
    train.add_argument("--epochs", type=int, help="override train.epochs")
    train.add_argument("--train-fraction", type=float, default=1.0, help="random fraction of the training data")
    train.add_argument("--limit", type=int, help="at most this many sentences per split (smoke tests)")
    train.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    train.set_defaults(func=cmd_task_train)

    evaluate = sub.add_parser("evaluate", help="predict and score any file with a trained task model")
    evaluate.add_argument("--model", required=True, help="task model directory (from 'elmo task train')")
    evaluate.add_argument("--input", required=True, help="CoNLL file (ner) or label TAB sentence file (sst)")
    evaluate.add_argument("--predictions", help="output file (default: MODEL/predictions.<input name>)")
    evaluate.add_argument("--bilm", help="biLM directory, if not where it was at training time")
    evaluate.add_argument("--on-the-fly", action="store_true", help="run the biLM inside the model")
    evaluate.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    evaluate.set_defaults(func=cmd_task_evaluate)

    vectors = sub.add_parser("word-vectors", help="train baseline word vectors (gensim) on the biLM's corpus")
    vectors.add_argument("--corpus", required=True, help="text file, one tokenised sentence per line (.gz ok)")
    vectors.add_argument("--output", required=True, help="word2vec text file to write")
    vectors.add_argument("--dim", type=int, default=100, help="vector size (default 100)")
    vectors.add_argument("--algorithm", choices=("word2vec", "fasttext"), default="word2vec", help="default word2vec")
    vectors.add_argument("--min-count", type=int, default=2, help="ignore rarer words (default 2)")
    vectors.add_argument("--epochs", type=int, default=5, help="passes over the corpus (default 5)")
    vectors.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    vectors.add_argument("--workers", type=int, default=2, help="threads (default 2)")
    vectors.set_defaults(func=cmd_task_word_vectors)


# ---- end of elmo task ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elmo", description="ELMo: embed text, train and evaluate biLMs.")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="only print warnings and errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    embed = commands.add_parser("embed", help="embed a file of tokenised sentences into HDF5")
    embed.add_argument("input", help="text file, one whitespace-tokenised sentence per line (UTF-8)")
    embed.add_argument("output", help="HDF5 file to write (replaced atomically when done)")
    which = embed.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", dest="layers", action="store_const", const="all", help="all layers: (L+1, n, 2P)")
    which.add_argument("--top", dest="layers", action="store_const", const="top", help="top layer: (n, 2P)")
    which.add_argument("--average", dest="layers", action="store_const", const="average", help="mean of layers")
    _add_model_args(embed)
    embed.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    embed.add_argument(
        "--stateful",
        action="store_true",
        help="carry LSTM states across batches row by row like the original (batches in file order)",
    )
    embed.add_argument("--use-sentence-keys", action="store_true", help="key datasets by sentence, not line index")
    embed.add_argument("--forget-sentences", action="store_true", help="do not write the sentence_to_index dataset")
    embed.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    embed.set_defaults(func=cmd_embed)

    convert = commands.add_parser("convert", help="convert a model between the original and the native format")
    _add_model_args(convert)
    convert.add_argument("output", help="output directory")
    convert.add_argument(
        "--to", choices=("hdf5", "native"), default="native", help="hdf5: options.json + weights.hdf5; "
        "native: config.json + model.safetensors (default)"
    )
    convert.set_defaults(func=cmd_convert)

    dump = commands.add_parser(
        "dump-token-embeddings", help="precompute the token layer for a vocabulary (for token-input biLMs)"
    )
    _add_model_args(dump)
    dump.add_argument("--vocab", required=True, help="vocabulary file, one token per line")
    dump.add_argument("output", help="HDF5 file to write (dataset 'embedding', one row per vocabulary line)")
    dump.add_argument("--batch-size", type=int, default=1024, help="tokens per batch (default 1024)")
    dump.set_defaults(func=cmd_dump_token_embeddings)
    _add_task_commands(commands)  # elmo task ...
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        return args.func(args)
    except ElmoError as e:
        if args.debug:
            raise
        print(f"elmo: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("elmo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
