"""Nothing a user made is overwritten unasked, on every command (issue #57).

The commands that write a path are found from the parser, not listed by hand: every output argument is declared with
``elmo.cli.outputs.add_output``, which gives its command ``--force``, and an argument named like an output that is
not declared fails :func:`test_every_argument_named_as_an_output_is_declared_as_one`. Each command found is run
three ways: over an existing output (refused with one line, exit 1, before the model loads, the file byte for byte
as it was), over one of its own inputs (refused, even with ``--force``, the input untouched), and with ``--force``
(it replaces the output). A new command that writes a path fails :func:`test_each_writing_command_has_a_recipe`
until it is given a recipe here.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from elmo.cli import build_parser, main
from elmo.cli.outputs import DIRECTORY, FILE
from elmo.embedding.demo import DEMO_FILES, SENTENCES_FILE
from elmo.formats.model_files import save_bilm
from elmo.formats.published import PRETRAINED_DIR
from elmo.formats.warm_state import WARM_STATE_FILE
from tests.conftest import random_bilm, write_lm_corpus
from tests.tasks.conftest import write_conll

OUTPUT_NAMES = re.compile(r"^((out|output)(_dir|_file|_path)?|predictions)$")
"""Destinations of arguments that name what a command writes (``output``, ``--out``, ``out_dir``, ``--output-dir``,
``--predictions``); ``output_format`` and the like do not match."""


def all_commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser, by its words (``task train``)."""
    found = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subcommands:
            for name, sub in action.choices.items():
                walk(sub, [*words, name])
        if not subcommands:
            found[" ".join(words)] = parser

    walk(build_parser(), [])
    return found


def writing_commands() -> dict[str, argparse.ArgumentParser]:
    """The commands that may replace what a path holds: those with ``--force``."""
    return {name: parser for name, parser in all_commands().items() if "--force" in parser._option_string_actions}


def test_every_argument_named_as_an_output_is_declared_as_one():
    undeclared = [f"{name}: {action.option_strings or action.dest}" for name, parser in all_commands().items()
                  for action in parser._actions if OUTPUT_NAMES.search(action.dest) and not hasattr(action, "output")]
    assert undeclared == []
    declared = {name for name, parser in all_commands().items() if any(hasattr(a, "output") for a in parser._actions)}
    assert declared <= set(writing_commands())  # add_output gave each of them --force


@dataclass(frozen=True)
class World:
    """Real inputs every recipe draws from (made once for the module)."""

    tmp: Path
    model: Path  # a native model directory
    text: Path
    corpus: dict[str, Path]
    ner: Path
    run: Path  # a training run (elmo train, 1 step)
    task_model: Path  # a task model (elmo task train)


@dataclass(frozen=True)
class Recipe:
    """How to run a command that writes ``out``, and which of its inputs to give as its output."""

    argv: Callable[[World, Path], list[str]]
    own_input: Callable[[World], Path]
    kind: str = FILE
    needs: str | None = None  # a module of an optional extra


def _train(w: World, out: Path) -> list[str]:
    return ["train", "--config", "tiny", "--train", str(w.corpus["train"]), "--vocab", str(w.corpus["vocab"]),
            "--out", str(out), "--max-steps", "1", "--no-progress", "--device", "cpu"]


def _task_train(w: World, out: Path) -> list[str]:
    return ["task", "train", "ner", "--config", "ner-tiny", "--train", str(w.ner), "--dev", str(w.ner), "--output",
            str(out), "--no-elmo", "--epochs", "1", "--no-progress", "--device", "cpu"]


RECIPES: dict[str, Recipe] = {
    "embed": Recipe(lambda w, out: ["embed", str(w.text), str(out), "--top", "--model", str(w.model)],
                    lambda w: w.text),
    "convert": Recipe(lambda w, out: ["convert", "--model", str(w.model), str(out)], lambda w: w.model, DIRECTORY),
    "dump-token-embeddings": Recipe(lambda w, out: ["dump-token-embeddings", "--model", str(w.model), "--vocab",
                                                    str(w.corpus["vocab"]), str(out)], lambda w: w.corpus["vocab"]),
    "demo": Recipe(lambda w, out: ["demo", "--model", str(w.model), "--output-dir", str(out)], lambda w: w.model,
                   "demo"),
    "warm-state": Recipe(lambda w, out: ["warm-state", "--model", str(out.parent)], lambda w: w.model, "warm-state"),
    "vocab": Recipe(lambda w, out: ["vocab", str(w.corpus["train"]), "-o", str(out)], lambda w: w.corpus["train"]),
    "train": Recipe(_train, lambda w: w.corpus["vocab"], DIRECTORY),
    "finetune": Recipe(lambda w, out: ["finetune", "--model", "demo", *_train(w, out)[1:]], lambda w: w.corpus["train"],
                       DIRECTORY),
    "export": Recipe(lambda w, out: ["export", str(w.run), str(out)], lambda w: w.run, DIRECTORY),
    "task train": Recipe(_task_train, lambda w: w.ner, DIRECTORY, needs="seqeval"),
    "task evaluate": Recipe(lambda w, out: ["task", "evaluate", "--model", str(w.task_model), "--input", str(w.ner),
                                            "--predictions", str(out), "--device", "cpu", "--no-progress"],
                            lambda w: w.ner, needs="seqeval"),
    "task word-vectors": Recipe(lambda w, out: ["task", "word-vectors", "--corpus", str(w.corpus["train"]), "--output",
                                                str(out), "--min-count", "1", "--epochs", "1", "--dim", "8"],
                                lambda w: w.corpus["train"], needs="gensim"),
}


def test_each_writing_command_has_a_recipe():
    found = writing_commands()
    print(f"{len(found)} commands write a path: {', '.join(sorted(found))}")
    assert set(found) == set(RECIPES)
    assert len(found) == 12


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    tmp = tmp_path_factory.mktemp("world")
    text = tmp / "in.txt"
    (tmp / "corpus").mkdir()
    text.write_text("the cat sat .\nthe dog ran .\n", encoding="utf-8")
    w = World(tmp=tmp, model=save_bilm(random_bilm(), tmp / "model"), text=text,
              corpus=write_lm_corpus(tmp / "corpus"), ner=write_conll(tmp / "ner.txt"), run=tmp / "run",
              task_model=tmp / "task")
    assert main(["-q", *_train(w, w.run)]) == 0
    try:
        import seqeval  # noqa: F401
    except ImportError:
        return w
    assert main(["-q", *_task_train(w, w.task_model)]) == 0
    return w


def _snapshot(path: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``path`` (or ``path`` itself): its bytes and modification time."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmo: error: "), err
    return err[0]


def _without_model(argv: list[str], missing: Path) -> list[str]:
    """``argv`` with its ``--model`` naming nothing: a refusal that comes before the model loads still says only
    what it must; one that came after would name the missing model."""
    return [str(missing) if i and argv[i - 1] == "--model" else a for i, a in enumerate(argv)]


def _existing(recipe: Recipe, out: Path) -> Path:
    """Put a user's own file where ``recipe`` writes ``out``; returns the path the refusal names."""
    if recipe.kind == FILE:
        out.write_text("the user's own file\n")
        return out
    out.mkdir(parents=True, exist_ok=True)
    mine = out / {"demo": SENTENCES_FILE, "warm-state": WARM_STATE_FILE}.get(recipe.kind, "notes.txt")
    mine.write_text("the user's own file\n")
    return out if recipe.kind == DIRECTORY else mine


def _recipe(command: str, tmp_path: Path, monkeypatch) -> Recipe:
    """``command``'s recipe, with its extra installed (else the test is skipped) and a cache of its own."""
    recipe = RECIPES[command]
    if recipe.needs:
        pytest.importorskip(recipe.needs)
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "elmo_home"))
    return recipe


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RECIPES))
def test_an_existing_output_is_refused_then_replaced_with_force(command, world, tmp_path, capsys, monkeypatch):
    recipe = _recipe(command, tmp_path, monkeypatch)
    if recipe.kind == "warm-state":  # its output is the model's own directory: a copy of the model
        out = save_bilm(random_bilm(), tmp_path / "model") / WARM_STATE_FILE
        where = recipe.argv(world, out)
    else:
        out = tmp_path / ("out.txt" if recipe.kind == FILE else "out")
        where = _without_model(recipe.argv(world, out), tmp_path / "no-such-model")
    named = _existing(recipe, out if recipe.kind != "warm-state" else out.parent)
    before = _snapshot(out)
    capsys.readouterr()
    assert main(where) == 1
    what = "exists and is not empty" if recipe.kind == DIRECTORY else "exists"
    assert _one_error_line(capsys) == f"elmo: error: {named} {what}; pass --force to replace it"
    assert _snapshot(out) == before
    assert main(["-q", *recipe.argv(world, out), "--force"]) == 0
    after = _snapshot(out)
    assert after and all(after.get(path, (None,))[0] != content for path, (content, _) in before.items())
    if recipe.kind == DIRECTORY:
        assert not (out / "notes.txt").exists()  # replaced as a whole
    if recipe.kind == "demo":
        assert sorted(p.name for p in out.iterdir()) == sorted(DEMO_FILES)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RECIPES))
def test_an_output_that_is_an_input_is_refused_even_with_force(command, world, tmp_path, capsys, monkeypatch):
    recipe = _recipe(command, tmp_path, monkeypatch)
    if recipe.kind == "warm-state":  # its input is the model: a shipped one is read-only, the state goes elsewhere
        shipped = PRETRAINED_DIR / "demo"
        before = _snapshot(shipped)
        assert main(["-q", "warm-state", "--model", "demo", "--force"]) == 0
        assert _snapshot(shipped) == before
        stored = list((tmp_path / "elmo_home" / "warm-state").glob(f"*/{WARM_STATE_FILE}"))
        assert len(stored) == 1
        from elmo.formats.model_ref import ModelRef

        assert ModelRef.parse("demo").load().warm_state is not None  # loading finds it
        return
    if recipe.kind == "demo":  # an original-format model whose weights file has the name the demo writes
        source = save_bilm(random_bilm(), tmp_path / "original")
        given = source / DEMO_FILES[1]
        (source / "weights.hdf5").rename(given)
        argv = ["demo", "--options-file", str(source / "options.json"), "--weight-file", str(given),
                "--output-dir", str(source)]
    else:
        given = recipe.own_input(world)
        argv = recipe.argv(world, given)
    before = _snapshot(given)
    capsys.readouterr()
    assert main([*argv, "--force"]) == 1
    line = _one_error_line(capsys)
    assert line.startswith(f"elmo: error: {given}: is also ") and ", an input of this command; " in line, line
    assert _snapshot(given) == before


def test_an_input_inside_a_directory_force_would_replace_is_refused(world, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    vocab = out / "vocab.txt"
    vocab.write_bytes(world.corpus["vocab"].read_bytes())
    argv = _train(world, out)
    argv[argv.index("--vocab") + 1] = str(vocab)
    assert main([*argv, "--force"]) == 1
    assert _one_error_line(capsys) == f"elmo: error: {out}: holds {vocab} (--vocab), an input of this command; " \
                                      "--force would delete it: move it first or give another output"
    assert vocab.read_bytes() == world.corpus["vocab"].read_bytes()


def test_a_glob_that_matches_the_output_is_refused(world, tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(world.corpus["train"].read_bytes())
    assert main(["vocab", str(tmp_path / "c*.txt"), "-o", str(corpus), "--force"]) == 1
    assert "is also corpus, an input of this command" in _one_error_line(capsys)
    assert corpus.read_bytes() == world.corpus["train"].read_bytes()


def test_nothing_is_written_into_the_installed_package(world, capsys):
    out = PRETRAINED_DIR / "demo" / "token_embeddings.hdf5"
    assert main(["dump-token-embeddings", "--vocab", str(world.corpus["vocab"]), str(out)]) == 1
    assert "inside the installed elmo package" in _one_error_line(capsys)
    assert not out.exists()


def test_a_directory_that_cannot_be_written_is_refused_before_the_model_loads(world, tmp_path, capsys):
    """/proc takes no new file, for root too (whose permission bits say it may write anywhere)."""
    assert main(["embed", str(world.text), "/proc/out.hdf5", "--top", "--model", str(tmp_path / "no-such-model")]) == 1
    assert _one_error_line(capsys).startswith("elmo: error: /proc/out.hdf5: cannot write in /proc (")
