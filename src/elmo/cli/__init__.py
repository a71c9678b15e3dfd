"""Command line: argument parsing over the Python API (``elmo --help``); errors become one ``elmo: error:`` line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from elmo import DISTRIBUTION, __version__
from elmo.cli.embed_commands import add_embed_commands
from elmo.cli.model_commands import add_model_commands
from elmo.cli.outputs import check_outputs
from elmo.cli.probe_commands import add_probe_commands
from elmo.cli.serve_commands import add_serve_commands
from elmo.cli.task_commands import add_task_commands
from elmo.cli.train_commands import add_train_commands
from elmo.devices import checked_device
from elmo.errors import ElmoError, Interrupted, unexpected
from elmo.settings import SettingError


class OneLineErrorParser(argparse.ArgumentParser):
    """Argument mistakes print one line (``elmo embed: error: ...``), not the whole usage block; every command's
    parser is a subclass, so this holds for all of them."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class SubcommandParser(OneLineErrorParser):
    """A command's parser names its own unknown flags (argparse leaves them to the top parser: ``elmo: error:``), and
    takes ``-q`` and ``--debug`` after the command too (``elmo embed ... -q``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _add_common_flags(self, argparse.SUPPRESS)  # absent: the value given before the command (or its default)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


RETIRED_FLAGS = {
    "--bf16": "--precision bf16", "--no-bf16": "--precision fp32", "--stateful": "--initial-state carry",
    "--max-tokens-per-batch": "--max-batch-tokens", "--output-dtype": "--dtype", "--overwrite": "--force",
}
"""Flags of earlier versions -> what to write now: one error line instead of argparse's "unrecognized"."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="elmo", description="ELMo: embed text, train and evaluate biLMs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} (pip package {DISTRIBUTION})")
    _add_common_flags(parser, False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=SubcommandParser)
    add_embed_commands(commands)  # embed, convert, dump-token-embeddings, warm-state, demo
    add_model_commands(commands)  # models
    add_train_commands(commands)  # vocab, train, finetune, perplexity, export
    add_task_commands(commands)  # task train | evaluate | word-vectors
    add_probe_commands(commands)  # probe pos | wsd, neighbours
    add_serve_commands(commands)  # serve
    return parser


def _add_common_flags(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--debug", action="store_true", default=default, help="show Python tracebacks for errors")
    parser.add_argument("-q", "--quiet", action="store_true", default=default, help="only print warnings and errors")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Exit status: 0 done; 2 the command line is wrong as written (an unknown, missing, removed or
    conflicting flag, or a value its flag refuses: argparse and :class:`~elmo.errors.UsageError`); 1 everything
    found while running (files, models, data, this machine's devices); 128 + N stopped by signal N."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    retired = next((a for a in argv if a.split("=")[0] in RETIRED_FLAGS), None)
    if retired is not None:
        flag = retired.split("=")[0]
        parser.exit(2, f"elmo: error: {flag} was removed: use {RETIRED_FLAGS[flag]}\n")
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:  # a program (or test) that configured logging keeps its configuration
        # INFO for elmo's own lines only: other packages (matplotlib's font manager, ...) speak from WARNING up
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
        logging.getLogger("elmo").setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        if getattr(args, "device", None) is not None:
            checked_device(args.device)  # a device this machine lacks: one line, before any work
        check_outputs(parser, args)  # nothing a user made is replaced unasked: one line, before any work
        return args.func(args)
    except Interrupted as e:
        print(f"elmo: {e}", file=sys.stderr)
        return e.exit_code
    except ElmoError as e:
        if args.debug:
            raise
        print(f"elmo: error: {e.command_line if isinstance(e, SettingError) else e}", file=sys.stderr)
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
    except Exception as e:  # noqa: BLE001 - a bug of ours: still one line (the readers' own net names the file)
        if args.debug:
            raise
        print(f"elmo: error: {unexpected(e)}; this is a bug of elmo: please report it (--debug shows where)",
              file=sys.stderr)
        return 1
