"""Every (sub)command of ``elmo`` that has a given option, with placeholder values for its required arguments: the
tests that check one option across all commands (``--device``, the biLM options) walk the parser this way."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from elmo.cli import build_parser


def commands_with(is_option: Callable[[argparse.Action], bool]) -> dict[str, tuple[str, list[str]]]:
    """"task train" -> (the matching option's flag, ["task", "train", <placeholders for what is required>])."""
    found = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        required, option = [], None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])
            elif action.option_strings and is_option(action):
                option = action.option_strings[0]
            elif not action.option_strings and action.nargs != 0:
                required.append(action.choices[0] if action.choices else "x")
            elif action.required:
                required += [action.option_strings[0], "x"]
        for group in parser._mutually_exclusive_groups:
            if group.required:
                required.append(group._group_actions[0].option_strings[0])  # a flag such as embed's --all
        if option:
            found[" ".join(words)] = (option, [*words, *required])

    walk(build_parser(), [])
    return found
