"""User mistakes on every command: a non-zero exit and one ``elmo: error:`` line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elmo.cli import main
from tests.faults.conftest import train_args

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets"


def _mistakes(tmp: Path, corpus: dict[str, Path], model: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, a fragment the error line must contain); the files are made by :func:`_make_files`."""
    text = str(corpus["valid"])
    return {
        "embed: missing input": (["embed", "--all", "--model", str(model), str(tmp / "none.txt"), str(tmp / "o.h5")],
                                 "no such input file"),
        "embed: missing model": (["embed", "--all", "--model", str(tmp / "nomodel"), text, str(tmp / "o.h5")],
                                 "nomodel"),
        "embed: half a model": (["embed", "--all", "--options-file", str(model / "options.json"), text,
                                 str(tmp / "o.h5")], "go together"),
        "convert: missing model": (["convert", "--model", str(tmp / "nomodel"), str(tmp / "conv")], "nomodel"),
        "vocab: missing corpus": (["vocab", str(tmp / "nocorpus*.txt"), "-o", str(tmp / "v.txt")], "nocorpus"),
        "train: unknown preset": (["train", "--config", "huge", "--train", text, "--vocab", str(corpus["vocab"]),
                                   "--out", str(tmp / "r1")], "no such preset"),
        "train: malformed preset": (["train", "--config", str(tmp / "bad.json"), "--train", text, "--vocab",
                                     str(corpus["vocab"]), "--out", str(tmp / "r2")], "bad.json"),
        "train: unknown key": (["train", "--config", str(tmp / "unknown-key.json"), "--train", text, "--vocab",
                                str(corpus["vocab"]), "--out", str(tmp / "r3")], "unknown key 'lr'"),
        "train: missing vocab": (train_args(dict(corpus, vocab=tmp / "novocab.txt"), tmp / "r4")[1:],
                                 "novocab.txt"),
        "perplexity: missing model": (["perplexity", "--model", str(tmp / "nomodel"), "--data", text], "nomodel"),
        "perplexity: model without softmax": (["perplexity", "--model", str(model), "--data", text],
                                              "has no softmax (softmax.hdf5 + vocab.txt)"),
        "export: no checkpoint": (["export", str(tmp / "empty-run"), str(tmp / "exported")], "empty-run"),
        "task train: missing config": (["task", "train", "ner", "--config", str(tmp / "nocfg.json"), "--train", text,
                                        "--dev", text, "--output", str(tmp / "t1"), "--no-elmo"], "nocfg.json"),
        "task train: malformed data": (["task", "train", "ner", "--config", str(CONFIGS / "tasks" / "ner-tiny.json"),
                                        "--train", str(tmp / "tagging.txt"), "--dev", str(tmp / "tagging.txt"),
                                        "--output", str(tmp / "t2"), "--no-elmo"], "tagging.txt"),
        "task evaluate: missing model": (["task", "evaluate", "--model", str(tmp / "nomodel"), "--input", text,
                                          "--predictions", str(tmp / "pred.txt")], "nomodel"),
    }


def _make_files(tmp: Path) -> None:
    (tmp / "bad.json").write_text('{"lstm": {"dim": 8,\n "oops"}}')
    (tmp / "unknown-key.json").write_text(json.dumps({**json.loads((CONFIGS / "tiny.json").read_text()), "lr": 1}))
    (tmp / "empty-run").mkdir()
    (tmp / "tagging.txt").write_text("EU B-ORG\nrejects\n")  # second line has no label column


CASES = list(_mistakes(Path("/x"), {"train": Path("/x"), "valid": Path("/x"), "vocab": Path("/x")}, Path("/x")))


@pytest.mark.parametrize("case", CASES)
def test_user_mistakes_give_one_line_and_no_traceback(case, corpus, tiny_model, tmp_path, capsys):
    _make_files(tmp_path)
    argv, fragment = _mistakes(tmp_path, corpus, tiny_model)[case]
    code = main(argv)  # an exception escaping here is a traceback the user would have seen
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert err and err[-1].startswith("elmo: error: ") and fragment in err[-1], err
    assert not any(line.startswith("Traceback") for line in err)


ARGUMENT_MISTAKES = {
    "no command": ([], "elmo: error: the following arguments are required: COMMAND (see elmo --help)"),
    "two layer choices": (["embed", "in.txt", "out.hdf5", "--all", "--top"],
                          "elmo embed: error: argument --top: not allowed with argument --all (see elmo embed --help)"),
    "not a number": (["vocab", "c.txt", "-o", "v.txt", "--min-count", "two"],
                     "elmo vocab: error: argument --min-count: invalid int value: 'two' (see elmo vocab --help)"),
    "missing flags of a sub-subcommand": (
        ["task", "evaluate"],
        "elmo task evaluate: error: the following arguments are required: --model, --input "
        "(see elmo task evaluate --help)",
    ),
    "unknown flag": (["embed", "in.txt", "out.hdf5", "--all", "--nope"],
                     "elmo embed: error: unrecognized arguments: --nope (see elmo embed --help)"),
    # a value its flag refuses: the setting's own check, run as the flag is parsed
    "zero batch": (["embed", "in.txt", "out.hdf5", "--all", "--batch-size", "0"],
                   "elmo embed: error: argument --batch-size: must be >= 1, got 0 (see elmo embed --help)"),
    "not a layer": (["embed", "in.txt", "out.hdf5", "--layer", "foo"],
                    "elmo embed: error: argument --layer: must be one of all, top, average, mix or a layer index 0, "
                    "1, ...; got 'foo' (see elmo embed --help)"),
    "zero workers": (["serve", "--workers", "0"],
                     "elmo serve: error: argument --workers: must be >= 1, got 0 (see elmo serve --help)"),
    "zero steps": (["train", "--train", "t.txt", "--vocab", "v.txt", "--out", "run", "--max-steps", "0"],
                   "elmo train: error: argument --max-steps: must be >= 1, got 0 (see elmo train --help)"),
    "a share above one": (["task", "train", "ner", "--config", "ner", "--train", "t", "--dev", "d", "--output", "o",
                           "--train-fraction", "2"],
                          "elmo task train: error: argument --train-fraction: must be in (0, 1], got 2.0 "
                          "(see elmo task train --help)"),
    "not finite": (["embed", "in.txt", "out.hdf5", "--layer", "mix", "--mix-weights", "0,0,0", "--mix-gamma", "nan"],
                   "elmo embed: error: argument --mix-gamma: must be a finite number, got nan (see elmo embed --help)"),
    "carry served": (["serve", "--initial-state", "carry"],
                     "elmo serve: error: argument --initial-state: invalid choice: 'carry' (choose from 'zero', "
                     "'warm') (see elmo serve --help)"),
}


@pytest.mark.parametrize("case", list(ARGUMENT_MISTAKES))
def test_argument_mistakes_are_one_line_not_the_usage_block(case, capsys):
    argv, expected = ARGUMENT_MISTAKES[case]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [expected]
