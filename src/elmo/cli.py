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


# ---------------------------------------------------------------- training commands (issue 4)


def cmd_vocab(args: argparse.Namespace) -> int:
    from elmo.data import count_words, expand_shards, vocabulary_from_counts

    counts = count_words(expand_shards(args.corpus))
    vocab = vocabulary_from_counts(counts, min_count=args.min_count, max_size=args.max_size)
    vocab.save(args.output)
    log.info("wrote %d words (%d distinct in the corpus, %d tokens) to %s", len(vocab), len(counts),
             sum(counts.values()), args.output)
    return 0


def _train_spec(args: argparse.Namespace, resume: bool):
    from pathlib import Path

    from elmo.train import TrainSpec
    from elmo.train_presets import load_preset, training_only

    if args.config is None and resume and (Path(args.out) / "train_config.json").is_file():
        args.config = str(Path(args.out) / "train_config.json")  # resume with the run's own preset
    if args.config is not None:
        config, train = load_preset(args.config, overrides=_train_overrides(args))
    elif args.func is cmd_finetune:
        config, train = None, training_only(_train_overrides(args))  # the architecture comes from --model
    else:
        raise ElmoError("--config is required (a preset name such as 'small', or a JSON file)")
    return TrainSpec(
        config=config, train=train, vocab_path=Path(args.vocab), train_patterns=args.train, run_dir=Path(args.out),
        valid_path=Path(args.valid) if args.valid else None, max_steps=args.max_steps, resume=resume,
        device=args.device, progress=not args.no_progress,
    )


def _train_overrides(args: argparse.Namespace) -> dict:
    names = {"batch_size": "batch_size", "grad_accum": "grad_accum_steps", "seed": "seed",
             "checkpoint_every": "checkpoint_every", "keep_checkpoints": "keep_checkpoints",
             "log_every": "log_every", "eval_every": "eval_every", "learning_rate": "learning_rate",
             "dropout": "dropout", "n_epochs": "n_epochs", "unroll_steps": "unroll_steps"}
    overrides = {key: getattr(args, flag) for flag, key in names.items() if getattr(args, flag) is not None}
    if args.bf16:
        overrides["bf16"] = True
    if args.full_softmax:
        overrides["sample_softmax"] = False
    if args.negatives is not None:
        overrides["n_negative_samples_batch"] = args.negatives
    return overrides


def cmd_train(args: argparse.Namespace) -> int:
    from elmo.distributed import init_distributed, shutdown
    from elmo.train import train

    if args.max_steps is not None and args.max_steps < 1:
        raise ElmoError(f"--max-steps must be >= 1, got {args.max_steps}")
    info, device = init_distributed(args.device)
    try:
        state = train(_train_spec(args, args.resume), info, device)
    finally:
        shutdown(info)
    log.info("done: step %d, %d tokens", state.step, state.tokens)
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from elmo.finetune import finetune

    result = finetune(_train_spec(args, resume=False), args.model)
    log.info("held-out perplexity before %.2f, after %.2f (geometric mean of both directions)",
             result["before"]["geometric_mean"], result["after"]["geometric_mean"])
    return 0


def cmd_perplexity(args: argparse.Namespace) -> int:
    import json

    from elmo.data import read_sentences
    from elmo.evaluate import perplexity
    from elmo.lm_files import load_language_model
    from elmo.vocab import Vocabulary

    if args.rows < 1:
        raise ElmoError(f"--rows must be >= 1, got {args.rows}")
    lm, stored_vocab = load_language_model(args.model)
    vocab = Vocabulary.from_file(args.vocab, require_special_tokens=True) if args.vocab else stored_vocab
    if vocab is None:
        raise ElmoError(f"{args.model}: no vocab.txt stored with the model; pass --vocab")
    if len(vocab) != lm.softmax.vocab_size:
        raise ElmoError(
            f"{args.vocab or args.model}: {len(vocab)} words, but the model's softmax has {lm.softmax.vocab_size} rows"
        )
    sentences = [t for _, t in read_sentences(args.data)]
    if not sentences:
        raise ElmoError(f"{args.data}: no sentences")
    device = args.device or "cpu"
    result = perplexity(lm.to(device), vocab, sentences, rows=args.rows, unroll_steps=args.unroll_steps, device=device)
    if args.json:
        out = result.to_dict()
        print(json.dumps({k: out[k] for k in ("forward", "backward", "geometric_mean", "arithmetic_mean", "tokens")}))
    else:
        print(f"forward perplexity:   {result.forward:.3f}")
        print(f"backward perplexity:  {result.backward:.3f}")
        print(f"geometric mean:       {result.geometric_mean:.3f}   (exp of the mean loss; what bilm-tf printed)")
        print(f"arithmetic mean:      {result.arithmetic_mean:.3f}")
        print(f"tokens:               {result.tokens} per direction ({result.sentences} sentences, "
              f"{result.tokens - result.sentences} words + {result.sentences} sentence ends)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from elmo.lm_files import export_run

    out = export_run(args.run_dir, args.out_dir)
    log.info("exported %s to %s (options.json, weights.hdf5, softmax.hdf5, vocab.txt)", args.run_dir, out)
    return 0


def _add_train_args(parser: argparse.ArgumentParser, require_config: bool = True) -> None:
    parser.add_argument("--config", required=require_config, help="preset (original, small, cpu, tiny) or JSON file")
    parser.add_argument("--train", required=True, nargs="+", help="training shards: files or quoted globs")
    parser.add_argument("--vocab", required=True, help="vocabulary file from `elmo vocab` (<S>, </S>, <UNK> first)")
    parser.add_argument("--out", required=True, help="run directory (checkpoints, logs, TensorBoard, plot)")
    parser.add_argument("--valid", help="held-out file for full-softmax perplexity during and after training")
    parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (default: from n_epochs)")
    parser.add_argument("--batch-size", type=int, help="rows per process and micro-batch (preset: batch_size)")
    parser.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step (default 1)")
    parser.add_argument("--unroll-steps", type=int, help="truncated-BPTT window (preset: unroll_steps)")
    parser.add_argument("--learning-rate", type=float, help="Adagrad learning rate (preset: learning_rate)")
    parser.add_argument("--dropout", type=float, help="dropout on LSTM inputs and output (preset: dropout)")
    parser.add_argument("--n-epochs", type=int, help="epochs, when --max-steps is not given")
    parser.add_argument("--negatives", type=int, help="sampled-softmax negatives per batch (preset: 8192)")
    parser.add_argument("--full-softmax", action="store_true", help="train with the full softmax (small vocabularies)")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the matrix products")
    parser.add_argument("--seed", type=int, help="seed for initialisation, shuffling, sampling and dropout")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (preset: 1250)")
    parser.add_argument("--keep-checkpoints", type=int, help="how many recent checkpoints to keep (preset: 2)")
    parser.add_argument("--log-every", type=int, help="steps between log lines (preset: 100)")
    parser.add_argument("--eval-every", type=int, help="steps between held-out evaluations (0: at the end only)")
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_training_commands(commands) -> None:
    vocab = commands.add_parser("vocab", help="count words in a corpus and write a training vocabulary")
    vocab.add_argument("corpus", nargs="+", help="text shards (plain or .gz) or quoted globs, one sentence per line")
    vocab.add_argument("-o", "--output", required=True, help="vocabulary file to write")
    vocab.add_argument("--min-count", type=int, default=1, help="drop words seen fewer times (default 1)")
    vocab.add_argument("--max-size", type=int, help="at most this many lines, the 3 special tokens included")
    vocab.set_defaults(func=cmd_vocab)

    train = commands.add_parser("train", help="train a biLM language model (torchrun for several processes)")
    _add_train_args(train, require_config=False)
    train.add_argument(
        "--resume", action="store_true",
        help="continue the run in --out from its newest checkpoint (--config defaults to the run's own)",
    )
    train.set_defaults(func=cmd_train)

    finetune = commands.add_parser("finetune", help="continue LM training of a published/exported model on new text")
    finetune.add_argument("--model", required=True, help="model directory (options.json + weights.hdf5, softmax.hdf5)")
    _add_train_args(finetune, require_config=False)
    finetune.set_defaults(func=cmd_finetune)

    ppl = commands.add_parser("perplexity", help="full-softmax perplexity of a run or an export on a text file")
    ppl.add_argument("--model", required=True, help="run directory or export directory")
    ppl.add_argument("--data", required=True, help="text file, one tokenised sentence per line")
    ppl.add_argument("--vocab", help="vocabulary (default: the vocab.txt stored with the model)")
    ppl.add_argument("--rows", type=int, default=1, help="parallel contiguous streams (default 1: one stream)")
    ppl.add_argument("--unroll-steps", type=int, default=20, help="window length (state carries across; default 20)")
    ppl.add_argument("--device", help="torch device (default cpu)")
    ppl.add_argument("--json", action="store_true", help="print one JSON object")
    ppl.set_defaults(func=cmd_perplexity)

    export = commands.add_parser("export", help="write a run's newest checkpoint as options.json + weights.hdf5")
    export.add_argument("run_dir", help="training run directory")
    export.add_argument("out_dir", help="directory to write")
    export.set_defaults(func=cmd_export)


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

    _add_training_commands(commands)
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
