"""experiments/initial_state.py end to end in its quick mode: a tiny trained export, tiny NER and POS files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo.cli import main as cli_main
from tests.conftest import write_lm_corpus
from tests.tasks.conftest import write_conll

REPO = Path(__file__).resolve().parents[2]

CONLLU = """# text = The cat sat .
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# text = A dog ran under the tree .
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tran\trun\tVERB\tVBD\t_\t0\troot\t_\t_
4\tunder\tunder\tADP\tIN\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\tDT\t_\t6\tdet\t_\t_
6\ttree\ttree\tNOUN\tNN\t_\t3\tobl\t_\t_
7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


@pytest.mark.slow
def test_initial_state_table_quick_and_resumed(tmp_path):
    corpus = write_lm_corpus(tmp_path)
    run, export = tmp_path / "run", tmp_path / "export"
    assert cli_main(["-q", "train", "--config", "tiny", "--train", str(corpus["train"]), "--vocab",
                     str(corpus["vocab"]), "--out", str(run), "--no-progress", "--max-steps", "2"]) == 0
    assert cli_main(["-q", "export", str(run), str(export)]) == 0
    data = tmp_path / "data"
    (data / "conll2003").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        write_conll(data / "conll2003" / f"{split}.txt")
    (tmp_path / "pos.conllu").write_text(CONLLU * 3, encoding="utf-8")
    command = [sys.executable, str(REPO / "experiments" / "initial_state.py"), "--bilm", str(export), "--corpus",
               str(corpus["train"]), "--data-dir", str(data), "--out", str(tmp_path / "out"), "--quick", "--seeds",
               "2", "--device", "cpu", "--valid", str(corpus["valid"]), "--pos-train", str(tmp_path / "pos.conllu"),
               "--pos-test", str(tmp_path / "pos.conllu")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    first = subprocess.run([*command, "--no-ner"], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "INFO run" not in first.stderr and "POS probe" in first.stderr
    assert (tmp_path / "out" / "initial_state.md").read_text().count("not run (--no-ner)") == 3
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "POS probe" not in done.stderr  # the perplexity and POS columns of the --no-ner run are reused
    table = (tmp_path / "out" / "initial_state.md").read_text()
    assert [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and "|---" not in line][
        1:] == ["zero", "carry", "warm"]
    assert len({line.count("|") for line in table.splitlines() if line.startswith("|")}) == 1  # every row full
    results = json.loads((tmp_path / "out" / "initial_state.json").read_text())
    ppl = results["perplexity"]
    assert ppl["zero/valid.txt"]["tokens"] == ppl["carry/valid.txt"]["tokens"] == ppl["warm/valid.txt"]["tokens"]
    assert len({round(ppl[f"{m}/valid.txt"]["forward"], 6) for m in ("zero", "carry", "warm")}) == 3
    assert set(results["pos"]["warm"]) == {"0", "1", "2", "mix"}
    assert results["pos"]["warm"]["0"] == results["pos"]["zero"]["0"]  # the token layer has no state
    assert len(results["ner"]["warm"]) == 2 and set(results["versus_zero"]) == {"ner/carry", "ner/warm"}
    assert {"p_value", "paired_p_value", "ci_low", "ci_high"} <= set(results["versus_zero"]["ner/warm"])
    assert len(list((tmp_path / "out" / "cache").glob("*-ner*.h5"))) == 3  # one activation cache per mode
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "INFO run" not in again.stderr and "POS probe" not in again.stderr
    assert (tmp_path / "out" / "initial_state.md").read_text() == table
