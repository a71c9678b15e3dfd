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
