"""The wheel is the product: built from the repository, installed into a fresh virtual environment (reusing the
dependencies already installed here, so it works offline), it runs ``elmo --version``, ``elmo demo``, a few steps of
``elmo train --config tiny`` and a task model by config name, from a directory outside the checkout.

The core install is torch, numpy, h5py, safetensors and tqdm; everything else comes with an extra (train, tasks,
serve) and is imported only where it is used. A second venv holds the wheel without extras (the core dependencies
only: see ``core_site``) and runs ``elmo embed``, ``elmo train`` and the one-line refusal of ``elmo task train``."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import elmo
from elmo.errors import ElmoError, MissingExtraError
from elmo.runtime.extras import install_hint, optional, require

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BUILD_FILES = ("pyproject.toml", "README.md")
CORE = ("torch", "numpy", "h5py", "safetensors", "tqdm")
EXTRA_MODULES = ("tensorboard", "matplotlib", "seqeval", "gensim", "starlette", "uvicorn")


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 120) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(OMP_NUM_THREADS="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the checkout (offline: this environment's setuptools, no isolation)."""
    root = tmp_path_factory.mktemp("build")
    source = root / "source"  # a copy, so that building leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in BUILD_FILES:
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
         "-w", str(root / "dist")], root, clean_env(), timeout=300)
    (built,) = (root / "dist").glob("elmo_bilm-*.whl")
    return built


def venv_with_wheel(root: Path, wheel: Path, dependency_dirs: list[str], env: dict[str, str]) -> Path:
    """A fresh venv at ``root/venv`` holding ``wheel`` (no dependencies installed), whose dependencies come from
    ``dependency_dirs`` (a .pth file, after the venv's own site-packages); returns its bin directory."""
    target = root / "venv"
    venv.create(target, with_pip=False)
    bin_dir = target / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root, env).strip()
    (Path(purelib) / "_test_dependencies.pth").write_text("\n".join(dependency_dirs) + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], root, env)
    (root / "work").mkdir()
    return bin_dir


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the venv's bin directory, its environment, a work directory outside the checkout): every dependency and extra
    of this environment."""
    root = tmp_path_factory.mktemp("wheel")
    env = clean_env()
    # the dependencies (torch, h5py, ...) from this environment, after the venv's own site-packages
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    bin_dir = venv_with_wheel(root, wheel, sorted(deps), env)
    return bin_dir, env, root / "work"


def core_distributions() -> dict[str, metadata.Distribution]:
    """The five core dependencies and everything they need (their own requirements, transitively, without extras),
    as installed here."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(CORE)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            found[name] = dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # required on some platform only, and absent from this one
            continue
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def core_site(target: Path) -> Path:
    """A site directory of links to the core distributions' files only (packages, modules, .dist-info).

    Offline, pip cannot install torch & co. into a fresh venv (this machine keeps no wheels of them: pip's cache holds
    HTTP responses, not a --find-links directory), and a .pth file naming this environment's site-packages would
    bring every extra along. Links to exactly the core distributions' top-level entries (from their RECORD files)
    give a venv that has the core install and nothing else: the extras are absent, not blocked."""
    target.mkdir()
    for dist in core_distributions().values():
        site_dir = Path(dist.locate_file(""))
        tops = {Path(file).parts[0] for file in dist.files or ()}
        for top in sorted(tops - {"..", "__pycache__"}):
            if (site_dir / top).exists() and not (target / top).exists():
                (target / top).symlink_to(site_dir / top)
    return target


@pytest.fixture(scope="module")
def core_installed(wheel, tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """Like ``installed``, but the wheel without extras: torch, numpy, h5py, safetensors, tqdm and their own
    dependencies, nothing else."""
    if os.name == "nt":
        pytest.skip("links to the core packages: POSIX only")
    root = tmp_path_factory.mktemp("core")
    env = clean_env()
    bin_dir = venv_with_wheel(root, wheel, [str(core_site(root / "core-site"))], env)
    return bin_dir, env, root / "work"


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
    page = [path.name for path in (REPO / "src" / "elmo" / "serving" / "page").iterdir()]  # elmo serve's page
    assert page and all((Path(where).parent / "serving" / "page" / name).is_file() for name in page)


def test_demo_and_tiny_training_from_outside_the_checkout(installed):
    bin_dir, env, work = installed
    elmo_cmd = str(bin_dir / "elmo")
    (work / "one.txt").write_text("it was a dark and stormy night .\n")  # the demo is a language model too
    assert "geometric mean:" in run([elmo_cmd, "perplexity", "--model", "demo", "--data", "one.txt"], work, env)
    demo = run([elmo_cmd, "demo", "--output-dir", "demo"], work, env)  # from now on, ./demo is a directory
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


# ------------------------------------------------------------------ the core install and the extras


def run_failing(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


def test_the_core_dependencies_are_exactly_five():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert sorted(Requirement(r).name for r in project["dependencies"]) == sorted(CORE)
    extras = project["optional-dependencies"]
    names = {extra: {Requirement(r).name for r in extras[extra]} for extra in extras}
    assert names["train"] == {"tensorboard", "matplotlib"}
    assert names["tasks"] == {"seqeval", "gensim"}
    assert names["serve"] == {"starlette", "uvicorn"}
    # `all` is every extra a user may want (the experiments' and the suite's own are not the package's)
    features = sorted(set(extras) - {"all", "experiments", "test"})
    assert [sorted(Requirement(r).extras) for r in extras["all"]] == [features]
    assert any("all" in Requirement(r).extras for r in extras["test"])  # the suite needs every extra


def test_a_missing_extra_is_one_line_naming_the_pip_command(monkeypatch, caplog):
    assert require("json", "train", "x").dumps([]) == "[]"
    for name in ("seqeval", "seqeval.metrics"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(MissingExtraError) as caught:
        require("seqeval.metrics", "tasks", "elmo task train")
    assert str(caught.value) == 'elmo task train needs seqeval: pip install "elmo-bilm[tasks]"'
    assert isinstance(caught.value, ElmoError) and caught.value.exit_code == 1
    assert isinstance(caught.value, ImportError)  # `except ImportError` around an optional feature still works
    assert install_hint("uvicorn", "serve", "elmo serve") == 'elmo serve needs uvicorn: pip install "elmo-bilm[serve]"'
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with caplog.at_level("WARNING", logger="elmo"):
        assert optional("matplotlib", "train", "the training curve") is None
    assert caplog.messages == ['the training curve needs matplotlib: pip install "elmo-bilm[train]"; skipped']


def test_the_cli_prints_a_missing_extra_as_one_error_line(monkeypatch, tmp_path, capsys):
    from elmo.cli import main

    monkeypatch.setitem(sys.modules, "seqeval", None)
    monkeypatch.chdir(tmp_path)
    code = main(["task", "train", "ner", "--config", "ner-tiny", "--no-elmo", "--train", "missing.txt", "--dev",
                 "missing.txt", "--output", "ner"])
    assert code == 1
    assert capsys.readouterr().err == 'elmo: error: elmo task train needs seqeval: pip install "elmo-bilm[tasks]"\n'
    assert not (tmp_path / "ner").exists()


def test_core_commands_never_import_an_extra(tmp_path):
    """With every extra installed, `import elmo`, the command line, `elmo models`, `elmo embed` and `elmo demo`
    load none of them (a fresh interpreter: this one has imported them for other tests)."""
    (tmp_path / "two.txt").write_text("the cat sat .\nhello world\n")
    script = f"""
import sys
import elmo, elmo.cli, elmo.training.trainer, elmo.training.plotting, elmo.tasks, elmo.tasks.metrics
import elmo.tasks.word_vectors, elmo.serving.service
from elmo.cli import main
for argv in (["models"], ["embed", "two.txt", "two.hdf5", "--top", "--model", "demo"],
             ["demo", "--output-dir", "demo"]):
    assert main(["-q", *argv]) == 0, argv
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({EXTRA_MODULES!r}))
print("extras loaded:", loaded)
"""
    out = run([sys.executable, "-c", script], tmp_path, dict(os.environ, OMP_NUM_THREADS="1"))  # this elmo
    assert "extras loaded: []" in out


def test_the_core_install_has_no_extras_and_embeds(core_installed):
    bin_dir, env, work = core_installed
    script = f"""
import importlib.util, sys
missing = [m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m) is None]
import elmo, elmo.cli
print(elmo.__file__)
print("missing:", len(missing), "loaded:", sorted({{m.split(".")[0] for m in sys.modules}} & set({EXTRA_MODULES!r})))
"""
    where, found = run([str(bin_dir / "python"), "-c", script], work, env).splitlines()
    assert Path(where).is_relative_to(bin_dir.parent)
    assert found == f"missing: {len(EXTRA_MODULES)} loaded: []"  # the extras are absent here, not merely unused
    (work / "two.txt").write_text("the cat sat on the mat .\nhello world\n")
    run([str(bin_dir / "elmo"), "-q", "embed", "two.txt", "two.hdf5", "--top", "--model", "demo"], work, env)
    import h5py

    with h5py.File(work / "two.hdf5") as f:
        assert f["0"].shape[0] == 7 and f["1"].shape[0] == 2


def test_the_core_install_trains_without_plots_and_refuses_task_models(core_installed):
    bin_dir, env, work = core_installed
    elmo_cmd = str(bin_dir / "elmo")
    conll = "".join(f"EU B-ORG\nrejects O\n{word} B-MISC\ncall O\n. O\n\n" for word in ("German", "Dutch"))
    (work / "ner.txt").write_text(conll * 4)
    code, err = run_failing([elmo_cmd, "task", "train", "ner", "--config", "ner-tiny", "--no-elmo", "--train",
                             "ner.txt", "--dev", "ner.txt", "--output", "ner", "--epochs", "1"], work, env)
    assert (code, err) == (1, 'elmo: error: elmo task train needs seqeval: pip install "elmo-bilm[tasks]"\n')
    assert not (work / "ner").exists()  # refused before any output
    # training goes on without the train extra: no TensorBoard log and no curve, one warning line for each
    (work / "lines.txt").write_text("".join(f"the cat number {i % 7} sat on the mat .\n" for i in range(40)))
    words = ["<S>", "</S>", "<UNK>", "the", "cat", "number", "sat", "on", "mat", ".", *map(str, range(7))]
    (work / "vocab.txt").write_text("\n".join(words) + "\n")
    log = run([elmo_cmd, "train", "--config", "tiny", "--train", "lines.txt", "--vocab", "vocab.txt", "--out", "run",
               "--max-steps", "2", "--no-progress"], work, env)
    skipped = [line.split("WARNING ", 1)[1] for line in log.splitlines() if '"elmo-bilm[train]"' in line]
    assert skipped == ['the TensorBoard log needs tensorboard: pip install "elmo-bilm[train]"; skipped',
                       'the training curve needs matplotlib: pip install "elmo-bilm[train]"; skipped']
    assert (work / "run" / "history.json").is_file()
    assert not (work / "run" / "tensorboard").exists() and not (work / "run" / "training_curve.png").exists()
