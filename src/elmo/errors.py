"""Exceptions for user mistakes: the CLI prints their message on one line, without a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike


class ElmoError(Exception):
    """A problem with the user's input, files or options; the message says which and what is wrong."""

    exit_code = 1


class ConfigError(ElmoError, ValueError):
    """An options/config file or value is invalid."""


class UsageError(ConfigError):
    """A command line that says too little or contradicts itself: exit 2, as argparse's own usage errors."""

    exit_code = 2


class WeightFileError(ElmoError, ValueError):
    """A weight file does not match its options, or cannot be read."""


class InputFileError(ElmoError, ValueError):
    """A text input file cannot be read as expected (bad encoding, bad format)."""


class UnexpectedFileError(ElmoError, ValueError):
    """A reader met something in a file that none of its own checks names (the exception is chained): the one line
    of :func:`reading`, the safety net of the public loaders, so that no file ends in a traceback. Each one is a
    check missing from that reader; ``tests/faults/test_fuzz_readers.py`` hunts for them."""


class OutputWriteError(ElmoError, OSError):
    """An output or checkpoint could not be written (disk full, file-size limit, permissions); earlier ones are kept."""


class TrainingDiverged(ElmoError, ArithmeticError):
    """Training kept producing a non-finite loss or gradient; no weights were written from that state."""


class MissingExtraError(ElmoError, ImportError):
    """A feature needs a package of an optional extra that is not installed; the message names the pip command."""

    exit_code = 1


class Interrupted(ElmoError):
    """SIGINT/SIGTERM: the job stopped cleanly and can continue with --resume."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signal_number


@contextmanager
def reading(path: str | PathLike[str], what: str = "file") -> Iterator[None]:
    """The safety net of the public readers: inside the block, an exception that is not one of ours becomes an
    :class:`UnexpectedFileError` naming ``path``; ours pass, and so does an ``OSError`` of the system (one with an
    errno: a permission, a full disk), which names its own file."""
    try:
        yield
    except ElmoError:
        raise
    except Exception as e:  # noqa: BLE001 - the net: anything a reader let through
        if isinstance(e, OSError) and e.errno is not None:
            raise
        raise UnexpectedFileError(f"{path}: cannot read this {what} ({unexpected(e)})") from e


def unexpected(error: BaseException) -> str:
    """An exception that is not one of ours, as one line: its type and the first line of its message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
