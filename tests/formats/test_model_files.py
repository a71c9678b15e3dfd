from __future__ import annotations

import json

import h5py
import pytest
import torch
from safetensors.torch import save_file

from elmo.cli import main as cli_main
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.model_files import load_bilm, read_model_config, read_options, save_bilm
from elmo.text.char_encoding import batch_to_ids
from tests.conftest import random_bilm


def _same_model(a, b) -> None:
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("native", [False, True], ids=["hdf5", "native"])
def test_save_load_round_trip(tmp_path, native):
    bilm = random_bilm()
    save_bilm(bilm, tmp_path / "model", native=native)
    _same_model(bilm, load_bilm(tmp_path / "model"))


def test_written_options_use_the_inference_character_count(tmp_path):
    save_bilm(random_bilm(), tmp_path)
    options = json.loads((tmp_path / "options.json").read_text())
    assert options["char_cnn"]["n_characters"] == 262
    assert read_options(tmp_path / "options.json") == random_bilm().config


@pytest.mark.slow
def test_convert_cli_both_ways(tmp_path, fixture_dir):
    original = ["--options-file", str(fixture_dir / "options.json")]
    original += ["--weight-file", str(fixture_dir / "lm_weights.hdf5")]
    assert cli_main(["convert", *original, str(tmp_path / "native"), "--to", "native"]) == 0
    assert cli_main(["convert", "--model", str(tmp_path / "native"), str(tmp_path / "back"), "--to", "hdf5"]) == 0
    reference = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    _same_model(reference, load_bilm(tmp_path / "native"))
    _same_model(reference, load_bilm(tmp_path / "back"))
    ids = batch_to_ids([["a", "b"]], add_sentence_boundaries=True)
    with torch.no_grad():
        assert torch.equal(reference(ids).layers[-1], load_bilm(tmp_path / "back")(ids).layers[-1])


def test_native_file_with_wrong_shape_is_refused(tmp_path):
    bilm = random_bilm()
    save_bilm(bilm, tmp_path, native=True)
    state = {k: v.clone() for k, v in bilm.state_dict().items()}
    state["token_encoder.projection.weight"] = torch.zeros(3, 3)
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(WeightFileError, match=r"tensor 'token_encoder.projection.weight' has shape \(3, 3\)"):
        load_bilm(tmp_path)


def test_native_file_that_is_not_safetensors_is_refused(tmp_path):
    save_bilm(random_bilm(), tmp_path, native=True)
    (tmp_path / "model.safetensors").write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(WeightFileError, match="model.safetensors: not a readable safetensors file"):
        load_bilm(tmp_path)


def test_missing_model_and_bad_json(tmp_path):
    with pytest.raises(ConfigError, match="absent: no such model directory or archive"):
        load_bilm(tmp_path / "absent")
    (tmp_path / "options.json").write_text('{"lstm": {"dim": 4,\n "projection_dim": }}')
    with pytest.raises(ConfigError, match=r"options.json: invalid JSON at line 2"):
        load_bilm(tmp_path)


def test_written_files_get_ordinary_permissions(tmp_path):
    """Atomic writes go through mkstemp (0600); the finished files must be readable like any other (0666 - umask)."""
    import os

    old = os.umask(0o022)
    try:
        save_bilm(random_bilm(), tmp_path / "h")
        save_bilm(random_bilm(), tmp_path / "n", native=True)
    finally:
        os.umask(old)
    for path in [*(tmp_path / "h").iterdir(), *(tmp_path / "n").iterdir()]:
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_a_directory_and_the_file_pair_together_are_refused(tmp_path):
    """The CLI refuses --model with --options-file/--weight-file; so does the Python API (it used to pick one)."""
    save_bilm(random_bilm(), tmp_path)
    with pytest.raises(ConfigError, match=r"give either a model or options_file \+ weight_file, not both"):
        load_bilm(tmp_path, options_file=tmp_path / "options.json", weight_file=tmp_path / "weights.hdf5")
    save_bilm(random_bilm(), tmp_path / "native", native=True)
    with pytest.raises(ConfigError, match="embedding_file goes with an original model .*; this is a native model"):
        load_bilm(tmp_path / "native", embedding_file=tmp_path / "weights.hdf5")


def test_options_without_char_cnn_say_so(tmp_path):
    """A word-input options file (no char_cnn) over weights without a token table: the error names the real cause."""
    save_bilm(random_bilm(), tmp_path)
    options = json.loads((tmp_path / "options.json").read_text())
    del options["char_cnn"]
    (tmp_path / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFileError, match=r"options.json: no 'char_cnn' block, but .*weights.hdf5 holds a "
                                              r"character CNN: the options file does not describe these weights"):
        load_bilm(tmp_path)
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        del f["char_embed"]
    with pytest.raises(WeightFileError, match=r"no 'char_cnn' block, so the model reads word ids, but .* holds no "
                                              r"token table \(dataset 'embedding'\); pass the table as embedding_file"):
        load_bilm(tmp_path)


@pytest.mark.parametrize("native", [False, True], ids=["hdf5", "native"])
def test_read_model_config_reads_the_options_only(tmp_path, native):
    bilm = random_bilm()
    bilm.config.training = {"batch_size": 7}
    save_bilm(bilm, tmp_path, native=native)
    (tmp_path / ("model.safetensors" if native else "weights.hdf5")).unlink()  # never read
    assert read_model_config(tmp_path) == bilm.config
