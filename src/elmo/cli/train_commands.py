"""``elmo vocab``, ``train``, ``finetune``, ``perplexity``, ``substitutes`` and ``export``: training biLM language
models and using them as language models."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from elmo.cli.model_args import add_checkpoint_arg
from elmo.cli.outputs import DIRECTORY, Output, add_output
from elmo.cli.setting_flags import (
    add_flag,
    add_parameter_flag,
    add_setting_flags,
    checked,
    settings_from_args,
    show_progress,
)
from elmo.errors import ConfigError
from elmo.presets import preset_names
from elmo.settings import at_least
from elmo.shared_settings import DEVICE, INITIAL_STATES, PROGRESS
from elmo.text.vocab import SPECIAL_TOKENS
from elmo.training.perplexity import model_perplexity
from elmo.training.run_files import is_run_dir
from elmo.training.substitutes import model_substitutes, read_tokenised_lines
from elmo.training.train_config import TrainConfig
from elmo.training.vocab_counts import vocabulary_from_counts

log = logging.getLogger("elmo")


def cmd_vocab(args: argparse.Namespace) -> int:
    from elmo.training.corpus import expand_shards
    from elmo.training.vocab_counts import count_words

    shards = expand_shards(args.corpus)
    counts = count_words(shards)
    if not counts:  # an empty vocabulary would only fail later, in train
        from elmo.errors import InputFileError

        raise InputFileError(f"{', '.join(map(str, shards))}: no words (empty, or blank lines only); "
                             f"{args.output} was not written")
    vocab = vocabulary_from_counts(counts, min_count=args.min_count, max_size=args.max_size)
    vocab.save(args.output)
    log.info("wrote %d words (%d distinct in the corpus, %d tokens) to %s", len(vocab), len(counts),
             sum(counts.values()), args.output)
    return 0


def _train_spec(args: argparse.Namespace, resume: bool, fine_tuning: bool = False):
    from elmo.training.presets import run_preset
    from elmo.training.trainer import TrainSpec

    overrides = settings_from_args(TrainConfig, args)
    TrainConfig(**overrides)  # each flag's value checked on its own first, so that an error names the flag
    own_config = resume and is_run_dir(args.out)  # without --config, a resumed run keeps its own
    if resume and args.config is None and not own_config and not fine_tuning:
        state = "is not a training run (no train_config.json)" if Path(args.out).is_dir() else "does not exist"
        raise ConfigError(f"--resume: the run directory {args.out} {state}; to start a run there, give --config")
    if fine_tuning and args.config is None and not own_config:
        from elmo.training.finetune import model_training_keys

        overrides = {**model_training_keys(args.model), **overrides}
    config, train = run_preset(args.config, overrides, args.out, resume, fine_tuning)
    return TrainSpec(
        config=config, train=train, vocab_path=Path(args.vocab), train_patterns=args.train, run_dir=Path(args.out),
        valid_path=Path(args.valid) if args.valid else None, max_steps=args.max_steps, resume=resume,
        device=args.device, progress=show_progress(args), force=args.force,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from elmo.runtime.distributed import init_distributed, shutdown
    from elmo.runtime.memory import keep_freed_memory
    from elmo.training.trainer import train

    spec = _train_spec(args, args.resume)
    keep_freed_memory()
    info, device = init_distributed(args.device)
    try:
        state = train(spec, info, device)
    finally:
        shutdown()
    log.info("done: step %d, %d tokens", state.step, state.tokens)
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from elmo.runtime.memory import keep_freed_memory
    from elmo.training.finetune import finetune
    from elmo.training.run_files import FINETUNE_FILE

    keep_freed_memory()
    result = finetune(_train_spec(args, args.resume, fine_tuning=True), args.model, checkpoint=args.checkpoint)
    if result["before"] is not None:  # with --valid
        log.info("held-out perplexity before %.2f, after %.2f (geometric mean of both directions; %s)",
                 result["before"]["geometric_mean"], result["after"]["geometric_mean"],
                 Path(args.out) / FINETUNE_FILE)
    return 0


def cmd_perplexity(args: argparse.Namespace) -> int:
    result = model_perplexity(args.model, args.data, args.vocab, rows=args.rows, unroll_steps=args.unroll_steps,
                              device=args.device, initial_state=args.initial_state)
    if args.json:
        out = result.to_dict()
        print(json.dumps({k: out[k] for k in ("forward", "backward", "geometric_mean", "arithmetic_mean", "tokens")}))
    else:
        print(result.summary())
    return 0


def cmd_substitutes(args: argparse.Namespace) -> int:
    lines = 0
    for lines, sentence in enumerate(model_substitutes(
        args.model, read_tokenised_lines(args.input), top_k=args.top_k, vocab=args.vocab, batch_size=args.batch_size,
        device=args.device,
    ), start=1):
        if args.json:
            print(json.dumps([token.to_dict() for token in sentence], ensure_ascii=False))
        else:
            print("\n".join([token.summary() for token in sentence] + [""]))  # a blank line after each sentence
    if lines == 0:
        raise ConfigError(f"{args.input}: no lines to find substitutes for")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from elmo.training.run_files import export_run

    out = export_run(args.run_dir, args.out_dir, force=args.force)
    log.info("exported %s to %s (options.json, weights.hdf5, softmax.hdf5, vocab.txt)", args.run_dir, out)
    return 0


def _add_train_args(parser: argparse.ArgumentParser, fine_tuning: bool = False) -> None:
    presets = f"preset ({', '.join(preset_names())}) or JSON file"
    parser.add_argument("--config", help=f"{presets}; without it the model's own training keys (its options: "
                        "batch_size, unroll_steps, n_negative_samples_batch, learning_rate, dropout, ...) stand in for "
                        "the preset, and the defaults below fill the rest" if fine_tuning else presets)
    parser.add_argument("--train", required=True, nargs="+", help="training shards: files or quoted globs")
    parser.add_argument("--vocab", required=True, help="vocabulary file from `elmo vocab` (<S>, </S>, <UNK> first)")
    add_output(parser, "--out", output=Output(DIRECTORY, resumable=is_run_dir), required=True,
               help="run directory (checkpoints, logs, TensorBoard, plot); an existing non-empty one only with "
               "--resume (continue it) or --force (replace it as a whole)")
    parser.add_argument("--valid", help="held-out file for full-softmax perplexity during and after training")
    parser.add_argument("--max-steps", type=checked(int, at_least(1)),
                        help="stop after this many optimizer steps (default: from n_epochs)")
    add_flag(parser, "device", DEVICE)
    add_flag(parser, "progress", PROGRESS, bool)
    keys = parser.add_argument_group("preset keys (each flag replaces the preset's value)")
    add_setting_flags(keys, TrainConfig, from_preset=True)


def _add_resume_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resume", action="store_true",
        help="continue the run in --out from its newest checkpoint (--config defaults to the run's own)",
    )


def add_train_commands(commands) -> None:
    vocab = commands.add_parser("vocab", help="count words in a corpus and write a training vocabulary")
    vocab.add_argument("corpus", nargs="+", help="text shards (plain or .gz) or quoted globs, one sentence per line")
    add_output(vocab, "-o", "--output", required=True, help="vocabulary file to write")
    add_parameter_flag(vocab, "--min-count", vocabulary_from_counts, "drop words seen fewer times", at_least(1))
    vocab.add_argument("--max-size", type=checked(int, at_least(len(SPECIAL_TOKENS))),
                       help=f"at most this many lines, the {len(SPECIAL_TOKENS)} special tokens included")
    vocab.set_defaults(func=cmd_vocab)

    train = commands.add_parser("train", help="train a biLM language model (torchrun for several processes)")
    _add_train_args(train)
    _add_resume_flag(train)
    train.set_defaults(func=cmd_train)

    finetune = commands.add_parser("finetune", help="continue LM training of a published/exported model on new text")
    finetune.add_argument("--model", required=True, help="what `elmo embed --model` takes: a model directory, an "
                          "archive, a shipped or published name (its softmax.hdf5 + vocab.txt are used if present), "
                          "or a bilm-tf training directory (its softmax and Adagrad state are continued)")
    add_checkpoint_arg(finetune)
    _add_train_args(finetune, fine_tuning=True)
    _add_resume_flag(finetune)
    finetune.set_defaults(func=cmd_finetune)

    ppl = commands.add_parser("perplexity", help="full-softmax perplexity of a run or an export on a text file")
    ppl.add_argument("--model", required=True, help="run directory or export directory (any spelling `elmo embed "
                     "--model` takes; it needs softmax.hdf5 + vocab.txt)")
    ppl.add_argument("--data", required=True, help="text file, one tokenised sentence per line")
    ppl.add_argument("--vocab", help="vocabulary (default: the vocab.txt stored with the model)")
    add_parameter_flag(ppl, "--rows", model_perplexity, "parallel contiguous streams (1: one stream)", at_least(1))
    add_parameter_flag(ppl, "--unroll-steps", model_perplexity, "window length (state carries across)", at_least(1))
    add_parameter_flag(ppl, "--initial-state", model_perplexity, "carry: the file is one stream, the state carried "
                       "from sentence to sentence (bilm-tf's protocol); zero or warm: each sentence on its own, from "
                       "zeros or the model's warm state, as a stateless embedder runs it", choices=INITIAL_STATES)
    add_flag(ppl, "device", DEVICE)
    ppl.add_argument("--json", action="store_true", help="print one JSON object")
    ppl.set_defaults(func=cmd_perplexity)

    subs = commands.add_parser(
        "substitutes", help="the most probable words at each token from the forward and the backward LM"
    )
    subs.add_argument("input", help="text file, one tokenised sentence per line (UTF-8; .gz is unpacked; - reads "
                      "stdin)")
    subs.add_argument("--model", required=True, help="run directory or export directory (any spelling `elmo embed "
                      "--model` takes; it needs softmax.hdf5 + vocab.txt)")
    subs.add_argument("--vocab", help="vocabulary (default: the vocab.txt stored with the model)")
    add_parameter_flag(subs, "--top-k", model_substitutes, "candidates per token and direction", at_least(1))
    add_parameter_flag(subs, "--batch-size", model_substitutes, "sentences per batch", at_least(1))
    add_flag(subs, "device", DEVICE)
    subs.add_argument("--json", action="store_true", help="one JSON array per input line: per token "
                      '{"word", "forward": [[word, probability], ...], "backward": [...]}')
    subs.set_defaults(func=cmd_substitutes)

    export = commands.add_parser("export", help="write a run's newest checkpoint as options.json + weights.hdf5")
    export.add_argument("run_dir", help="training run directory")
    add_output(export, "out_dir", output=Output(DIRECTORY), help="directory to write (an existing non-empty one "
               "only with --force, which replaces it as a whole)")
    export.set_defaults(func=cmd_export)
