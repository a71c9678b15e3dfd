"""The experiment scripts run end to end (--quick, one seed) on tiny stand-in data files."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from elmo.formats.model_files import load_bilm
from tests.tasks.conftest import write_conll, write_sst

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _data_dir(root: Path) -> Path:
    for split in ("train", "dev", "test"):
        (root / "conll2003").mkdir(parents=True, exist_ok=True)
        (root / "sst").mkdir(parents=True, exist_ok=True)
        write_conll(root / "conll2003" / f"{split}.txt")
        write_sst(root / "sst" / f"sst5.{split}.tsv")
    return root


def _quick_args(tmp_path: Path, bilm_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The flags of a quick run on tiny stand-in files, and the scripts' environment."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("John lives in Paris .\nMary visited New York\n" * 20)
    common = ["--bilm", str(bilm_dir), "--corpus", str(corpus), "--data-dir", str(_data_dir(tmp_path / "data")),
              "--out", str(tmp_path / "out"), "--quick", "--device", "cpu"]
    return common, {**os.environ, "PYTHONPATH": str(REPO / "src")}


@pytest.mark.slow
def test_table3_and_fig2_quick(tmp_path, bilm_dir):
    common, env = _quick_args(tmp_path, bilm_dir)
    common += ["--seeds", "1"]
    for script in ("table3_elmo_position.py", "fig2_layer_weights.py"):
        done = subprocess.run([sys.executable, str(REPO / "experiments" / script), *common], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert "input & output" in (tmp_path / "out" / "table3.md").read_text()
    assert (tmp_path / "out" / "fig2_layer_weights.png").stat().st_size > 1000
    # the SST input+output run is shared by both scripts: trained once, then reused
    assert len(list((tmp_path / "out" / "runs" / "sst").glob("elmo-in-out-seed0"))) == 1
    again = subprocess.run([sys.executable, str(REPO / "experiments" / "table3_elmo_position.py"), *common], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "INFO run" not in again.stderr  # everything resumed, nothing retrained


def test_finetuned_bilm_is_made_once_per_task_and_loads(tmp_path, bilm_dir):
    sys.path.insert(0, str(REPO / "experiments"))
    import _common

    args = argparse.Namespace(bilm=str(bilm_dir), data_dir=str(_data_dir(tmp_path / "data")), out=tmp_path / "out",
                              quick=True, finetune_epochs=4, device="cpu")  # 2 epochs: dev gains were a coin flip
    export = _common.task_bilm(args, "sst")
    report = json.loads((export.parent / "perplexity.json").read_text())
    before, after = report["dev_perplexity_before"], report["dev_perplexity_after"]
    assert report["epochs"] == 4 and before["tokens"] == after["tokens"] > 0
    assert after["forward"] < before["forward"]
    tuned, original = load_bilm(export), load_bilm(bilm_dir)
    assert not torch.equal(tuned.forward_lstm.layers[0].input_linearity.weight,
                           original.forward_lstm.layers[0].input_linearity.weight)
    made = (export / "weights.hdf5").stat().st_mtime_ns
    assert _common.task_bilm(args, "sst") == export  # made once: the second call reuses it
    assert (export / "weights.hdf5").stat().st_mtime_ns == made
    assert _common.task_bilm(argparse.Namespace(**{**vars(args), "finetune_epochs": 0}), "sst") == Path(bilm_dir)


def test_bad_input_is_one_line(tmp_path, bilm_dir):
    common = ["--bilm", str(bilm_dir), "--data-dir", str(_data_dir(tmp_path / "data")), "--out", str(tmp_path / "out"),
              "--quick", "--seeds", "1", "--device", "cpu", "--tasks", "sst"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    script = str(REPO / "experiments" / "table1_baseline_vs_elmo.py")
    done = subprocess.run([sys.executable, script, *common, "--corpus", str(tmp_path / "missing.txt")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'missing.txt'}: no such corpus file"
    done = subprocess.run([sys.executable, script, *common, "--corpus", "x", "--finetune-epochs", "-1"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--finetune-epochs must be >= 0, got -1" in done.stderr


@pytest.mark.slow
def test_table1_has_seed_statistics_and_resumes_seed_by_seed(tmp_path, bilm_dir):
    common, env = _quick_args(tmp_path, bilm_dir)
    common += ["--tasks", "sst"]
    script = str(REPO / "experiments" / "table1_baseline_vs_elmo.py")
    done = subprocess.run([sys.executable, script, *common, "--seeds", "2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "| Welch p | 95% CI of Δ | claim |" in table and "Welch t-test" in table
    results = json.loads((tmp_path / "out" / "table1.json").read_text())
    sst = results["comparisons"]["sst"]
    assert len(sst["a"]) == len(sst["b"]) == 2 and sst["verdict"] in ("reproduced", "not significant", "opposite")
    assert sst["difference"] == pytest.approx(sum(sst["a"]) / 2 - sum(sst["b"]) / 2)
    # a third seed: only its two runs are trained, the first four are reused
    again = subprocess.run([sys.executable, script, *common, "--seeds", "3"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    trained = [line for line in again.stderr.splitlines() if "INFO run sst/" in line]
    assert sorted(line.split("INFO run ")[1].split(":")[0] for line in trained) == [
        "sst/baseline-seed2", "sst/elmo-seed2"]
    assert len(json.loads((tmp_path / "out" / "table1.json").read_text())["comparisons"]["sst"]["a"]) == 3


def test_default_bilm_is_the_corpus_export_and_its_absence_is_one_line(tmp_path):
    common = ["--corpus", "x", "--out", str(tmp_path / "out"), "--quick", "--tasks", "sst"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    script = str(REPO / "experiments" / "table1_baseline_vs_elmo.py")
    done = subprocess.run([sys.executable, script, *common, "--bilm", str(tmp_path / "nothing")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "nothing" in done.stderr.strip().splitlines()[-1]
    helped = subprocess.run([sys.executable, script, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert "default: corpus" in helped.stdout and "default 5" in helped.stdout
