"""Command line: a thin layer over the Python API (``elmo --help``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from elmo.errors import ElmoError, Interrupted

log = logging.getLogger("elmo")


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model (default: the small demo biLM shipped with the package)")
    group.add_argument(
        "--model",
        help="model directory (options.json + weights.hdf5, or config.json + model.safetensors), or the name of a "
        "published model: original, 5.5B, medium, small (downloaded once into $ELMO_HOME)",
    )
    group.add_argument("--options-file", help="original options.json")
    group.add_argument("--weight-file", help="original weights.hdf5")


def _load_model(args: argparse.Namespace):
    from elmo.model_files import load_bilm

    if args.model and (args.options_file or args.weight_file):
        raise ElmoError("give either --model or --options-file/--weight-file, not both")
    if args.model:
        from elmo.published_models import resolve_model

        return load_bilm(resolve_model(args.model))
    if args.options_file or args.weight_file:
        if not (args.options_file and args.weight_file):
            raise ElmoError("--options-file and --weight-file go together")
        return load_bilm(options_file=args.options_file, weight_file=args.weight_file)
    from elmo.pretrained import demo_model_dir

    log.info("no model given: using the small demo biLM shipped with the package (see --model)")
    return load_bilm(demo_model_dir())


def cmd_embed(args: argparse.Namespace) -> int:
    from elmo.distributed import join_for_barriers, shutdown
    from elmo.embed import Embedder
    from elmo.interrupts import stop_on_signals

    for flag in ("batch_size", "max_tokens_per_batch", "chunk_size"):
        if getattr(args, flag) < 1:
            raise ElmoError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if args.vocab_cache < 0:
        raise ElmoError(f"--vocab-cache must be >= 0, got {args.vocab_cache}")
    ranks = join_for_barriers()
    try:
        embedder = Embedder(
            _load_model(args), batch_size=args.batch_size, stateful=args.stateful,
            device=args.device or ranks.default_device(), precision=args.precision,
            max_tokens_per_batch=args.max_tokens_per_batch, vocab_cache=args.vocab_cache, chunk_size=args.chunk_size,
        )
        with stop_on_signals("embedding") as stop, _EmbedProgress(args, ranks, stop) as progress:
            count = embedder.embed_file(
                args.input, args.output, output_layers=args.layers, use_sentence_keys=args.use_sentence_keys,
                forget_sentences=args.forget_sentences, output_dtype=args.output_dtype, errors=args.errors,
                resume=args.resume, ranks=ranks, progress=progress,
            )
    finally:
        shutdown()
    if ranks.is_main:
        log.info("embedded %d sentences into %s", count, args.output)
    return 0


class _EmbedProgress:
    """tqdm bar over this rank's sentences, with tokens/s; silent with --quiet or when stderr is not a terminal.
    Called after every batch, it is also where a SIGINT/SIGTERM (``stop``) stops the job."""

    def __init__(self, args: argparse.Namespace, ranks, stop) -> None:
        from tqdm import tqdm

        disable = args.quiet or (args.progress == "auto" and not sys.stderr.isatty()) or args.progress == "off"
        self.bar = tqdm(unit=" sentences", disable=disable, position=ranks.local_rank, desc=f"rank {ranks.rank}"
                        if ranks.world_size > 1 else "embed", smoothing=0.1)
        self.tokens = 0
        self.stop = stop

    def __call__(self, sentences: int, tokens: int) -> None:
        self.stop.raise_if_requested()
        self.tokens += tokens
        self.bar.update(sentences)
        elapsed = self.bar.format_dict["elapsed"] or 1e-9
        self.bar.set_postfix_str(f"{self.tokens / elapsed:,.0f} tokens/s", refresh=False)

    def __enter__(self) -> _EmbedProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


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
             "dropout": "dropout", "weight_dropout": "weight_dropout", "n_epochs": "n_epochs",
             "unroll_steps": "unroll_steps", "optimizer": "optimizer",
             "lr_schedule": "lr_schedule", "warmup_steps": "warmup_steps", "state_reset_prob": "state_reset_prob",
             "average_last": "average_last"}
    overrides = {key: getattr(args, flag) for flag, key in names.items() if getattr(args, flag) is not None}
    if args.bf16 is not None:
        overrides["bf16"] = args.bf16
    if args.compile is not None:
        overrides["compile"] = args.compile
    if args.variational_dropout is not None:
        overrides["variational_dropout"] = args.variational_dropout
    if args.full_softmax:
        overrides["sample_softmax"] = False
    if args.negatives is not None:
        overrides["n_negative_samples_batch"] = args.negatives
    return overrides


def cmd_train(args: argparse.Namespace) -> int:
    from elmo.distributed import init_distributed, shutdown
    from elmo.memory import keep_freed_memory
    from elmo.train import train

    if args.max_steps is not None and args.max_steps < 1:
        raise ElmoError(f"--max-steps must be >= 1, got {args.max_steps}")
    keep_freed_memory()
    info, device = init_distributed(args.device)
    try:
        state = train(_train_spec(args, args.resume), info, device)
    finally:
        shutdown()
    log.info("done: step %d, %d tokens", state.step, state.tokens)
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from elmo.finetune import FINETUNE_FILE, finetune
    from elmo.memory import keep_freed_memory

    keep_freed_memory()
    result = finetune(_train_spec(args, resume=False), args.model)
    if result["before"] is not None:  # with --valid
        log.info("held-out perplexity before %.2f, after %.2f (geometric mean of both directions; %s)",
                 result["before"]["geometric_mean"], result["after"]["geometric_mean"],
                 Path(args.out) / FINETUNE_FILE)
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
    parser.add_argument("--config", required=require_config,
                        help="preset (original, small, cpu, ptb, tiny) or JSON file")
    parser.add_argument("--train", required=True, nargs="+", help="training shards: files or quoted globs")
    parser.add_argument("--vocab", required=True, help="vocabulary file from `elmo vocab` (<S>, </S>, <UNK> first)")
    parser.add_argument("--out", required=True, help="run directory (checkpoints, logs, TensorBoard, plot)")
    parser.add_argument("--valid", help="held-out file for full-softmax perplexity during and after training")
    parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (default: from n_epochs)")
    parser.add_argument("--batch-size", type=int, help="rows per process and micro-batch (preset: batch_size)")
    parser.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step (default 1)")
    parser.add_argument("--unroll-steps", type=int, help="truncated-BPTT window (preset: unroll_steps)")
    parser.add_argument("--optimizer", choices=["adagrad", "adam"], help="preset: optimizer (default adagrad)")
    parser.add_argument("--learning-rate", type=float, help="base learning rate (preset: learning_rate)")
    parser.add_argument("--lr-schedule", choices=["constant", "linear", "cosine"],
                        help="learning-rate schedule over the run (preset: lr_schedule, default constant)")
    parser.add_argument("--warmup-steps", type=int, help="linear warm-up steps (preset: warmup_steps, default 0)")
    parser.add_argument("--dropout", type=float, help="dropout on LSTM inputs and output (preset: dropout)")
    parser.add_argument("--variational-dropout", action=argparse.BooleanOptionalAction,
                        help="one dropout mask per row over each window's time steps instead of one per position "
                        "(preset: variational_dropout, default off as in the original)")
    parser.add_argument("--weight-dropout", type=float,
                        help="DropConnect on each LSTM layer's recurrent matrix, one mask per window (preset: "
                        "weight_dropout, default 0 = off as in the original)")
    parser.add_argument("--state-reset", type=float, dest="state_reset_prob",
                        help="chance that a row's carried LSTM state is zeroed before a window (default 0, the "
                        "original); > 0 teaches the LM to start from zeros, as stateless embedding does")
    parser.add_argument("--average-last", type=float, metavar="FRACTION",
                        help="average the weights over this final fraction of the steps; evaluation, export and "
                        "perplexity of the run use the mean (preset: average_last, default 0 = off)")
    parser.add_argument("--n-epochs", type=int, help="epochs, when --max-steps is not given")
    parser.add_argument("--negatives", type=int, help="sampled-softmax negatives per batch (preset: 8192)")
    parser.add_argument("--full-softmax", action="store_true", help="train with the full softmax (small vocabularies)")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction,
                        help="bfloat16 autocast for the matrix products, float32 LSTM cells and softmax sums "
                        "(preset: bf16; pays on CPUs with AVX512-BF16 or AMX and on GPUs)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction,
                        help="torch.compile the training step's elementwise loops (LSTM steps, softmax blocks, "
                        "char-CNN max-pool, highway): a minute or two of compiling when the run starts, then faster "
                        "steps on CPU (preset: compile)")
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


def cmd_demo(args: argparse.Namespace) -> int:
    from elmo.demo import CONTEXTS, format_table, nearest_neighbours, sense_accuracy, word_vectors
    from elmo.embed import Embedder

    embedder = Embedder(_load_model(args), batch_size=16)
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sentences = out_dir / "sentences.txt"
    sentences.write_text("".join(f"{s}\n" for _, _, s in CONTEXTS), encoding="utf-8")
    embedder.embed_file(sentences, out_dir / "embeddings.hdf5", output_layers="all")
    print(f"Embedded {len(CONTEXTS)} sentences into {out_dir / 'embeddings.hdf5'} (all layers, keys = line numbers).\n")
    token_layer = nearest_neighbours(word_vectors(embedder, CONTEXTS, layer=0), CONTEXTS)
    print(
        "Token layer (no context): every use of a word has the same vector, cosine "
        f"{min(n.similarity for n in token_layer):.3f}-{max(n.similarity for n in token_layer):.3f}.\n"
    )
    neighbours = nearest_neighbours(word_vectors(embedder, CONTEXTS, layer=None), CONTEXTS)
    print("ELMo (mean of all layers): each use's nearest other use of the same word\n")
    print(format_table(neighbours))
    print(f"\nNearest neighbour has the same sense for {sense_accuracy(neighbours):.0%} of the uses.")
    return 0


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
    embed.add_argument("--batch-size", type=int, default=64, help="most sentences per batch (default 64)")
    embed.add_argument(
        "--stateful",
        action="store_true",
        help="carry LSTM states across batches row by row like the original (batches in file order)",
    )
    embed.add_argument("--use-sentence-keys", action="store_true", help="key datasets by sentence, not line index")
    embed.add_argument("--forget-sentences", action="store_true", help="do not write the sentence_to_index dataset")
    embed.add_argument(
        "--device", default=None, help="torch device (default: cuda[:LOCAL_RANK] if available, else cpu)"
    )
    speed = embed.add_argument_group("speed and scale")
    speed.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                       help="fp32 (exact) or bf16 weights (fast on AVX512-BF16/AMX CPUs and GPUs; cosine > 0.999)")
    speed.add_argument("--max-tokens-per-batch", type=int, default=4096,
                       help="stateless runs: most padded tokens per batch, sentences sorted by length (default 4096)")
    speed.add_argument("--chunk-size", type=int, default=4096,
                       help="lines read, sorted and saved together: the unit of --resume and of ranks (default 4096)")
    speed.add_argument("--vocab-cache", type=int, default=0, metavar="N",
                       help="keep the token-layer vectors of up to N words across batches (default 0: off)")
    speed.add_argument("--resume", action="store_true",
                       help="continue an interrupted run of the same command, computing only what is missing")
    speed.add_argument("--output-dtype", choices=("float32", "float16"), default="float32",
                       help="dtype of the stored vectors (float16 halves the file)")
    speed.add_argument("--errors", choices=("strict", "replace"), default="strict",
                       help="a line that is not UTF-8: strict = stop with its line number, replace = use U+FFFD")
    speed.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                       help="progress bar with sentences/s and tokens/s (auto: when stderr is a terminal)")
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

    demo = commands.add_parser("demo", help="embed example sentences; show one word's vectors differ by context")
    _add_model_args(demo)
    demo.add_argument("--output-dir", default="runs/demo", help="where to write the sentences and embeddings")
    demo.set_defaults(func=cmd_demo)

    _add_training_commands(commands)
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
    except Interrupted as e:
        print(f"elmo: {e}", file=sys.stderr)
        return e.exit_code
    except ElmoError as e:
        if args.debug:
            raise
        print(f"elmo: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:  # a file we could not read or write: disk full, file-size limit, permissions
        if args.debug:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"elmo: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("elmo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
