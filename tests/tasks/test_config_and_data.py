from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from elmo.errors import ConfigError
from elmo.precision import Precision
from elmo.settings import SettingError, setting_of
from elmo.tasks import TASK_KINDS, load_task_data, task_kind
from elmo.tasks.data import take
from elmo.tasks.task_config import SECTIONS, TaskConfig, read_task_config
from elmo.tasks.word_index import build_word_index, embedding_matrix

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets" / "tasks"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.json")))
def test_shipped_configs_load(name):
    config = read_task_config(CONFIGS / name)
    assert config.task in name


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'elmo.layer'"):
        TaskConfig.from_dict({"task": "ner", "elmo": {"layer": "top"}})
    with pytest.raises(ConfigError, match="^config: elmo.layers must be one of all, top; got 'middle'$"):
        TaskConfig.from_dict({"task": "ner", "elmo": {"layers": "middle"}})
    with pytest.raises(ConfigError, match="unknown config key 'train.epoch'"):
        TaskConfig(task="ner").replace(**{"train.epoch": 3})
    with pytest.raises(SettingError, match="^train.seed must be >= 0, got -1$") as refused:
        TaskConfig(task="ner").replace(**{"train.seed": -1})
    assert refused.value.command_line == "--seed must be >= 0, got -1"  # as the CLI's override flag says it
    bad = tmp_path / "c.json"
    bad.write_text("{ nope")
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        read_task_config(bad)


BAD_VALUES = [
    ({"train": {"learning_rate": math.inf}}, "train.learning_rate must be a finite number, got inf"),
    ({"train": {"learning_rate": math.nan}}, "train.learning_rate must be a finite number, got nan"),
    ({"train": {"epochs": -1}}, "train.epochs must be >= 1, got -1"),
    ({"train": {"epochs": 2.5}}, "train.epochs must be a whole number, got 2.5"),
    ({"elmo": {"dropout": "0.5"}}, "elmo.dropout must be a number, got '0.5'"),
    ({"elmo": {"dropout": 1.0}}, "elmo.dropout must be in [0, 1), got 1.0"),
    ({"elmo": {"enabled": "yes"}}, "elmo.enabled must be true or false, got 'yes'"),
    ({"model": {"classifier": "cnn"}}, "model.classifier must be one of maxpool, bcn; got 'cnn'"),
    ({"train": {"epoch": 3}}, "unknown key 'train.epoch' (known: "),
    ({"train": [3]}, "'train' must be a JSON object"),
    ({"task": "pos"}, "task must be one of ner, sst; got 'pos'"),
]
"""A config file's section and the error (after ``<file>: ``)."""


def bad_config(path: Path, section: dict) -> Path:
    """The tiny NER config with ``section`` merged in, written as JSON (``Infinity`` and ``NaN`` as Python writes
    them)."""
    data = json.loads((CONFIGS / "ner-tiny.json").read_text())
    for key, value in section.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) and key in data else value
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("section, error", BAD_VALUES)
def test_a_bad_value_in_a_config_file_is_one_line_naming_the_file_and_the_key(section, error, tmp_path):
    path = bad_config(tmp_path / "ner.json", section)
    with pytest.raises(ConfigError) as refused:
        read_task_config(path)
    assert str(refused.value).startswith(f"{path}: {error}") and "\n" not in str(refused.value)


def test_an_unknown_task_kind_is_one_line_listing_the_known_kinds():
    known = ", ".join(TASK_KINDS)
    with pytest.raises(ConfigError, match=f"^task must be one of {known}; got 'pos'$"):
        task_kind("pos")
    with pytest.raises(ConfigError, match=f"^task must be one of {known}; got 'pos'$"):
        TaskConfig(task="pos")
    with pytest.raises(ConfigError, match=f"^my.json: task must be one of {known}; got 'pos'$"):
        TaskConfig.from_dict({"task": "pos"}, source="my.json")
    with pytest.raises(ConfigError, match=f"^my.json: missing 'task' \\(one of {known}\\)$"):
        TaskConfig.from_dict({}, source="my.json")
    with pytest.raises(ConfigError, match=f"^task must be one of {known}; got 'pos'$"):
        load_task_data("pos", "train.txt", "dev.txt")  # before any file is opened


def test_every_setting_has_a_help_line_and_the_defaults_did_not_move():
    for section in SECTIONS.values():
        for f in dataclasses.fields(section):
            assert setting_of(f).help, f"{section.__name__}.{f.name} has no help line"
    config = TaskConfig(task="ner").to_dict()
    assert config["elmo"] == {"enabled": True, "layers": "all", "l2_coef": 0.001, "dropout": 0.5,
                              "do_layer_norm": False, "at_output": False, "cached": True, "embed_batch_size": 64,
                              "precision": Precision.AUTO, "initial_state": "zero"}
    assert config["model"] == {"word_dim": 100, "freeze_word_vectors": False, "char_embedding_dim": 16,
                               "char_filters": 128, "char_width": 3, "max_characters_per_token": 20,
                               "hidden_dim": 200, "num_layers": 2, "dropout": 0.5, "classifier": "maxpool",
                               "classifier_hidden_dim": 200, "bio_constraints": True}
    assert config["train"] == {"epochs": 20, "batch_size": 32, "learning_rate": 0.001, "grad_clip": 5.0,
                               "patience": 5, "seed": 0, "max_vocab": 50000}


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
