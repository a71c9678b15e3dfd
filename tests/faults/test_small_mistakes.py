"""Small things a user meets (issue #49): each answer is one clear line, an honest exit status, no noise."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

import elmo
from elmo.cli import main
from tests.faults.conftest import env as fault_env

PRESETS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets"


def test_allennlp_style_paths_to_elmo_Elmo_are_one_clear_type_error(tiny_model):
    with pytest.raises(TypeError) as raised:
        elmo.Elmo(str(tiny_model / "options.json"), str(tiny_model / "weights.hdf5"), 2)
    message = str(raised.value)
    assert "\n" not in message
    assert "from elmo.allennlp import Elmo" in message and "elmo.Elmo(elmo.load_bilm(path)" in message
    with pytest.raises(TypeError, match="from elmo.allennlp import Elmo"):
        elmo.Elmo(tiny_model / "options.json", tiny_model / "weights.hdf5", 2)  # a Path too
    assert elmo.Elmo(elmo.load_bilm(tiny_model), 2).num_output_representations == 2  # the right way still works


def _embed(model: Path, text: Path, out: Path, *extra: str) -> int:
    return main(["embed", str(text), str(out), "--all", "--model", str(model), *extra])


def test_resume_of_a_complete_output_says_so_and_leaves_it_alone(tiny_model, corpus, tmp_path, caplog):
    out = tmp_path / "out.hdf5"
    assert _embed(tiny_model, corpus["valid"], out) == 0
    assert not (tmp_path / "out.hdf5.parts").exists()
    before, stat = out.read_bytes(), out.stat()
    caplog.clear()
    with caplog.at_level("INFO", logger="elmo"):
        assert _embed(tiny_model, corpus["valid"], out, "--resume") == 0
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("elmo")]
    assert f"{out} is complete: nothing to resume" in lines and not any("embedded" in m for m in lines), lines
    assert out.stat().st_mtime_ns == stat.st_mtime_ns and out.read_bytes() == before
    # how the parts were cut does not change a finished output's vectors: still nothing to do
    assert _embed(tiny_model, corpus["valid"], out, "--resume", "--chunk-size", "7") == 0
    assert out.stat().st_mtime_ns == stat.st_mtime_ns


def test_resume_of_a_complete_output_with_other_settings_or_input_is_refused(tiny_model, corpus, tmp_path, capsys):
    out = tmp_path / "out.hdf5"
    assert _embed(tiny_model, corpus["valid"], out) == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert _embed(tiny_model, corpus["valid"], out, "--resume", "--dtype", "float16") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("elmo: error: --resume: ") and "'dtype'" in err[-1], err
    assert "rerun with --force instead of --resume to replace it" in err[-1]
    other = tmp_path / "other.txt"
    other.write_text("a b c\n")
    assert _embed(tiny_model, other, out, "--resume") == 1
    assert "setting 'input" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_resume_of_an_output_of_an_earlier_version_is_refused_not_redone(tiny_model, corpus, tmp_path, capsys):
    out = tmp_path / "out.hdf5"
    assert _embed(tiny_model, corpus["valid"], out) == 0
    with h5py.File(out, "a") as f:  # what outputs written before the settings were stored look like
        del f.attrs["embed_settings"]
        assert len(f) == 21  # 20 sentences and sentence_to_index: still readable as before
    capsys.readouterr()
    assert _embed(tiny_model, corpus["valid"], out, "--resume") == 1
    assert "records no settings" in capsys.readouterr().err
    assert _embed(tiny_model, corpus["valid"], out) == 1  # without --resume it is still the user's file
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"elmo: error: {out} exists; pass --force to replace it"
    assert _embed(tiny_model, corpus["valid"], out, "--force") == 0
    with h5py.File(out, "r") as f:
        assert "embed_settings" in f.attrs


def _run(tmp: Path, *args: str, stdin: Path | None = None, **env: str) -> tuple[int, str]:
    """``python -m elmo ARGS`` with stderr written to a file (not a terminal, as in a batch job): (exit, stderr)."""
    err = tmp / "stderr.txt"
    with open(err, "w") as stderr, open(stdin or os.devnull) as given:
        code = subprocess.run([sys.executable, "-m", "elmo", *args], env={**fault_env(), **env}, stdin=given,
                              stdout=subprocess.DEVNULL, stderr=stderr, timeout=300).returncode
    return code, err.read_text()


@pytest.mark.slow
def test_embed_progress_shows_the_total_and_an_eta_for_a_file(tiny_model, corpus, tmp_path):
    code, err = _run(tmp_path, "embed", str(corpus["valid"]), str(tmp_path / "o.hdf5"), "--all", "--model",
                     str(tiny_model), "--progress", "--chunk-size", "8")
    assert code == 0, err
    assert "20/20 [" in err and "<00:00" in err, err  # done / total, elapsed < remaining
    code, err = _run(tmp_path, "embed", "-", str(tmp_path / "s.hdf5"), "--all", "--model", str(tiny_model),
                     "--progress", stdin=corpus["valid"])
    assert code == 0 and "20 sentences" in err and "/20" not in err, err  # a stream: counted as it comes


@pytest.mark.slow
def test_train_output_is_elmo_lines_only_without_bars_or_third_party_noise(corpus, tmp_path):
    code, err = _run(tmp_path, "train", "--config", "tiny", "--train", str(corpus["train"]), "--vocab",
                     str(corpus["vocab"]), "--out", str(tmp_path / "run"), "--max-steps", "2",
                     MPLCONFIGDIR=str(tmp_path / "mpl"))  # a fresh font cache: matplotlib logs that it built one
    assert code == 0, err
    assert "\r" not in err and "%|" not in err, err  # no tqdm bar when stderr is a file
    assert "fontManager" not in err, err
    assert err.splitlines() and all(" INFO " in line or " WARNING " in line for line in err.splitlines()), err
    assert "done: step 2" in err


def test_an_empty_corpus_is_one_vocab_error_and_writes_nothing(tmp_path, capsys):
    empty, out = tmp_path / "empty.txt", tmp_path / "vocab.txt"
    empty.write_text("\n\n")
    assert main(["vocab", str(empty), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmo: error: ") and str(empty) in err[0] and "no words" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("argv", [["embed", "in.txt", "out.hdf5"], ["vocab", "c.txt", "-o", "v.txt", "--nope"],
                                  ["embed", "in.txt", "out.hdf5", "--all", "--bf16"],
                                  ["embed", "in.txt", "out.hdf5", "--all", "--batch-size", "0"],
                                  ["embed", "in.txt", "out.hdf5", "--layer", "foo"], ["serve", "--workers", "0"],
                                  ["models", "--family", "nosuch"],
                                  ["embed", "in.txt", "out.hdf5", "--all", "--overwrite"]])
def test_usage_errors_exit_2_and_every_other_error_exits_1(argv, tmp_path, capsys):
    """The rule README.md and docs/reliability.md state: 2 for a bad, missing or removed flag; 1 for the rest."""
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's own errors
        status = e.code
    assert status == 2
    assert main(["vocab", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "v.txt")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("elmo: error: ") and "missing.txt" in err[-1]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "(exit status 1; a bad, missing or removed flag or flag value: 2;" in readme


@pytest.mark.slow
def test_a_huge_learning_rate_stops_with_one_line_naming_the_steps_and_the_advice(corpus, tmp_path):
    """1e30 is finite, so no check refuses it; the weights overflow after one update. The guard (max_bad_steps)
    must stop the run, not an index error from inside the char CNN's max-pool (a NaN equals no maximum)."""
    preset = json.loads((PRESETS / "tiny.json").read_text()) | {"learning_rate": 1e30, "precision": "fp32"}
    (tmp_path / "huge-lr.json").write_text(json.dumps(preset))
    code, err = _run(tmp_path, "train", "--config", str(tmp_path / "huge-lr.json"), "--train", str(corpus["train"]),
                     "--vocab", str(corpus["vocab"]), "--out", str(tmp_path / "run"), "--max-steps", "40")
    assert code == 1 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("elmo: ")]
    assert len(errors) == 1, err
    assert re.search(r"training diverged: 10 steps in a row .* \(from step \d+ to step \d+\)", errors[0]), errors[0]
    assert "lower --learning-rate (now 1e+30) or --clip-norm (now 10)" in errors[0]


@pytest.mark.slow
def test_task_train_writes_no_bars_when_stderr_is_a_file(tiny_model, tmp_path):
    pytest.importorskip("seqeval")
    data = tmp_path / "ner.txt"
    data.write_text("EU B-ORG\nrejects O\nGerman B-MISC\ncall O\n\nPeter B-PER\nBlackburn I-PER\n")
    code, err = _run(tmp_path, "task", "train", "ner", "--config", str(PRESETS / "tasks" / "ner-tiny.json"),
                     "--train", str(data), "--dev", str(data), "--output", str(tmp_path / "task"),
                     "--bilm", str(tiny_model))
    assert code == 0, err
    assert "\r" not in err and "%|" not in err and "it/s" not in err, err
    assert all(" INFO " in line or " WARNING " in line for line in err.splitlines()), err
