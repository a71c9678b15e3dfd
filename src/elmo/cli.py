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
    raise ElmoError("no model given: use --model DIR or --options-file F --weight-file W")


def cmd_embed(args: argparse.Namespace) -> int:
    from elmo.embed import Embedder
    from elmo.embedding.ranks import leave_process_group, ranks_from_environment

    for flag in ("batch_size", "max_tokens_per_batch", "chunk_size"):
        if getattr(args, flag) < 1:
            raise ElmoError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if args.vocab_cache < 0:
        raise ElmoError(f"--vocab-cache must be >= 0, got {args.vocab_cache}")
    ranks = ranks_from_environment()
    try:
        embedder = Embedder(
            _load_model(args), batch_size=args.batch_size, stateful=args.stateful,
            device=args.device or ranks.default_device(), precision=args.precision,
            max_tokens_per_batch=args.max_tokens_per_batch, vocab_cache=args.vocab_cache, chunk_size=args.chunk_size,
        )
        with _EmbedProgress(args, ranks) as progress:
            count = embedder.embed_file(
                args.input, args.output, output_layers=args.layers, use_sentence_keys=args.use_sentence_keys,
                forget_sentences=args.forget_sentences, output_dtype=args.output_dtype, errors=args.errors,
                resume=args.resume, ranks=ranks, progress=progress,
            )
    finally:
        leave_process_group()
    if ranks.is_main:
        log.info("embedded %d sentences into %s", count, args.output)
    return 0


class _EmbedProgress:
    """tqdm bar over this rank's sentences, with tokens/s; silent with --quiet or when stderr is not a terminal."""

    def __init__(self, args: argparse.Namespace, ranks) -> None:
        from tqdm import tqdm

        disable = args.quiet or (args.progress == "auto" and not sys.stderr.isatty()) or args.progress == "off"
        self.bar = tqdm(unit=" sentences", disable=disable, position=ranks.local_rank, desc=f"rank {ranks.rank}"
                        if ranks.world_size > 1 else "embed", smoothing=0.1)
        self.tokens = 0

    def __call__(self, sentences: int, tokens: int) -> None:
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
