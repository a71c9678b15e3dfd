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
