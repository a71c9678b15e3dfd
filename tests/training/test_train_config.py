"""Training presets: the learning-rate schedules and the validation of the new keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from elmo.errors import ConfigError
from elmo.precision import Precision
from elmo.training.train_config import TrainConfig, lr_factor

SRC = Path(__file__).resolve().parents[2] / "src"


def test_constant_schedule_is_the_original():
    assert [lr_factor("constant", s, 100) for s in (0, 50, 99)] == [1.0, 1.0, 1.0]


def test_warmup_then_linear_decay_reaches_zero_at_the_end():
    factors = [lr_factor("linear", s, 110, warmup_steps=10) for s in range(110)]
    assert factors[:3] == pytest.approx([0.1, 0.2, 0.3])
    assert factors[9] == 1.0 and factors[10] == 1.0
    assert factors[60] == pytest.approx(0.5)
    assert factors[-1] == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(factors[9:], factors[10:]))


def test_cosine_decay():
    assert lr_factor("cosine", 0, 100) == 1.0
    assert lr_factor("cosine", 50, 100) == pytest.approx(0.5)
    assert lr_factor("cosine", 25, 100) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor("cosine", 200, 100) == pytest.approx(0.0)


@pytest.mark.parametrize("key, value, message", [
    ("optimizer", "sgd", "optimizer must be one of adagrad, adam; got 'sgd'"),
    ("lr_schedule", "step", "lr_schedule must be one of constant, linear, cosine; got 'step'"),
    ("warmup_steps", -1, "warmup_steps must be >= 0, got -1"),
    ("weight_dropout", 1.0, r"weight_dropout must be in \[0, 1\), got 1.0"),
    ("compile", "yes", "compile must be true or false, got 'yes'"),
    ("precision", "fp16", "precision must be one of auto, fp32, bf16; got 'fp16'"),
    ("learning_rate", float("inf"), "learning_rate must be a finite number, got inf"),
    ("learning_rate", float("nan"), "learning_rate must be a finite number, got nan"),
    ("learning_rate", 0, "learning_rate must be > 0, got 0"),
    ("batch_size", 2.5, "batch_size must be a whole number, got 2.5"),
    ("all_clip_norm_val", "10", "all_clip_norm_val must be a number, got '10'"),
])
def test_bad_values_are_named(key, value, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**{key: value})


def test_the_earlier_name_of_a_key_is_read_under_its_new_name():
    """Run directories and checkpoints written before ``compile_lstm`` became ``compile`` still load."""
    from elmo.training.presets import load_preset
    from elmo.training.train_config import merge_preset, split_preset

    data = merge_preset(*load_preset("tiny", {}))
    del data["compile"]
    data["compile_lstm"] = True
    assert split_preset(data, "old/train_config.json")[1].compile is True


@pytest.mark.parametrize("old, precision", [(True, Precision.BF16), (False, Precision.FP32)])
def test_the_boolean_bf16_key_reads_as_a_precision(old, precision, tmp_path):
    from elmo.training.presets import load_preset
    from elmo.training.train_config import merge_preset, split_preset

    data = merge_preset(*load_preset("tiny", {}))
    del data["precision"]
    data["bf16"] = old
    _, train = split_preset(data, "old/train_config.json")
    assert train.precision is precision and merge_preset(*split_preset(data, "x"))["precision"] == precision.value
    with pytest.raises(ConfigError, match="old/train_config.json: bf16: expected true or false, got 1"):
        split_preset({**data, "bf16": 1}, "old/train_config.json")
    with pytest.raises(ConfigError, match="'bf16' is the earlier name of 'precision'"):
        split_preset({**data, "precision": "bf16"}, "old/train_config.json")
    (tmp_path / "old.json").write_text(json.dumps(data))  # a command-line override replaces the file's old spelling
    assert load_preset(str(tmp_path / "old.json"), {"precision": "fp32"})[1].precision is Precision.FP32
    assert load_preset(str(tmp_path / "old.json"), {"bf16": not old})[1].precision is not precision


def test_retired_keys_read_when_off_and_are_refused_when_on():
    from elmo.training.presets import load_preset
    from elmo.training.train_config import merge_preset, split_preset

    data = merge_preset(*load_preset("tiny", {}))
    off = {**data, "variational_dropout": False, "average_last": 0.0}
    assert split_preset(off, "old/train_config.json")[1] == split_preset(data, "new")[1]
    for key, on in (("variational_dropout", True), ("average_last", 0.5)):
        with pytest.raises(ConfigError, match=f"old/train_config.json: '{key}' is no longer supported"):
            split_preset({**data, key: on}, "old/train_config.json")


def test_a_bad_command_line_value_names_the_preset_and_the_options():
    from elmo.training.presets import load_preset

    with pytest.raises(ConfigError, match=r"ptb.json with the command-line options: weight_dropout must be in "
                                          r"\[0, 1\), got 1.5$"):
        load_preset("ptb", {"weight_dropout": 1.5})


@pytest.mark.parametrize("literal", ["Infinity", "NaN", "-Infinity"])
def test_a_preset_file_with_a_non_finite_number_is_refused_naming_the_key(literal, tmp_path):
    """JSON as Python reads it accepts these literals; a learning rate of inf used to crash deep in training."""
    from elmo.training.presets import load_preset

    text = (SRC / "elmo" / "presets" / "tiny.json").read_text()
    path = tmp_path / "bad.json"
    path.write_text(text.replace('"learning_rate": 0.2', f'"learning_rate": {literal}'))
    assert literal in path.read_text()
    with pytest.raises(ConfigError, match=rf"bad.json: learning_rate must be a finite number, got {float(literal)}$"):
        load_preset(str(path), {})
