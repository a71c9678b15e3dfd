"""``elmo task ...`` end to end on tiny files: word vectors -> train -> evaluate a new file; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.tasks import TASK_KINDS, read_word_vectors
from tests.tasks.conftest import NER_SENTENCES, SST_LINES, write_conll, write_sst
from tests.tasks.test_config_and_data import BAD_VALUES, bad_config

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets" / "tasks"


def _corpus(path: Path) -> Path:
    lines = [" ".join(w for w, _ in s) for s in NER_SENTENCES] + [text for _, text in SST_LINES]
    path.write_text("\n".join(lines * 5) + "\n")
    return path


def test_word_vectors_train_ner_and_evaluate_an_unseen_file(tmp_path, ner_file, bilm_dir, capsys):
    vectors = tmp_path / "vectors.txt"
    assert main(["-q", "task", "word-vectors", "--corpus", str(_corpus(tmp_path / "c.txt")), "--output", str(vectors),
                 "--dim", "8", "--epochs", "1", "--workers", "1"]) == 0
    words, matrix = read_word_vectors(vectors)
    assert "Paris" in words and matrix.shape == (len(words), 8)

    run = tmp_path / "run"
    assert main(["-q", "task", "train", "ner", "--config", str(CONFIGS / "ner-tiny.json"), "--train", str(ner_file),
                 "--dev", str(ner_file), "--output", str(run), "--bilm", str(bilm_dir),
                 "--word-vectors", str(vectors), "--cache", str(tmp_path / "acts.h5")]) == 0
    assert {"model.safetensors", "task.json", "result.json", "predictions.dev.txt"} <= {p.name for p in run.iterdir()}

    unseen = write_conll(tmp_path / "unseen.txt", [[("Anna", "B-PER"), ("left", "O"), ("Rome", "B-LOC")]])
    capsys.readouterr()
    assert main(["-q", "task", "evaluate", "--model", str(run), "--input", str(unseen)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 1 and 0 <= report["f1"] <= 100
    lines = Path(report["predictions"]).read_text().split("\n")
    assert lines[0].split()[:2] == ["Anna", "B-PER"] and len(lines[0].split()) == 3


@pytest.mark.slow
def test_train_and_evaluate_sst_on_the_fly(tmp_path, sst_file, bilm_dir, capsys):
    run = tmp_path / "run"
    assert main(["-q", "task", "train", "sst", "--config", str(CONFIGS / "sst-tiny.json"), "--train", str(sst_file),
                 "--dev", str(sst_file), "--test", str(sst_file), "--output", str(run), "--bilm", str(bilm_dir),
                 "--on-the-fly"]) == 0
    other = write_sst(tmp_path / "other.tsv", [("4", "wonderful film"), ("0", "dull plot")])
    capsys.readouterr()
    assert main(["-q", "task", "evaluate", "--model", str(run), "--input", str(other), "--predictions",
                 str(tmp_path / "p.tsv")]) == 0
    assert "accuracy" in json.loads(capsys.readouterr().out)
    assert len((tmp_path / "p.tsv").read_text().splitlines()) == 2


def test_errors_are_one_line(tmp_path, ner_file, sst_file, capsys):
    config = str(CONFIGS / "ner-tiny.json")
    assert main(["task", "train", "sst", "--config", config, "--train", str(sst_file), "--dev", str(sst_file),
                 "--output", str(tmp_path / "r"), "--no-elmo"]) == 1
    assert "is a 'ner' config" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("EU B-ORG\nrejects\n")
    assert main(["task", "train", "ner", "--config", config, "--train", str(bad), "--dev", str(ner_file),
                 "--output", str(tmp_path / "r"), "--no-elmo"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("elmo: error:") and f"{bad}, line 2" in err and "\n" not in err
    # without --bilm the shipped demo biLM is used, as by `elmo embed`: tests/test_model_spellings.py


@pytest.mark.parametrize("section, error", BAD_VALUES)
def test_a_bad_config_file_is_one_line_and_no_run_directory(section, error, tmp_path, ner_file, capsys):
    config = bad_config(tmp_path / "ner.json", section)
    run = tmp_path / "run"
    assert main(["task", "train", "ner", "--config", str(config), "--train", str(ner_file), "--dev", str(ner_file),
                 "--output", str(run), "--no-elmo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"elmo: error: {config}: {error}") and err.count("\n") == 1
    assert not run.exists()


def test_a_bad_override_flag_is_named_as_the_flag(tmp_path, ner_file, capsys):
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as raised:  # a usage error: the config key's check runs as the flag is parsed
        main(["task", "train", "ner", "--config", "ner-tiny", "--train", str(ner_file), "--dev", str(ner_file),
              "--output", str(run), "--no-elmo", "--epochs", "0"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == "elmo task train: error: argument --epochs: must be >= 1, got 0 (see elmo " \
                                      "task train --help)\n"
    assert not run.exists()


def test_an_unknown_task_kind_on_the_command_line_lists_the_known_kinds(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["task", "train", "pos", "--config", "x", "--train", "t", "--dev", "d", "--output", "o"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "invalid choice: 'pos'" in err and all(name in err for name in TASK_KINDS)
