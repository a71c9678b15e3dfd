"""Exceptions for user mistakes: the CLI prints their message on one line, without a traceback."""


class ElmoError(Exception):
    """A problem with the user's input, files or options; the message says which and what is wrong."""


class ConfigError(ElmoError, ValueError):
    """An options/config file or value is invalid."""


class WeightFileError(ElmoError, ValueError):
    """A weight file does not match its options, or cannot be read."""


class InputFileError(ElmoError, ValueError):
    """A text input file cannot be read as expected (bad encoding, bad format)."""
