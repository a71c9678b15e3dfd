"""The journeys' world: a work directory holding, under the names the docs use, tiny versions of the files a reader
would bring, the fast ``elmo`` (elmo_server.py), and a model cache in which the published models are the demo biLM.

The docs' task commands read ``../shared/data/tasks/...`` (the data beside the source tree), so
``../shared/data`` of the work directory holds tiny task files; the reader's own files (``sentences.txt``,
``corpus/*.txt.gz``, a model at ``path/to/model``, ``BILM_DIR``) are made here. Published models cannot be
downloaded in the test suite, so ``$ELMO_HOME`` holds the demo biLM under their names in the published layout
(options.json + weights.hdf5), and ``ELMO_OFFLINE=1`` makes any other download fail.
"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.formats.manylangs_files import write_manylangs_model
from tests.journeys.elmo_server import write_shim
from tests.probing.files import conllu_text, senseval_text

REPO = Path(__file__).resolve().parents[2]
WORDS = (
    "the a cat dog bank river light play sat ran went to on under mat tree big small old new man woman saw "
    "London Paris Alice Holmes , . and then it was"
).split()
NAMES = {"London": "B-LOC", "Paris": "B-LOC", "Alice": "B-PER", "Holmes": "B-PER"}


def _sentences(rng: random.Random, n: int) -> list[list[str]]:
    return [[rng.choice(WORDS) for _ in range(rng.randint(3, 12))] for _ in range(n)]


def _write_lines(path: Path, sentences: list[list[str]], compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(" ".join(s) + "\n" for s in sentences)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _write_conll(path: Path, sentences: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    blocks = ["\n".join(f"{w} {NAMES.get(w, 'O')}" for w in s) for s in sentences]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def _write_sst(path: Path, rng: random.Random, sentences: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{rng.randint(0, 4)}\t{' '.join(s)}\n" for s in sentences), encoding="utf-8")


def prepare_workdir(root: Path) -> Path:
    """``root/repo`` (the reader's working directory) with every file the docs' runnable blocks expect to exist."""
    rng = random.Random(0)
    repo = root / "repo"
    repo.mkdir(parents=True)
    demo = REPO / "src" / "elmo" / "pretrained" / "demo"
    for model in ("path/to/model", "BILM_DIR"):  # copies: a block must not be able to change the package's files
        shutil.copytree(demo, repo / model)
    write_manylangs_model(repo / "de.model")  # a small ELMoForManyLangs model (docs/formats.md)
    # texts to embed
    _write_lines(repo / "sentences.txt", _sentences(rng, 5))
    _write_lines(repo / "in.txt", _sentences(rng, 5))
    _write_lines(repo / "corpus.txt.gz", _sentences(rng, 5), compress=True)
    (repo / "proteins.fasta").write_text(  # docs/embedding.md: protein sequences, one token per residue
        ">P69905 HBA_HUMAN\nMVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSF\nPTTKTYFPHFDLSHGSAQVKGHGKKVADALTNAVAHV\n"
        ">P68871 HBB_HUMAN\nMVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDG\n",
        encoding="utf-8")
    # training text of a little more than one batch of the cpu preset (64 x 20 tokens), the least it accepts
    for shard in range(2):
        _write_lines(repo / "corpus" / f"train-{shard:03d}.txt.gz", _sentences(rng, 100), compress=True)
    for name in ("corpus/valid.txt", "corpus/test.txt", "valid.txt", "task.valid.txt"):
        _write_lines(repo / name, _sentences(rng, 10))
    _write_lines(repo / "task.txt", _sentences(rng, 200))
    _write_lines(repo / "LM_TRAIN.txt", _sentences(rng, 200))
    # task data where the docs read it (../shared/data/tasks), and an unseen file to evaluate on
    conll = root / "shared" / "data" / "tasks" / "conll2003"
    for split in ("train", "dev", "test"):
        _write_conll(conll / f"{split}.txt", _sentences(rng, 12))
        _write_sst(root / "shared" / "data" / "tasks" / "sst" / f"sst5.{split}.tsv", rng, _sentences(rng, 12))
    for name in ("some_other.conll", "train.conll", "dev.conll"):
        _write_conll(repo / name, _sentences(rng, 12))
    _write_probe_files(root, repo)
    return repo


def _write_probe_files(root: Path, repo: Path) -> None:
    """docs/probing.md: UD English EWT and Senseval where the docs read them, a corpus with "play" in it."""
    ewt = root / "shared" / "data" / "tasks" / "ud_english_ewt"
    ewt.mkdir(parents=True)
    for split in ("train", "test"):
        (ewt / f"en_ewt-ud-{split}.conllu").write_text(conllu_text(), encoding="utf-8")
    senseval = root / "shared" / "data" / "tasks" / "senseval"
    senseval.mkdir(parents=True)
    for word in ("line-n", "hard-a"):
        (senseval / f"{word[:-2]}.pos").write_text(senseval_text(word, 10), encoding="utf-8")
    _write_lines(repo / "corpus.txt", [["they", "play", "a", "game"], ["we", "saw", "a", "play"]]
                 + _sentences(random.Random(1), 20))


@dataclass(frozen=True)
class Journey:
    env: dict[str, str]  # the fast ``elmo`` first on PATH, the venv next, the model cache
    python: Path  # runs a Python file in the server


@pytest.fixture(scope="session")
def journey(tmp_path_factory) -> Journey:
    """What every block runs with; the server lives for the session."""
    bin_dir = tmp_path_factory.mktemp("bin")
    write_shim(str(bin_dir), "elmo")
    python_dir = tmp_path_factory.mktemp("python")
    write_shim(str(python_dir), "python")
    home = tmp_path_factory.mktemp("elmo_home")
    demo = REPO / "src" / "elmo" / "pretrained" / "demo"
    published = home / "models" / "original"
    subprocess.run(
        [sys.executable, "-m", "elmo", "convert", "--model", str(demo), str(published), "--to", "hdf5"],
        check=True, capture_output=True,
    )
    for name in ("small", "medium", "5.5B"):
        shutil.copytree(published, home / "models" / name)
    address = os.path.join(tempfile.mkdtemp(prefix="elmo-journeys-"), "server")  # AF_UNIX paths: < 108 bytes
    env = dict(os.environ)
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]),
        ELMO_HOME=str(home), ELMO_OFFLINE="1", ELMO_JOURNEY_SERVER=address,
        TORCH_COMPILE_DISABLE="1",  # compiling takes minutes; the compiled paths have their own tests
        OMP_NUM_THREADS="1",  # the blocks' tensors are tiny: on a busy 2-core machine 2 threads took 2-4x longer
        MPLBACKEND="Agg",
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.journeys.elmo_server", address], cwd=REPO, env=env, stdout=subprocess.PIPE,
    )
    assert server.stdout.readline().strip() == b"ready", "the journey server did not start"
    yield Journey(env, python_dir / "python")
    server.terminate()
    server.wait()
    shutil.rmtree(os.path.dirname(address), ignore_errors=True)
