from __future__ import annotations

import json

import pytest

from elmo.config import BiLMConfig, medium_config, original_config, small_config
from elmo.errors import ConfigError


def test_fixture_options_round_trip(fixture_dir):
    options = json.loads((fixture_dir / "options.json").read_text())
    config = BiLMConfig.from_options(options)
    assert config.lstm.dim == 64 and config.lstm.projection_dim == 16 and not config.lstm.use_skip_connections
    assert config.char_cnn.filters == [(1, 4), (2, 8), (3, 16), (4, 32), (5, 64)]
    assert config.to_options() == {**options, "bidirectional": True}


def test_training_keys_are_kept():
    options = original_config().to_options()
    options.update({"batch_size": 128, "unroll_steps": 20, "n_tokens_vocab": 793471, "dropout": 0.1})
    assert BiLMConfig.from_options(options).to_options() == options


@pytest.mark.parametrize("make", [original_config, medium_config, small_config])
def test_named_configs_round_trip(make):
    config = make()
    assert BiLMConfig.from_options(config.to_options()) == config


def test_published_original_options_parse():
    options = {
        "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096,
                 "n_layers": 2},
        "char_cnn": {"activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                                        [7, 1024]],
                     "n_highway": 2, "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50},
    }
    assert BiLMConfig.from_options(options) == original_config()


def test_unknown_key_is_named():
    options = original_config().to_options()
    options["lstm"]["n_layer"] = 2
    with pytest.raises(ConfigError, match=r"opts.json: unknown key .lstm.n_layer."):
        BiLMConfig.from_options(options, source="opts.json")


def test_missing_key_is_named():
    options = original_config().to_options()
    del options["lstm"]["projection_dim"]
    with pytest.raises(ConfigError, match=r"missing required key 'lstm.projection_dim'"):
        BiLMConfig.from_options(options)


def test_bad_values_are_explained():
    options = original_config().to_options()
    options["char_cnn"]["activation"] = "gelu"
    with pytest.raises(ConfigError, match="char_cnn.activation"):
        BiLMConfig.from_options(options)
    options = original_config().to_options()
    options["lstm"]["projection_dim"] = 8192
    with pytest.raises(ConfigError, match="cannot exceed"):
        BiLMConfig.from_options(options)


def _with(key: str, value):
    options = original_config().to_options()
    *path, leaf = key.split(".")
    node = options
    for part in path:
        node = node[part]
    node[leaf] = value
    return options


@pytest.mark.parametrize("key, value, message", [
    ("lstm.dim", 4e6, r"lstm\.dim: expected an integer, got 4000000\.0"),
    ("lstm.dim", 4_000_000, r"lstm\.dim: 4000000 exceeds the limit of 32,768"),
    ("lstm.n_layers", 1_000_000, r"lstm\.n_layers: 1000000 exceeds the limit of 16"),
    ("lstm.n_layers", 2.0, r"lstm\.n_layers: expected an integer, got 2\.0"),
    ("lstm.projection_dim", True, r"lstm\.projection_dim: expected an integer, got True"),
    ("lstm.cell_clip", float("nan"), r"lstm\.cell_clip: expected a finite number > 0 or null \(no clip\), got nan"),
    ("lstm.cell_clip", -1, r"lstm\.cell_clip: expected a finite number > 0 or null \(no clip\), got -1"),
    ("lstm.proj_clip", float("inf"), r"lstm\.proj_clip: expected a finite number > 0"),
    ("lstm.proj_clip", "3", r"lstm\.proj_clip: expected a positive number or null, got '3'"),
    ("lstm.use_skip_connections", "false", r"lstm\.use_skip_connections: expected true or false, got 'false'"),
    ("lstm.use_skip_connections", 1, r"lstm\.use_skip_connections: expected true or false, got 1"),
    ("char_cnn.n_highway", 1.7, r"char_cnn\.n_highway: expected an integer, got 1\.7"),
    ("char_cnn.embedding.dim", -3, r"char_cnn\.embedding\.dim: expected an integer >= 1, got -3"),
    ("char_cnn.max_characters_per_token", 10**9, r"char_cnn\.max_characters_per_token: 1000000000 exceeds the limit"),
    ("char_cnn.filters", [[1, 32], [2, 10**8]], r"char_cnn\.filters\[1\] n_filters: 100000000 exceeds the limit"),
    ("char_cnn.filters", [[1, 8192], [2, 8192], [3, 8]], r"char_cnn\.filters: 16,392 filters in all exceed the limit"),
    ("char_cnn.filters", [[60, 32]], r"char_cnn\.filters\[0\] width: 60 exceeds max_characters_per_token 50"),
    ("char_cnn.filters", [[1, 32]] * 65, r"char_cnn\.filters: 65 convolutions exceed the limit of 64"),
    ("char_cnn.filters", "[[1, 32]]", r"char_cnn\.filters: expected a non-empty list of \[width, n_filters\] pairs"),
    ("char_cnn.n_characters", 261.0, r"char_cnn\.n_characters: expected an integer, got 261\.0"),
    ("char_cnn.activation", "gelu", r"char_cnn\.activation: expected 'relu' or 'tanh', got 'gelu'"),
    ("bidirectional", "true", r"bidirectional: expected true or false, got 'true'"),
])
def test_every_value_is_checked_for_type_and_limit_naming_file_and_key(key, value, message):
    with pytest.raises(ConfigError, match=r"^opts\.json: " + message) as raised:
        BiLMConfig.from_options(_with(key, value), source="opts.json")
    assert "\n" not in str(raised.value)


def test_the_limits_admit_every_published_size():
    """The original (4096 cells, 2048 filters), ELMoForManyLangs' 140,384-word table, bilm-tf's null n_highway and
    absent clips: all within the limits."""
    assert BiLMConfig.from_options(original_config().to_options()) == original_config()
    options = _with("char_cnn.n_highway", None)
    del options["lstm"]["cell_clip"], options["lstm"]["proj_clip"]
    config = BiLMConfig.from_options(options)
    assert config.char_cnn.n_highway == 0 and config.lstm.cell_clip is None and config.lstm.proj_clip is None
    options = {"lstm": original_config().to_options()["lstm"], "manylangs_token_embedder": {
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]], "char_dim": 50,
        "word_dim": 100, "n_highway": 2, "n_characters": 15_000, "n_words": 140_384, "max_characters_per_token": 50}}
    assert BiLMConfig.from_options(options).manylangs.n_words == 140_384
