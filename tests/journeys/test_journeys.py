"""The README's and the guides' commands and Python snippets, run as written (docs/*.md, README.md).

Each Markdown file is one reader's journey: its runnable blocks (markdown_snippets.py says which) run in file order
in one fresh work directory (conftest.py), so a later block uses what an earlier one wrote, as it would for a
reader who copies them. A block passes when it exits 0 without a traceback, and a file's journey when the files
its text promises (PROMISED) exist at the end. Every block of every file runs, even after a failure, and the
failures are reported together, each with the file and line of its block.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.journeys.conftest import REPO, Journey, prepare_workdir
from tests.journeys.markdown_snippets import Snippet, doc_files, read_snippets, rule_violations

pytestmark = pytest.mark.slow

DOCS = doc_files(REPO)
PROMISED = {  # files the docs say their blocks write (in comments and the text around them)
    "README.md": [
        "out.hdf5", "runs/demo/embeddings.hdf5", "native_dir/config.json", "native_dir/model.safetensors",
        "token_embeddings.hdf5", "models/lm/options.json", "models/lm/weights.hdf5", "models/lm/softmax.hdf5",
        "runs/ner/task.json", "runs/ner/model.safetensors",
    ],
    "embedding.md": ["out.hdf5", "sample.hdf5"],
    "training.md": [
        "runs/lm/train_config.json", "runs/lm/vocab.txt", "runs/lm/history.json", "runs/lm/training_curve.png",
        "runs/lm/tensorboard", "models/lm/options.json", "models/lm/weights.hdf5", "models/lm/softmax.hdf5",
        "models/lm/vocab.txt", "runs/ft/finetune.json",
    ],
    "tasks.md": [
        "vectors.txt", "runs/ner-elmo/model.safetensors", "runs/ner-elmo/task.json", "runs/ner-elmo/result.json",
        "runs/ner-elmo/predictions.dev.txt", "runs/ner-elmo/predictions.test.txt", "runs/cache/bilm.h5",
        "runs/sst-elmo/result.json", "out.txt", "runs/ner/result.json",
    ],
}
TRAINS = re.compile(r"^\s*elmo (train|finetune|task train)\b", re.MULTILINE)


def _journey_param(doc: Path):
    """Files whose blocks train a model take a minute or more: marked slow (still part of `make test`)."""
    trains = any(s.runs and TRAINS.search(s.code) for s in read_snippets(doc))
    return pytest.param(doc, id=str(doc.relative_to(REPO)), marks=[pytest.mark.slow] if trains else [])


def test_every_python_and_bash_block_runs_or_says_why_not():
    problems = [problem for doc in DOCS for problem in rule_violations(read_snippets(doc))]
    assert not problems, "\n".join(problems)


def test_the_docs_have_blocks_to_run():
    """A parsing slip must not make the journeys pass by running nothing."""
    runnable = {doc.name: sum(s.runs for s in read_snippets(doc)) for doc in DOCS}
    assert runnable["README.md"] >= 2 and sum(runnable.values()) >= 6, runnable


def run_snippet(snippet: Snippet, workdir: Path, journey: Journey, scripts: Path) -> subprocess.CompletedProcess:
    script = scripts / f"{snippet.path.stem}-{snippet.line}.{'py' if snippet.language == 'python' else 'sh'}"
    script.write_text(snippet.code, encoding="utf-8")
    if snippet.language == "python":
        command = [str(journey.python), str(script)]
    else:  # stop at the first failing command, also inside a pipe (the docs' files are too small for SIGPIPE)
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    return subprocess.run(
        command, cwd=workdir, env=journey.env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("doc", [_journey_param(doc) for doc in DOCS])
def test_the_blocks_of_each_doc_run_as_written(doc: Path, journey: Journey, tmp_path: Path):
    workdir = prepare_workdir(tmp_path / "reader")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    failures = []
    for snippet in read_snippets(doc):
        if not snippet.runs:
            continue
        start = time.monotonic()
        result = run_snippet(snippet, workdir, journey, scripts)
        print(f"{snippet.where}: exit {result.returncode} in {time.monotonic() - start:.1f} s")  # shown with -s
        output = (result.stdout + result.stderr).strip()
        if result.returncode != 0 or "Traceback (most recent call last)" in output:
            tail = "\n    ".join(output.splitlines()[-12:])
            failures.append(f"{snippet.where} ({snippet.language}) exit {result.returncode}:\n    {tail}")
    missing = [name for name in PROMISED.get(doc.name, []) if not (workdir / name).exists()]
    if missing:
        failures.append(f"{doc.name}: the blocks ran but did not write {', '.join(missing)}")
    assert not failures, "\n\n".join(failures)


def test_the_fast_elmo_answers_as_the_installed_command_does(journey: Journey, tmp_path: Path):
    """The journeys' shortcut (elmo_server.py) changes nothing a block can see: exit status, streams, stdin."""
    command = ["elmo", "embed", "missing.txt", "out.hdf5", "--top"]
    real_path = os.pathsep.join(journey.env["PATH"].split(os.pathsep)[1:])  # without the shim's directory
    answers = [
        subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        for env in (journey.env, dict(journey.env, PATH=real_path))
    ]
    assert [(a.returncode, a.stdout, a.stderr.splitlines()[-1]) for a in answers] == [
        (1, "", "elmo: error: missing.txt: no such input file")
    ] * 2
    (tmp_path / "echo.py").write_text("import sys\nprint(sys.stdin.read().upper())\nsys.exit(3)\n")
    echo = subprocess.run(
        [journey.python, "echo.py"], cwd=tmp_path, env=journey.env, input="words", capture_output=True, text=True
    )
    assert (echo.returncode, echo.stdout) == (3, "WORDS\n")
