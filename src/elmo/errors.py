"""Exceptions for user mistakes: the CLI prints their message on one line, without a traceback."""


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
