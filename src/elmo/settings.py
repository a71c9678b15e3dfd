"""Settings declared once: a dataclass field holds the default, and its metadata the help and command-line spelling.

Configuration dataclasses (``TrainConfig``, ``EmbedOptions``, ...) declare every setting a user may pass with
:func:`setting`; ``elmo.cli`` builds its flags and their help from those fields, so that a default, a choice list or
a help line exists in one place. The checks live in each dataclass's ``__post_init__``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from elmo.errors import ConfigError


def setting(
    default: Any, help: str, *, flag: str | None = None, choices: Sequence[str] | None = None,
    metavar: str | None = None, const: Any = None,
) -> Any:
    """A dataclass field that is also a command-line flag.

    Args:
        help: the flag's help line, without the default (the CLI appends it from ``default``).
        flag: the flag when it is not ``--`` + the field name with dashes.
        choices: the allowed values (enums list their own).
        const: the flag takes no value and sets the field to ``const`` (``--full-softmax``: sample_softmax=False).
    """
    metadata = {"help": help, "flag": flag, "choices": choices, "metavar": metavar, "const": const}
    return dataclasses.field(default=default, metadata=metadata)


def settings_of(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared with :func:`setting`, in declaration order."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def flag_of(cls: type, name: str) -> str:
    """The command-line spelling of setting ``name`` of ``cls``."""
    found = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    return (found.metadata.get("flag") if found is not None else None) or "--" + name.replace("_", "-")


class SettingError(ConfigError):
    """A value fails its setting's check: the message names the setting, ``command_line`` spells it as the flag."""

    def __init__(self, name: str, problem: str, flag: str | None = None) -> None:
        super().__init__(f"{name} {problem}")
        self.command_line = f"{flag or '--' + name.replace('_', '-')} {problem}"


def check_at_least(obj: Any, minimum: int, *names: str) -> None:
    """Each of ``obj``'s fields ``names`` is at least ``minimum``."""
    for name in names:
        value = getattr(obj, name)
        if value < minimum:
            raise SettingError(name, f"must be >= {minimum}, got {value}", flag_of(type(obj), name))


def check_choice(obj: Any, name: str, choices: Sequence[str]) -> None:
    value = getattr(obj, name)
    if value not in choices:
        raise SettingError(name, f"must be one of {tuple(choices)}, got {value!r}", flag_of(type(obj), name))
