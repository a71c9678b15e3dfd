"""`elmo finetune --model <bilm-tf training directory>` continues bilm-tf's run: its weights, its softmax and its
Adagrad accumulators (docs/training.md, "Continuing a bilm-tf run"). The checkpoints are written by TensorFlow."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.cli import main
from elmo.formats.checkpoints import latest_checkpoint, read_model_state, read_torch_state, read_trainer_state
from elmo.formats.model_files import save_bilm
from elmo.formats.softmax_hdf5 import SOFTMAX_FILE, write_softmax
from elmo.modules.softmax import Softmax
from elmo.text.vocab import Vocabulary
from elmo.training.trainer import Trainer
from tests.conftest import random_bilm, write_lm_corpus
from tests.formats.bilm_tf_files import write_bilm_tf_dir

INITIAL_ACCUMULATOR = 1.0  # the train config's initial_accumulator_value, which a fresh run starts from


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def models(tmp_path_factory, corpus) -> dict[str, Path]:
    """The same biLM and softmax twice: as bilm-tf's training directory (with Adagrad slots > 1), and converted to
    HDF5 + softmax.hdf5 + vocab.txt (what `elmo export` leaves; a fresh run's accumulators)."""
    root = tmp_path_factory.mktemp("models")
    bilm = random_bilm(seed=3)
    rows = len(Vocabulary.from_file(corpus["vocab"]))
    rng = np.random.default_rng(4)
    weight = (0.1 * rng.standard_normal((rows, bilm.config.lstm.projection_dim))).astype(np.float32)
    bias = (0.1 * rng.standard_normal(rows)).astype(np.float32)
    variables = write_bilm_tf_dir(root / "bilm-tf", bilm, weight, bias)
    converted = save_bilm(bilm, root / "converted")
    softmax = Softmax(rows, bilm.config.lstm.projection_dim)
    with torch.no_grad():
        softmax.weight.copy_(torch.from_numpy(weight))
        softmax.bias.copy_(torch.from_numpy(bias))
    write_softmax(converted / SOFTMAX_FILE, softmax)
    shutil.copy(corpus["vocab"], converted / "vocab.txt")
    return {"bilm-tf": root / "bilm-tf", "converted": converted, "variables": variables}


@pytest.fixture
def losses(monkeypatch) -> list[float]:
    """Every training step's loss, as the trainer computed it."""
    seen: list[float] = []
    step = Trainer.train_step

    def recording(self, batch):
        stats = step(self, batch)
        seen.append(stats["loss"])
        return stats

    monkeypatch.setattr(Trainer, "train_step", recording)
    return seen


def _finetune(model: Path, corpus: dict[str, Path], out: Path, steps: int, *extra: str) -> int:
    return main(["-q", "finetune", "--model", str(model), "--train", str(corpus["train"]), "--vocab",
                 str(corpus["vocab"]), "--out", str(out), "--no-progress", "--max-steps", str(steps),
                 "--config", "tiny", "--seed", "7", *extra])


def _accumulators(run: Path) -> list[torch.Tensor]:
    state = read_torch_state(latest_checkpoint(run) / "optimizer.pt")["state"]
    return [state[i]["sum"] for i in sorted(state)]


@pytest.mark.slow
def test_the_first_step_equals_the_converted_models_and_starts_from_bilm_tfs_accumulators(
    models, corpus, losses, tmp_path
):
    assert _finetune(models["bilm-tf"], corpus, tmp_path / "from-tf", 1) == 0
    assert _finetune(models["converted"], corpus, tmp_path / "from-hdf5", 1) == 0
    assert len(losses) == 2 and np.isfinite(losses).all()
    assert losses[0] == pytest.approx(losses[1], rel=1e-6, abs=0)  # same weights, softmax, batch and samples

    # the same first step's gradients g: bilm-tf's run adds g^2 to its accumulators, a fresh run to 1.0
    continued, fresh = _accumulators(tmp_path / "from-tf"), _accumulators(tmp_path / "from-hdf5")
    assert len(continued) == len(fresh)
    started_above = 0
    for a, b in zip(continued, fresh):
        added = b - INITIAL_ACCUMULATOR
        start = a - added  # what the continued run's accumulator was before its first step
        assert torch.all(start >= 1.0 - 1e-5)  # the slots the test wrote are in [1, 2), never the fresh 1.0 alone
        started_above += int(torch.any(start > 1.0 + 1e-3))
    assert started_above == len(continued)  # every parameter, softmax included, started from bilm-tf's slots

    recorded = read_trainer_state(latest_checkpoint(tmp_path / "from-tf"))
    assert recorded["step"] == 1  # this run's steps; bilm-tf's global_step is recorded in finetune.json
    finetune_json = (tmp_path / "from-tf" / "finetune.json").read_text()
    assert '"global_step": 10000' in finetune_json and '"softmax": true' in finetune_json


@pytest.mark.slow
def test_resume_after_the_first_step_is_exact(models, corpus, losses, tmp_path):
    assert _finetune(models["bilm-tf"], corpus, tmp_path / "straight", 3) == 0
    assert _finetune(models["bilm-tf"], corpus, tmp_path / "resumed", 1) == 0
    assert _finetune(models["bilm-tf"], corpus, tmp_path / "resumed", 3, "--resume") == 0
    assert losses[:1] == losses[3:4] and losses[1:3] == losses[4:6]  # the resumed steps see the same losses
    straight, resumed = (read_model_state(latest_checkpoint(tmp_path / r)) for r in ("straight", "resumed"))
    assert straight.keys() == resumed.keys()
    for name in straight:
        assert torch.equal(straight[name], resumed[name]), name
    for a, b in zip(_accumulators(tmp_path / "straight"), _accumulators(tmp_path / "resumed")):
        assert torch.equal(a, b)  # the resumed run read its own checkpoint's accumulators, not bilm-tf's again
