from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from elmo.errors import ConfigError
from elmo.tasks.data import take
from elmo.tasks.task_config import TaskConfig, read_task_config
from elmo.tasks.word_index import build_word_index, embedding_matrix

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets" / "tasks"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.json")))
def test_shipped_configs_load(name):
    config = read_task_config(CONFIGS / name)
    assert config.task in name


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'elmo.layer'"):
        TaskConfig.from_dict({"task": "ner", "elmo": {"layer": "top"}})
    with pytest.raises(ConfigError, match="elmo.layers: expected 'all' or 'top'"):
        TaskConfig.from_dict({"task": "ner", "elmo": {"layers": "middle"}})
    with pytest.raises(ConfigError, match="task: expected one of"):
        TaskConfig.from_dict({"task": "pos"})
    with pytest.raises(ConfigError, match="unknown config key 'train.epoch'"):
        TaskConfig(task="ner").replace(**{"train.epoch": 3})
    bad = tmp_path / "c.json"
    bad.write_text("{ nope")
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        read_task_config(bad)


def test_replace_round_trips_through_json():
    config = TaskConfig(task="sst").replace(**{"elmo.at_output": True, "train.seed": 3})
    again = TaskConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.elmo.at_output and again.train.seed == 3


def test_word_index_and_embedding_matrix():
    index = build_word_index(["the", "Paris"], [["The", "cat", "cat", "Paris"]])
    assert index.words == ["<pad>", "<unk>", "the", "Paris", "cat"]
    assert index.encode(["The", "PARIS", "dog"]) == [2, 1, 1]  # lower-case fallback; unknown -> 1
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    matrix = embedding_matrix(index, ["the", "Paris"], vectors, seed=0)
    assert matrix.shape == (5, 3) and not matrix[0].any()
    np.testing.assert_array_equal(matrix[2:4], vectors)


def test_take_is_reproducible_and_keeps_order():
    items = list(range(100))
    assert take(items, 0.1, seed=1) == take(items, 0.1, seed=1) == sorted(take(items, 0.1, seed=1))
    assert len(take(items, 0.1)) == 10 and len(take(items, 0.001)) == 1 and len(take(items, 1.0, limit=5)) == 5


def test_shuffled_batches_cover_every_index_once_in_length_sorted_batches():
    import torch

    from elmo.tasks.task_trainer import shuffled_batches

    lengths = [(i * 7) % 23 + 1 for i in range(100)]
    batches = shuffled_batches(lengths, 8, torch.Generator().manual_seed(0), pool=4)
    assert sorted(i for b in batches for i in b) == list(range(100))
    assert all([lengths[i] for i in b] == sorted(lengths[i] for i in b) for b in batches)
    assert batches == shuffled_batches(lengths, 8, torch.Generator().manual_seed(0), pool=4)


def test_take_nests_smaller_fractions_in_larger_ones():
    items = list(range(1000))
    assert set(take(items, 0.01, seed=3)) <= set(take(items, 0.1, seed=3)) <= set(items)
    assert len(take(items, 0.1, limit=60)) == 6
