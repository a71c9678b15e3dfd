"""What a command writes: its output arguments (:func:`add_output`) and the one check they all pass before any work.

Every argument that names a path a command writes is declared with :func:`add_output`, which also gives the
command the one flag that allows replacing it, ``--force``. Before a command runs, ``elmo.cli.main`` calls
:func:`check_outputs`, so every command keeps the same rule without code of its own:

* an output that is one of the command's inputs (any other argument naming an existing file, globs expanded; for a
  directory replaced with ``--force``, any input inside it) is refused, even with ``--force``;
* an existing file, or a non-empty directory, is refused unless ``--force`` (with ``--resume`` the command itself
  checks the run it continues);
* nothing is written inside the installed package (the shipped models are read-only);
* the directory it goes into must be one this process can write (a file is made there and removed).

Each refusal is one line naming the path as the user gave it, before any model loads.
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.errors import ConfigError, OutputWriteError

FILE, DIRECTORY = "file", "directory"
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Output:
    """How an output argument is written. ``kind``: FILE or DIRECTORY, or a function of the parsed arguments that
    says which (``elmo embed --format parquet`` writes a directory). ``files``: the argument is a directory the
    command writes these files into, leaving the rest of it alone (``elmo demo``): each is checked as a file.
    ``resumable``: whether an existing directory is a run that ``--resume`` continues (the refusal then says so)."""

    kind: str | Callable[[argparse.Namespace], str] = FILE
    files: tuple[str, ...] = ()
    resumable: Callable[[Path], bool] | None = None


def add_output(parser: Any, *names: str, output: Output = Output(), **options: Any) -> argparse.Action:
    """Add the argument ``names`` (``add_argument``'s ``options``) as a path the command writes, and ``--force``."""
    from elmo.cli.setting_flags import add_flag
    from elmo.shared_settings import FORCE

    action = parser.add_argument(*names, **options)
    action.output = output  # type: ignore[attr-defined]  # what check_outputs and the parser walk find
    if "--force" not in parser._option_string_actions:
        add_flag(parser, "force", FORCE)
    return action


def output_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The output arguments of one command's parser."""
    return [action for action in parser._actions if hasattr(action, "output")]


def chosen_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` were parsed for (``elmo task train`` -> the ``train`` parser)."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or getattr(args, sub.dest, None) is None:
            return parser
        parser = sub.choices[getattr(args, sub.dest)]


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, an output of the command ``args`` give that would replace an input, an existing file
    or non-empty directory without ``--force``, or a file of the installed package (see the module's docstring)."""
    command = chosen_command(parser, args)
    outputs = [(action, getattr(args, action.dest, None)) for action in output_actions(command)]
    outputs = [(action, value) for action, value in outputs if value is not None]
    if not outputs:
        return
    inputs = _inputs(command, args, {action.dest for action, _ in outputs})
    for action, value in outputs:
        spec: Output = action.output  # type: ignore[attr-defined]
        if spec.files:
            _check_directory_path(Path(value))
            for name in spec.files:
                check_output_path(Path(value) / name, FILE, args.force, inputs)
        else:
            kind = spec.kind(args) if callable(spec.kind) else spec.kind
            check_output_path(Path(value), kind, args.force, inputs, getattr(args, "resume", False), spec.resumable)


def check_output_path(path: Path, kind: str, force: bool, inputs: Sequence[tuple[Path, str]] = (),
                      resume: bool = False, resumable: Callable[[Path], bool] | None = None) -> None:
    """One output path (a FILE or a DIRECTORY): the rule of :func:`check_outputs`. ``inputs``: (path, the argument
    that names it). With ``resume``, an existing output is the run to continue: only a file of the package or an
    input is refused here."""
    if str(path) == "-":
        return  # stdout: the command says whether it can write there
    for given, argument in inputs:
        if _same(path, given):
            raise ConfigError(f"{path}: is also {argument}, an input of this command; writing there would destroy "
                              "it: give another output")
        if kind == DIRECTORY and force and not resume and path.is_dir() and _inside(given, path):
            raise ConfigError(f"{path}: holds {given} ({argument}), an input of this command; --force would delete "
                              "it: move it first or give another output")
    if _inside(path, PACKAGE_DIR):
        raise ConfigError(f"{path}: inside the installed elmo package, whose files (the shipped models among them) "
                          "are read-only; write elsewhere")
    if os.path.lexists(path) and not resume:
        if kind == FILE and path.is_dir():
            raise ConfigError(f"{path}: is a directory; give the file to write")
        if kind == DIRECTORY and not path.is_dir():
            raise ConfigError(f"{path} exists and is not a directory")
        if not force and (kind == FILE or any(path.iterdir())):
            if resumable is not None and resumable(path):
                raise ConfigError(f"{path}: already holds a run; pass --resume to continue it, or --force to replace "
                                  "it")
            what = "exists" if kind == FILE else "exists and is not empty"
            raise ConfigError(f"{path} {what}; pass --force to replace it")
    _check_writable(path)


def _check_directory_path(directory: Path) -> None:
    """A directory that files are written into: a directory, or a path where one can be made."""
    if os.path.lexists(directory) and not directory.is_dir():
        raise ConfigError(f"{directory} exists and is not a directory")


def _check_writable(path: Path) -> None:
    """The directory ``path`` goes into (or its nearest existing ancestor, which the command will create it in)
    is a directory this process can write: a file is made there and removed (permissions alone do not say it for
    root, or on /proc and the like); named as the user gave the path."""
    parent = next(p for p in path.parents if os.path.lexists(p)) if not os.path.lexists(path.parent) else path.parent
    if not parent.is_dir():
        raise ConfigError(f"{parent}: is a file, not a directory: {path} cannot be created")
    try:
        fd, probe = tempfile.mkstemp(prefix=".elmo-write-check-", dir=parent)
    except OSError as e:
        raise OutputWriteError(f"{path}: cannot write in {parent} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def _inputs(command: argparse.ArgumentParser, args: argparse.Namespace, outputs: set[str]) -> list[tuple[Path, str]]:
    """Every existing path an argument other than the outputs names (globs expanded), with the argument's name: the
    command's inputs, whatever it calls them."""
    found = []
    for action in command._actions:
        value = getattr(args, action.dest, None) if action.dest not in outputs else None
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str) or text in ("", "-"):
                continue
            text = os.path.expanduser(text)
            for match in glob.glob(text) if glob.has_magic(text) else [text]:
                if os.path.lexists(match):
                    found.append((Path(match), action.option_strings[0] if action.option_strings else
                                  action.metavar or action.dest))
    return found


def _same(a: Path, b: Path) -> bool:
    """The same file (also through a symlink or a hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, directory: Path) -> bool:
    """``path`` is ``directory`` or inside it (symlinks resolved)."""
    return path.resolve().is_relative_to(directory.resolve())
