"""Every command that takes a biLM (``--model``, or ``--bilm`` of the task commands) takes every spelling ``elmo embed
--model`` takes: a shipped name (``demo``, ``corpus``), a published name (``elmo models``), a directory, an archive.
The language-model commands say in one line which models have a softmax; a task model finds its biLM again from any
working directory (issue #49, items 4 and 7)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import elmo.formats.published as published
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.formats.model_files import save_bilm
from elmo.formats.model_ref import ModelRef
from elmo.formats.softmax_hdf5 import SOFTMAX_FILE
from tests.cli_commands import commands_with
from tests.conftest import random_bilm, write_lm_corpus
from tests.tasks.conftest import write_conll

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "elmo" / "presets" / "tasks"
NO_SOFTMAX = ("has no softmax (softmax.hdf5 + vocab.txt): {command} needs a language model: a run directory of "
              "`elmo train` or `elmo finetune`, its `elmo export`, or the shipped demo (no published model has one; "
              "`elmo finetune --model {model} ...` trains one)")


def commands_with_a_model() -> dict[str, tuple[str, list[str]]]:
    """Every (sub)command with a biLM option. ``task evaluate --model`` is the task model, not a biLM; its ``--bilm``
    is."""
    return commands_with(lambda action: bool({"--model", "--bilm"} & set(action.option_strings))
                         and "task model" not in (action.help or ""))


COMMANDS = commands_with_a_model()


def test_the_commands_that_take_a_model_are_found():
    assert set(COMMANDS) == {"embed", "convert", "dump-token-embeddings", "warm-state", "demo", "serve", "finetune",
                             "perplexity", "substitutes", "task train", "task evaluate", "probe pos", "probe wsd",
                             "neighbours"}
    assert COMMANDS["task train"][0] == COMMANDS["task evaluate"][0] == "--bilm"


class Resolved(ElmoError):
    """Raised where the shared resolution looks a name up, so that no command goes on to real work."""


@pytest.fixture(scope="module")
def task_model(tmp_path_factory) -> Path:
    """A task model trained with ELMo (a random biLM), for ``task evaluate --bilm``."""
    root = tmp_path_factory.mktemp("task")
    bilm = save_bilm(random_bilm(), root / "bilm", native=True)
    ner = write_conll(root / "ner.txt")
    assert main(["-q", "task", "train", "ner", "--config", str(CONFIGS / "ner-tiny.json"), "--train", str(ner),
                 "--dev", str(ner), "--output", str(root / "run"), "--bilm", str(bilm), "--epochs", "1",
                 "--no-progress"]) == 0
    return root / "run"


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_model_option_resolves_names_like_embed(command, task_model, tmp_path, monkeypatch, capsys):
    """``demo`` reaches :meth:`ModelRef.parse` (the one place a spelling becomes a model, what ``elmo embed --model``
    uses) on every command, before any other use of the value; the spy stops the command there."""
    option, args = COMMANDS[command]
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    real = {"embed": [text, tmp_path / "out.hdf5"], "neighbours": ["--word", "cat", "--corpus", text],
            "task train": ["ner", "--config", "ner-tiny", "--train", write_conll(tmp_path / "ner.txt"), "--dev",
                           tmp_path / "ner.txt", "--output", tmp_path / "run"],
            "task evaluate": ["--model", task_model, "--input", write_conll(tmp_path / "ner.txt")]}
    if command in real:  # these check their input files before the model: give them real ones
        args = [*command.split(), *map(str, real[command]), *(["--all"] if command == "embed" else [])]
    elif option in args:  # a required option: its placeholder goes
        del args[args.index(option):args.index(option) + 2]

    def spy(cls, model, **given):
        raise Resolved(f"resolved {model} through ModelRef")

    monkeypatch.setattr(ModelRef, "parse", classmethod(spy))
    assert main([*args, option, "demo"]) == 1
    assert capsys.readouterr().err.strip().endswith("resolved demo through ModelRef")


def test_the_demo_is_the_one_model_with_a_softmax():
    """What the one-line error of perplexity and substitutes says."""
    shipped = published.shipped_models()
    assert [name for name, p in shipped.items() if (p / SOFTMAX_FILE).exists()] == ["demo"] and len(shipped) > 1
    assert not any(SOFTMAX_FILE in entry["files"] for entry in published.read_registry().values())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("model", ["corpus"])
@pytest.mark.parametrize("command", ["perplexity", "substitutes"])
def test_a_shipped_model_without_a_softmax_is_one_line(command, model, corpus, capsys):
    data = ["--data", str(corpus["valid"])] if command == "perplexity" else [str(corpus["valid"])]
    assert main([command, *data, "--model", model, "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err == f"elmo: error: {model} " + NO_SOFTMAX.format(command=command, model=model) + "\n"


def test_a_published_model_is_not_downloaded_to_find_it_has_no_softmax(corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_HOME", str(tmp_path))  # not cached: a download would be tried (and refused offline)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert main(["perplexity", "--model", "small", "--data", str(corpus["valid"])]) == 1
    assert capsys.readouterr().err == "elmo: error: small " + NO_SOFTMAX.format(command="perplexity",
                                                                                model="small") + "\n"


@pytest.mark.slow
def test_finetune_from_demo_then_perplexity_from_another_directory_by_a_relative_path(corpus, tmp_path, monkeypatch,
                                                                                     capsys):
    run = tmp_path / "work" / "ft"
    assert main(["-q", "finetune", "--model", "demo", "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
                 "--out", str(run), "--config", "tiny", "--max-steps", "1", "--no-progress", "--device", "cpu"]) == 0
    assert json.loads((run / "finetune.json").read_text())["model"] == "demo"  # a name stays a name
    assert main(["-q", "export", str(run), str(tmp_path / "work" / "export")]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    for model in (os.path.join("..", "work", "export"), os.path.join("..", "work", "ft")):
        assert main(["perplexity", "--model", model, "--data", str(corpus["valid"]), "--device", "cpu",
                     "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["tokens"] > 0
    assert main(["substitutes", str(corpus["valid"]), "--model", os.path.join("..", "work", "export"), "--device",
                 "cpu", "--json"]) == 0


def _task_train(output: Path, *bilm: str) -> list[str]:
    ner = write_conll(output.parent / "ner.txt")
    return ["-q", "task", "train", "ner", "--config", "ner-tiny", "--train", str(ner), "--dev", str(ner),
            "--output", str(output), "--epochs", "1", "--no-progress", "--device", "cpu", *bilm]


def _evaluate(run: Path, capsys, *extra: str) -> dict:
    unseen = write_conll(run.parent / "unseen.txt", [[("Anna", "B-PER"), ("left", "O"), ("Rome", "B-LOC")]])
    capsys.readouterr()
    assert main(["-q", "task", "evaluate", "--model", str(run), "--input", str(unseen), "--device", "cpu",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize("bilm", [["--bilm", "demo"], []])
def test_task_with_the_demo_biLM_evaluates_from_another_directory(bilm, tmp_path, monkeypatch, capsys, caplog):
    (tmp_path / "train").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "train")
    with caplog.at_level("INFO", logger="elmo"):
        assert main(_task_train(tmp_path / "run", *bilm)) == 0
    assert ("using the small demo biLM shipped with the package" in caplog.text) == (not bilm)
    assert json.loads((tmp_path / "run" / "task.json").read_text())["elmo"]["bilm_dir"] == "demo"
    monkeypatch.chdir(tmp_path / "other")
    assert _evaluate(tmp_path / "run", capsys)["sentences"] == 1


def test_a_task_model_records_its_biLM_path_absolute_and_says_where_a_moved_one_was(tmp_path, monkeypatch, capsys):
    bilm = save_bilm(random_bilm(), tmp_path / "bilms" / "mine", native=True)
    monkeypatch.chdir(tmp_path / "bilms")
    assert main(_task_train(tmp_path / "run", "--bilm", "mine")) == 0  # relative to the working directory
    recorded = json.loads((tmp_path / "run" / "task.json").read_text())["elmo"]["bilm_dir"]
    assert recorded == str(bilm.resolve())
    monkeypatch.chdir(tmp_path)
    assert _evaluate(tmp_path / "run", capsys)["sentences"] == 1

    shutil.move(bilm, tmp_path / "moved")
    unseen = tmp_path / "unseen.txt"
    assert main(["task", "evaluate", "--model", str(tmp_path / "run"), "--input", str(unseen), "--force"]) == 1
    assert capsys.readouterr().err == (f"elmo: error: task model {tmp_path / 'run'} was trained with the biLM "
                                       f"{recorded}, which no longer exists; pass --bilm PATH\n")
    assert _evaluate(tmp_path / "run", capsys, "--bilm", str(tmp_path / "moved"), "--force")["sentences"] == 1


@pytest.mark.slow
def test_a_published_name_stays_a_name(tmp_path, monkeypatch, capsys):
    """A registry model already in the cache: no download; task.json keeps its name."""
    home = tmp_path / "home"
    save_bilm(random_bilm(), home / "models" / "tiny-published")
    registry = {"tiny-published": {"files": {name: {"url": f"https://example.invalid/{name}", "sha256": None}
                                             for name in ("options.json", "weights.hdf5")}}}
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.setenv("ELMO_MODEL_REGISTRY", str(tmp_path / "registry.json"))
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(_task_train(tmp_path / "run", "--bilm", "tiny-published")) == 0
    assert json.loads((tmp_path / "run" / "task.json").read_text())["elmo"]["bilm_dir"] == "tiny-published"
    assert _evaluate(tmp_path / "run", capsys)["sentences"] == 1
    assert main(["perplexity", "--model", "tiny-published", "--data", str(tmp_path / "unseen.txt")]) == 1
    assert "tiny-published has no softmax" in capsys.readouterr().err
