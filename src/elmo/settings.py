"""Settings declared once: default, help, check and command-line spelling in one :class:`Setting`.

A configuration dataclass (``TrainConfig``, ``EmbedOptions``, ``ServeOptions``, the task config's sections) declares
each field a user may set with :func:`setting` (or with a shared :class:`Setting`'s :meth:`~Setting.field`), and
calls :func:`check_settings` in ``__post_init__``. From that one declaration come the flag and its help
(``elmo.cli.setting_flags``), the JSON/preset key (the field name) and the check, so a config file, a flag and a
Python keyword argument are refused by the same words. Settings several parts share (precision, device, the
padded-token budget, progress, seed) are single :class:`Setting` objects in :mod:`elmo.shared_settings`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from elmo.errors import ConfigError

Check = Callable[[Any], Any]
"""A value -> the value to keep (checks may normalise: ``"bf16"`` -> ``Precision.BF16``); raises ``ValueError``
with the problem (``"must be >= 1, got 0"``) when the value is refused."""

_KEEP = object()


@dataclass(frozen=True)
class Setting:
    """One user setting: its default, help line, check and command-line spelling.

    Attributes:
        help: the flag's help line, without the default (the CLI appends it from ``default``).
        check: refuses bad values (see :data:`Check`); ``choices`` and bool/number types are checked without one.
        flag: the flag when it is not ``--`` + the field name with dashes; ``""``: a config key with no flag (a
            value only a file sets).
        choices: the allowed values (an enum-typed field lists its members itself).
        const: the flag takes no value and sets the field to ``const`` (``--full-softmax``: sample_softmax=False).
    """

    default: Any
    help: str
    check: Check | None = None
    flag: str | None = None
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None
    const: Any = None

    def field(self, default: Any = _KEEP) -> Any:
        """This setting as a dataclass field; ``default`` replaces its default where one part differs (training
        keeps ``precision="auto"`` while embedding defaults to ``fp32``): still one declaration."""
        chosen = self if default is _KEEP else dataclasses.replace(self, default=default)
        return dataclasses.field(default=chosen.default, metadata={"setting": chosen})

    def flag_for(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")


def setting(
    default: Any, help: str, *, check: Check | None = None, flag: str | None = None,
    choices: Sequence[Any] | None = None, metavar: str | None = None, const: Any = None,
) -> Any:
    """A dataclass field that is also a command-line flag and a config key (see :class:`Setting`)."""
    return Setting(default, help, check, flag, None if choices is None else tuple(choices), metavar, const).field()


def settings_of(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared as settings, in declaration order."""
    return [f for f in dataclasses.fields(cls) if "setting" in f.metadata]


def setting_of(field: dataclasses.Field) -> Setting:
    return field.metadata["setting"]


def flag_of(cls: type, name: str) -> str:
    """The command-line spelling of setting ``name`` of ``cls``."""
    found = {f.name: f for f in settings_of(cls)}.get(name)
    return setting_of(found).flag_for(name) if found is not None else "--" + name.replace("_", "-")


class SettingError(ConfigError):
    """A value fails its setting's check: the message names the setting (the config key), ``command_line`` spells
    it as the flag."""

    def __init__(self, name: str, problem: str, flag: str | None = None) -> None:
        super().__init__(f"{name} {problem}")
        self.command_line = f"{flag or '--' + name.replace('_', '-')} {problem}"


def check_settings(obj: Any, prefix: str = "") -> None:
    """Check (and normalise) every setting of the dataclass ``obj``: type, choices, then the setting's own check.
    ``prefix`` names the config section in messages (``"elmo."``). Frozen dataclasses are fine."""
    kinds = {f.name: f.type for f in dataclasses.fields(obj)}
    for field in settings_of(type(obj)):
        spec, value = setting_of(field), getattr(obj, field.name)
        try:
            new = _checked(spec, kinds[field.name], value)
        except ValueError as e:
            raise SettingError(prefix + field.name, str(e), spec.flag_for(field.name)) from None
        if new is not value:
            object.__setattr__(obj, field.name, new)


def check_value(spec: Setting, value: Any) -> None:
    """The checks of ``spec`` that one value fails on its own (its type's range, the setting's own check), raising
    ``ValueError`` with the problem: what the CLI runs as it parses a flag, so that a bad value is a usage error (exit
    status 2) like any other argument mistake. Choices are left to the caller (argparse lists them)."""
    _checked(dataclasses.replace(spec, choices=None), type(value).__name__, value)


def _checked(spec: Setting, kind: Any, value: Any) -> Any:
    annotation = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if value is None and spec.default is None:
        return value
    if annotation == "bool" and not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    if annotation.startswith("int") and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise ValueError(f"must be a whole number, got {value!r}")
    if annotation.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"must be a number, got {value!r}")
        if not _finite(value):
            raise ValueError(f"must be a finite number, got {_shown(value)}")
    if spec.choices is not None and value not in spec.choices:
        raise ValueError(f"must be one of {', '.join(map(str, spec.choices))}; got {value!r}")
    return value if spec.check is None else spec.check(value)


# ------------------------------------------------------------------ checks


def at_least(minimum: float) -> Check:
    """A finite number >= ``minimum``."""

    def check(value: Any) -> Any:
        if not _finite(value) or value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value!r}")
        return value

    return check


def greater_than(minimum: float) -> Check:
    """A finite number > ``minimum``."""

    def check(value: Any) -> Any:
        if not _finite(value) or value <= minimum:
            raise ValueError(f"must be > {minimum}, got {value!r}")
        return value

    return check


def fraction(upper_open: bool = True, lower_open: bool = False) -> Check:
    """A number in [0, 1) (dropout, probabilities of a change), or [0, 1] with ``upper_open=False``; ``lower_open``:
    0 excluded (a share of the data)."""

    def check(value: Any) -> Any:
        if not _finite(value) or (value <= 0 if lower_open else value < 0) or (value >= 1 if upper_open else value > 1):
            raise ValueError(f"must be in {'(' if lower_open else '['}0, 1{')' if upper_open else ']'}, got {value!r}")
        return value

    return check


def _finite(value: Any) -> bool:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float (JSON allows 1 followed by 400 zeros)
        return False


def _shown(value: Any) -> str:
    """``value`` for a message: a number of hundreds of digits cut to its start."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:32]}... ({len(text)} characters)"


# ------------------------------------------------------------------ config files


def check_keys(data: Any, allowed: Collection[str], source: str, prefix: str = "") -> None:
    """Every config file's key check: ``data`` is a JSON object with no key outside ``allowed``; the error names
    the file and the key with its section (``ner.json: unknown key 'elmo.dropuot' (known: ...)``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{prefix.rstrip('.') or 'top level'}' must be a JSON object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{source}: unknown key '{prefix}{unknown[0]}' (known: {', '.join(sorted(allowed))})")


def split_settings(settings: Mapping[str, Any], classes: Sequence[type], where: str) -> list[dict[str, Any]]:
    """Keyword arguments -> one dict per settings dataclass of ``classes`` (by field name); an unknown name is one
    line listing the known ones. For an API that takes the fields of several settings classes as keywords
    (``ElmoPredictor``, ``elmo_udf``)."""
    parts: list[dict[str, Any]] = [{} for _ in classes]
    owner = {f.name: i for i, cls in reversed(list(enumerate(classes))) for f in dataclasses.fields(cls)}
    for name, value in settings.items():
        if name not in owner:
            raise ConfigError(f"{where}: unknown setting {name!r} (known: model, device, {', '.join(sorted(owner))})")
        parts[owner[name]][name] = value
    return parts
