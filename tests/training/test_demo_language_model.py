"""The shipped demo is a language model offline: its softmax and vocabulary ship with it, so perplexity,
substitutes and fine-tuning take ``--model demo`` (the numbers are those src/elmo/pretrained/demo/README.md states)."""

from __future__ import annotations

import json

import pytest

from elmo.cli import main
from elmo.formats.published import demo_model_dir
from elmo.training.perplexity import model_perplexity
from tests.conftest import SHARED

pytestmark = pytest.mark.slow

SAMPLE = SHARED / "data" / "lm" / "sample"


def test_held_out_perplexity_is_the_one_the_demo_readme_states(capsys):
    assert main(["perplexity", "--model", "demo", "--data", str(SAMPLE / "sample.valid.txt"), "--rows", "16",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "geometric mean:       94.159" in out  # A Christmas Carol, 16 streams, full softmax
    assert "37242 per direction" in out


def test_the_demo_directory_by_its_path_reads_as_a_model_not_a_run(tmp_path, capsys):
    """It holds a train_config.json, which once made it read as a run 'with no checkpoint yet'."""
    text = tmp_path / "text.txt"
    text.write_text("it was the best of times , it was the worst of times .\n", encoding="utf-8")
    assert main(["perplexity", "--model", str(demo_model_dir()), "--data", str(text), "--device", "cpu"]) == 0
    assert "forward perplexity:" in capsys.readouterr().out


def test_substitutes_from_the_demo(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the old man walked into the room .\n", encoding="utf-8")
    assert main(["substitutes", str(text), "--model", "demo", "--top-k", "3", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines[:8]] == "the old man walked into the room .".split()
    assert all("forward: " in line and "backward: " in line for line in lines[:8])


def test_finetuning_the_demo_with_its_vocabulary_keeps_its_softmax(tmp_path, caplog):
    train = tmp_path / "train.txt"
    train.write_text("".join(open(SAMPLE / "sample.valid.txt", encoding="utf-8").readlines()[:200]), encoding="utf-8")
    valid = tmp_path / "valid.txt"
    valid.write_text("".join(open(SAMPLE / "sample.valid.txt", encoding="utf-8").readlines()[200:260]),
                     encoding="utf-8")
    run = tmp_path / "ft"
    assert main(["finetune", "--model", "demo", "--train", str(train), "--valid", str(valid), "--vocab",
                 str(demo_model_dir() / "vocab.txt"), "--out", str(run), "--config", "tiny", "--max-steps", "1",
                 "--no-progress", "--device", "cpu"]) == 0
    assert "training a new one" not in caplog.text
    recorded = json.loads((run / "finetune.json").read_text())
    rows = json.loads((run / "train_config.json").read_text())["eval_rows"]
    before = model_perplexity("demo", valid, rows=rows, device="cpu")
    assert recorded["before"]["geometric_mean"] == pytest.approx(before.geometric_mean, rel=1e-5)


def test_a_directory_named_demo_here_is_named_in_the_error(tmp_path, monkeypatch, capsys):
    """`elmo demo --output-dir demo` leaves ./demo: a path is taken before a model name, so say so."""
    (tmp_path / "demo").mkdir()
    (tmp_path / "one.txt").write_text("the cat sat .\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["perplexity", "--model", "demo", "--data", "one.txt", "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith(f"; demo here is the directory {tmp_path / 'demo'}, which a path takes "
                                            "before the shipped model's name: run from another directory")
