"""End to end on a few sentences: the models overfit them, both ELMo paths agree, checkpoints reload exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.tasks import TaskConfig, build_runner, load_task_data, load_task_model, train_task
from elmo.tasks.builder import build_elmo
from elmo.tasks.elmo_features import CachedElmo
from tests.tasks.conftest import write_examples

SMALL_MODEL = {"word_dim": 16, "char_filters": 8, "hidden_dim": 16, "num_layers": 2, "classifier_hidden_dim": 16}


def small_config(task: str, **elmo) -> TaskConfig:
    return TaskConfig.from_dict(
        {
            "task": task,
            "model": {**SMALL_MODEL, "dropout": 0.0},
            "elmo": {"dropout": 0.0, "precision": "fp32", **elmo},  # exact: the same on every CPU
            "train": {"epochs": 30, "batch_size": 8, "learning_rate": 0.03, "patience": 30},
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, elmo, overrides",
    [
        ("ner", {"enabled": False}, {}),
        ("ner", {"at_output": True}, {}),
        ("sst", {}, {}),
        # BCN is wider: at 16 units some initialisations stall at 4 of 5; at 32 all of seeds 0-7 reach 5 of 5 by
        # epoch 39 (so the case does not hang on where the global RNG happens to stand)
        (
            "sst",
            {"at_output": True},
            {
                "model.classifier": "bcn",
                "model.hidden_dim": 32,
                "model.classifier_hidden_dim": 32,
                "train.learning_rate": 0.01,
                "train.epochs": 60,
                "train.patience": 60,
            },
        ),
    ],
)
def test_overfits_a_few_sentences(task, elmo, overrides, bilm_dir, tmp_path):
    path = write_examples(task, tmp_path / "examples.txt")
    data = load_task_data(task, path, path, path)
    config = small_config(task, **elmo).replace(**overrides)
    runner = build_runner(config, data, bilm_dir=bilm_dir, device="cpu", progress=False)
    result = train_task(runner, data, output_dir=tmp_path / "run", bilm_dir=bilm_dir, progress=False)
    assert result.dev_score == 100.0 and result.test_score == 100.0
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert (tmp_path / "run" / "predictions.test.txt").is_file()


def test_patience_waits_for_a_dev_score_above_zero(ner_file):
    data = load_task_data("ner", ner_file, ner_file)
    config = small_config("ner", enabled=False).replace(**{"train.epochs": 6, "train.patience": 1})
    runner = build_runner(config, data, device="cpu", progress=False)
    scores = iter([0.0, 0.0, 0.0, 50.0, 40.0, 60.0])
    runner.score = lambda examples, predicted: next(scores)  # dev F1 0 for 3 epochs, then learning
    result = train_task(runner, data, progress=False)
    assert [h["dev_score"] for h in result.history] == [0.0, 0.0, 0.0, 50.0, 40.0]  # stops 1 epoch after 50
    assert result.best_epoch == 4


@pytest.mark.parametrize("task", ["ner", "sst", "bcn"])
@pytest.mark.parametrize("elmo", [{"at_output": True, "l2_coef": 0.5}, {"layers": "top"}, {"do_layer_norm": True}])
def test_cached_and_on_the_fly_give_the_same_loss(task, elmo, bilm_dir, tmp_path):
    model = {"model.classifier": "bcn"} if task == "bcn" else {}
    task = "sst" if task == "bcn" else task
    path = write_examples(task, tmp_path / "examples.txt")
    data = load_task_data(task, path, path)
    options = {"bilm_dir": bilm_dir, "device": "cpu", "progress": False}
    cached = build_runner(small_config(task, cached=True, **elmo).replace(**model), data, **options)
    fly = build_runner(small_config(task, cached=False, **elmo).replace(**model), data, **options)
    assert isinstance(cached.model.elmo, CachedElmo) and not isinstance(fly.model.elmo, CachedElmo)
    with torch.no_grad():  # different mix weights than the uniform start, so the mixes really matter
        for mix in cached.model.elmo.scalar_mixes:
            if mix.scalar_parameters.requires_grad:
                mix.scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
    fly.model.load_state_dict(cached.model.state_dict(), strict=False)
    cached.prepare(data.train)
    cached.model.eval()
    fly.model.eval()
    torch.testing.assert_close(cached.loss(data.train), fly.loss(data.train), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_checkpoint_reloads_to_the_same_predictions_in_either_mode(ner_file, bilm_dir, tmp_path):
    data = load_task_data("ner", ner_file, ner_file)
    config = small_config("ner", at_output=True).replace(**{"train.epochs": 3})
    runner = build_runner(config, data, bilm_dir=bilm_dir, device="cpu", progress=False)
    train_task(runner, data, output_dir=tmp_path / "run", bilm_dir=bilm_dir, progress=False)
    expected = runner.predict(data.dev)
    for cached in (True, False):
        again = load_task_model(tmp_path / "run", cached=cached, progress=False)
        assert again.predict(data.dev) == expected


def test_top_layer_only_has_fixed_weights():
    elmo = build_elmo(small_config("ner", layers="top").elmo, num_layers=3)
    weights = elmo.scalar_mixes[0].normalized_weights()
    assert weights.tolist() == [0.0, 0.0, 1.0] and not elmo.scalar_mixes[0].scalar_parameters.requires_grad


def test_activation_cache_persists_and_matches_the_embedder(bilm_dir, tmp_path):
    from elmo import Embedder, load_bilm
    from elmo.tasks import ActivationCache

    embedder = Embedder(load_bilm(bilm_dir), batch_size=2, device="cpu")
    sentences = [["a", "b"], ["c"], ["a", "b"], ["d", "e", "f"]]
    cache = ActivationCache(embedder, tmp_path / "acts.h5", progress=False)
    assert cache.ensure(sentences) == 3  # the repeated sentence is computed once
    cache.close()
    reopened = ActivationCache(embedder, tmp_path / "acts.h5", progress=False)
    assert reopened.ensure(sentences) == 0
    np.testing.assert_allclose(reopened.get(["d", "e", "f"]), embedder.embed_sentence(["d", "e", "f"]), atol=1e-6)


def test_damaged_activation_cache_gives_a_clear_error(bilm_dir, tmp_path):
    from elmo import Embedder, load_bilm
    from elmo.errors import InputFileError
    from elmo.tasks import ActivationCache

    damaged = tmp_path / "acts.h5"
    damaged.write_bytes(b"not an hdf5 file")
    with pytest.raises(InputFileError, match="acts.h5: cannot open the activation cache"):
        ActivationCache(Embedder(load_bilm(bilm_dir), device="cpu"), damaged)


def test_activation_cache_refuses_another_bilm(bilm_dir, tmp_path):
    from elmo import Embedder, load_bilm
    from elmo.errors import InputFileError
    from elmo.tasks import ActivationCache
    from tests.conftest import random_bilm

    ActivationCache(Embedder(load_bilm(bilm_dir), device="cpu"), tmp_path / "acts.h5").close()
    with pytest.raises(InputFileError, match="made with another biLM"):
        ActivationCache(Embedder(random_bilm(seed=1), device="cpu"), tmp_path / "acts.h5")


@pytest.mark.slow
def test_activation_cache_is_shared_by_processes_once_filled(bilm_dir, tmp_path):
    """A second run (another process) trains from the cache while the first still has it open."""
    from elmo import Embedder, load_bilm
    from elmo.tasks import ActivationCache

    sentences = [["a", "b"], ["c", "d", "e"]]
    first = ActivationCache(Embedder(load_bilm(bilm_dir), device="cpu"), tmp_path / "acts.h5", progress=False)
    assert first.ensure(sentences) == 2
    bilm, path = str(bilm_dir), str(tmp_path / "acts.h5")
    second = (
        "from elmo import Embedder, load_bilm\nfrom elmo.tasks import ActivationCache\n"
        f"cache = ActivationCache(Embedder(load_bilm({bilm!r}), device='cpu'), {path!r})\n"
        f"print(cache.ensure({sentences!r}), cache.get(['c', 'd', 'e']).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", second], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    expected_shape = first.get(["c", "d", "e"]).shape
    first.close()
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.split(None, 1) == ["0", f"{expected_shape}\n"]
