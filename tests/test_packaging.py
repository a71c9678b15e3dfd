"""The wheel is the product: built from the repository, installed into a fresh virtual environment (reusing the
dependencies already installed here, so it works offline), it runs ``elmo --version``, ``elmo demo``, a few steps of
``elmo train --config tiny`` and a task model by config name, from a directory outside the checkout."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

import elmo

REPO = Path(__file__).resolve().parents[1]
BUILD_FILES = ("pyproject.toml", "README.md")


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 120) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the venv's bin directory, its environment, a work directory outside the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # a copy, so that building leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in BUILD_FILES:
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(OMP_NUM_THREADS="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
         "-w", str(root / "dist")], root, env, timeout=300)
    (wheel,) = (root / "dist").glob("elmo_bilm-*.whl")
    target = root / "venv"
    venv.create(target, with_pip=False)
    bin_dir = target / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root, env).strip()
    # the dependencies (torch, h5py, ...) from this environment, after the venv's own site-packages
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    (Path(purelib) / "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], root, env)
    work = root / "work"
    work.mkdir()
    return bin_dir, env, work


def test_the_wheel_holds_the_package_and_says_its_version(installed):
    bin_dir, env, work = installed
    # one interpreter start (torch is slow to import): where elmo comes from, then `elmo --version`
    script = "import sys, elmo, elmo.cli; print(elmo.__file__); elmo.cli.main(['--version'])"
    where, version = run([str(bin_dir / "python"), "-c", script], work, env).splitlines()
    assert Path(where).is_relative_to(bin_dir.parent), f"elmo imported from {where}, not from the wheel"
    assert not Path(where).is_relative_to(REPO)
    assert version == f"elmo {elmo.__version__} (pip package {elmo.DISTRIBUTION})"
    assert elmo.__version__ != "unknown"
    assert (Path(where).parent / "pretrained" / "warm" / "warm_text.txt").is_file()  # --initial-state warm's text


def test_demo_and_tiny_training_from_outside_the_checkout(installed):
    bin_dir, env, work = installed
    elmo_cmd = str(bin_dir / "elmo")
    demo = run([elmo_cmd, "demo", "--output-dir", "demo"], work, env)
    assert (work / "demo" / "embeddings.hdf5").is_file() and "bank" in demo
    (work / "lines.txt").write_text("".join(f"the cat number {i % 7} sat on the mat .\n" for i in range(40)))
    words = ["<S>", "</S>", "<UNK>", "the", "cat", "number", "sat", "on", "mat", ".", *map(str, range(7))]
    (work / "vocab.txt").write_text("\n".join(words) + "\n")
    log = run([elmo_cmd, "train", "--config", "tiny", "--train", "lines.txt", "--vocab", "vocab.txt", "--out", "run",
               "--max-steps", "3", "--no-progress"], work, env)
    assert (work / "run" / "train_config.json").is_file()
    assert "precision auto: " in log  # what auto chose here, and why


def test_task_configs_by_name_from_outside_the_checkout(installed):
    bin_dir, env, work = installed
    conll = "".join(f"EU B-ORG\nrejects O\n{word} B-MISC\ncall O\n. O\n\n" for word in ("German", "Dutch"))
    (work / "ner.txt").write_text(conll * 4)
    run([str(bin_dir / "elmo"), "-q", "task", "train", "ner", "--config", "ner-tiny", "--no-elmo", "--train",
         "ner.txt", "--dev", "ner.txt", "--output", "ner", "--epochs", "1"], work, env)
    assert (work / "ner" / "result.json").is_file()
