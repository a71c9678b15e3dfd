"""Command-line flags made from settings (:mod:`elmo.settings`): a dataclass's fields, or a shared setting."""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from elmo.settings import Check, Setting, check_value, setting_of, settings_of


def add_setting_flags(
    parser: Any, cls: type, names: Sequence[str] | None = None, from_preset: bool = False,
) -> None:
    """One flag per setting of ``cls`` (or per name in ``names``, in that order) on ``parser`` or an argument group.

    Without ``from_preset`` an absent flag gives the field's default, which its help shows. With it, an absent flag
    is None, so the preset's value stands; the help names the preset key and the default of a preset without it.
    """
    fields = {f.name: f for f in settings_of(cls)}
    hints = typing.get_type_hints(cls)
    for name in names or [name for name, field in fields.items() if setting_of(field).flag != ""]:
        add_flag(parser, name, setting_of(fields[name]), hints[name], from_preset)


def add_flag(parser: Any, name: str, spec: Setting, kind: Any = None, from_preset: bool = False) -> None:
    """The flag of one setting, stored under ``name``; ``kind``: the value type (default: the default's type)."""
    kind = _without_none(kind) if kind is not None else type(spec.default) if spec.default is not None else str
    flag = spec.flag_for(name)
    options: dict[str, Any] = {"dest": name, "default": None if from_preset else spec.default,
                               "help": _help(name, spec, from_preset)}
    if spec.const is not None:
        options.update(action="store_const", const=spec.const)
    elif kind is bool:
        # --x, or --x / --no-x where the default is on or decided at run time (None: progress)
        both = from_preset or spec.default is not False
        options["action"] = argparse.BooleanOptionalAction if both else "store_true"
    else:
        choices = spec.choices
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            choices, kind = [member.value for member in kind], str
        metavar = spec.metavar or (None if choices else flag.lstrip("-").replace("-", "_").upper())
        options.update(type=_checked_type(kind, spec), choices=choices, metavar=metavar)
    parser.add_argument(flag, **options)


def _checked_type(kind: Callable[[str], Any], spec: Setting) -> Callable[[str], Any]:
    """argparse's ``type``: the text as ``kind``, refused as it is parsed when the setting's checks refuse it, so a
    bad value is a usage error (exit status 2: ``argument --batch-size: must be >= 1, got 0``)."""

    def convert(text: str) -> Any:
        value = kind(text)  # a ValueError here: argparse's "invalid int value: 'two'"
        try:
            check_value(spec, value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return value

    convert.__name__ = getattr(kind, "__name__", "value")  # argparse names the type in its own message
    return convert


def checked(kind: Callable[[str], Any], check: Check) -> Callable[[str], Any]:
    """argparse's ``type`` for a plain number flag (not a setting): ``kind`` refused by ``check`` as it is parsed
    (``--max-steps``: ``checked(int, at_least(1))``), a usage error like a setting's bad value."""
    return _checked_type(kind, Setting(None, "", check))


def add_parameter_flag(parser: Any, flag: str, function: Callable, help: str, check: Check | None = None,
                       **options: Any) -> None:
    """A flag passed on to ``function``'s parameter of the same name: that parameter's default is the flag's;
    ``check`` refuses a bad value as it is parsed."""
    default = inspect.signature(function).parameters[flag.lstrip("-").replace("-", "_")].default
    options.setdefault("type", type(default) if check is None else checked(type(default), check))
    parser.add_argument(flag, default=default, help=f"{help} (default: {default})".replace("%", "%%"), **options)


def settings_from_args(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``cls`` that ``args`` holds a value for (absent preset flags are None and left out)."""
    return {f.name: getattr(args, f.name) for f in settings_of(cls) if getattr(args, f.name, None) is not None}


def show_progress(args: argparse.Namespace) -> bool:
    """The shared ``--progress/--no-progress``: as given, else on when stderr is a terminal; never with ``-q``."""
    wanted = sys.stderr.isatty() if args.progress is None else args.progress
    return bool(wanted) and not getattr(args, "quiet", False)


def _without_none(kind: Any) -> Any:
    """``int | None`` -> ``int``: a setting whose default None means "decided by the others" takes values of X."""
    members = [k for k in typing.get_args(kind) if k is not type(None)]
    return members[0] if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(members) == 1 else kind


def _help(name: str, spec: Setting, from_preset: bool) -> str:
    text = spec.help.replace("%", "%%")
    default = spec.default.value if isinstance(spec.default, enum.Enum) else spec.default
    shown = json.dumps(default) if isinstance(default, bool) else str(default)
    if from_preset:
        return f"{text} (default: the preset's {name}, else {shown})"
    if (isinstance(default, bool) and spec.const is None) or default is None:
        return text  # a switch: off unless given; None: the help says what decides
    return f"{text} (default: {shown})"

