"""experiments/probes.py end to end on a tiny random biLM and tiny CoNLL-U and Senseval files, then resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm
from tests.probing.files import conllu_text, senseval_text

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_probe_tables_claims_and_resume(tmp_path):
    model = save_bilm(random_bilm(), tmp_path / "model")
    (tmp_path / "pos.conllu").write_text(conllu_text() * 3, encoding="utf-8")
    senseval = tmp_path / "senseval"
    senseval.mkdir()
    (senseval / "line.pos").write_text(senseval_text("line-n", 20), encoding="utf-8")
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "experiments" / "probes.py"), "--model", str(model), "--out", str(out),
               "--pos-train", str(tmp_path / "pos.conllu"), "--pos-test", str(tmp_path / "pos.conllu"),
               "--senseval", str(senseval), "--word", "cat", "--neighbours-corpus", str(tmp_path / "pos.conllu"),
               "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = (out / "probes.md").read_text()
    claims = [line.split("|")[1].strip() for line in table.splitlines() if " > layer " in line]
    assert claims == ["POS XPOS linear: layer 1 > layer 2", "POS UPOS linear: layer 1 > layer 2",
                      "WSD centroid: layer 2 > layer 1", "WSD linear: layer 2 > layer 1"]
    assert "[cat]" in table  # the neighbours of each use, in their sentences
    results = json.loads((out / "probes.json").read_text())
    assert results["pos"]["xpos"]["test_words"] == 45 and results["wsd"]["test_instances"] == 4
    assert set(results["claims"]) == {"pos-xpos/linear/1-vs-2", "pos-upos/linear/1-vs-2", "wsd/centroid/2-vs-1",
                                      "wsd/linear/2-vs-1"}
    assert (out / "probes.png").stat().st_size > 0
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "probes").iterdir()}
    assert {"pos-xpos.json", "pos-upos.json", "pos-upos.npz", "wsd.json", "wsd.npz", "neighbours-cat.txt"} <= set(kept)
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in (out / "probes").iterdir()} == kept  # reused, not remeasured
    assert (out / "probes.md").read_text() == table
