"""bilm-tf training directories (options.json + TensorFlow checkpoints written by TensorFlow) load without TensorFlow
and give the vectors the same weights give from HDF5; the checkpoint the ``checkpoint`` file names is the one read;
bad directories are one line and nothing is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo import StatefulBiLM, batch_to_ids
from elmo.cli import main
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.hdf5 import save_hdf5_weights
from elmo.formats.model_files import load_bilm, read_model_config
from elmo.formats.tensorflow.bilm_tf_checkpoint import checkpoint_prefix, read_bilm_tf_training_state
from elmo.modules.bilm import build_bilm
from tests.conftest import random_bilm, tiny_config
from tests.formats.bilm_tf_files import (
    bilm_tf_variables,
    save_v2,
    tensorflow,
    write_bilm_tf_dir,
    write_bundle_dir,
)
from tests.formats.test_load_memory import peak_growth

ATOL = 1e-6
OTHER_SHAPES = {
    "3-layers-tanh-no-residual-1-highway": BiLMConfig(
        lstm=LSTMConfig(dim=12, projection_dim=8, n_layers=3, cell_clip=3, proj_clip=3, use_skip_connections=False),
        char_cnn=CharCNNConfig(filters=[(1, 4), (2, 6), (3, 8)], embedding_dim=5, n_highway=1, activation="tanh"),
    ),
    "one-layer": tiny_config(n_layers=1),
    "no-lstm-projection": tiny_config(projection=False, n_highway=0),
}
SENTENCES = [["The", "cat", "sat", "."], ["Ångström", "units", "are", "tiny", "!", "x"], ["a"]]


def _softmax(rows: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, dim)).astype(np.float32), rng.standard_normal(rows).astype(np.float32)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, fixture_dir) -> dict[str, Path]:
    """One module-scoped set of TF-written directories (TensorFlow's import is the slow part)."""
    root = tmp_path_factory.mktemp("bilm_tf")
    fixture = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    out = {"fixture": root / "fixture"}
    write_bilm_tf_dir(out["fixture"], fixture, *_softmax(30, 16), shards=3, older=random_bilm(fixture.config, seed=1))
    for name, config in OTHER_SHAPES.items():
        out[name] = root / name
        bilm = random_bilm(config, seed=2)
        write_bilm_tf_dir(out[name], bilm, *_softmax(15, config.lstm.projection_dim))
        save_hdf5_weights(bilm, root / f"{name}.hdf5")
    return out


def _vectors(bilm) -> list[np.ndarray]:
    with torch.no_grad():
        out = bilm(batch_to_ids(SENTENCES))
    return [layer.numpy() for layer in out.layers]


@pytest.mark.slow
def test_fixture_checkpoint_gives_the_hdf5_vectors_and_bilm_tfs_own_outputs(
    dirs, fixture_dir, fixture_sentences, fixture_expected
):
    from_hdf5 = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    from_tf = load_bilm(dirs["fixture"])
    for ours, reference in zip(_vectors(from_tf), _vectors(from_hdf5)):
        np.testing.assert_allclose(ours, reference, atol=ATOL, rtol=0)
    stateful = StatefulBiLM(from_tf)  # bilm-tf's own test protocol (tests/test_reference_fixture.py)
    with torch.no_grad():
        for i in range(10):
            batch = [fixture_sentences[k][i] for k in range(3)]
            top = stateful(batch_to_ids(batch, add_sentence_boundaries=True)).layers[-1][:, 1:]
            for k, sentence in enumerate(batch):
                np.testing.assert_allclose(top[k, : len(sentence)].numpy(), fixture_expected[k][i], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", list(OTHER_SHAPES))
def test_other_shapes_give_the_hdf5_vectors(dirs, name):
    config = OTHER_SHAPES[name]
    reference = build_bilm(config).eval()
    from elmo.formats.hdf5 import load_hdf5_weights

    load_hdf5_weights(reference, dirs[name].parent / f"{name}.hdf5")
    loaded = load_bilm(dirs[name])
    assert read_model_config(dirs[name]).lstm == config.lstm
    for ours, theirs in zip(_vectors(loaded), _vectors(reference)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)


def test_the_checkpoint_file_names_the_latest_not_the_largest_name(dirs, tmp_path):
    directory = dirs["fixture"]
    assert checkpoint_prefix(directory) == directory / "model.ckpt-10000"  # "model.ckpt-7500" sorts after it
    newest, older = load_bilm(directory), load_bilm(directory, checkpoint="model.ckpt-7500")
    assert torch.equal(older.state_dict()["token_encoder.highway.carry.0.weight"],
                       random_bilm(newest.config, seed=1).state_dict()["token_encoder.highway.carry.0.weight"])
    assert not torch.equal(newest.state_dict()["token_encoder.highway.carry.0.weight"],
                           older.state_dict()["token_encoder.highway.carry.0.weight"])
    copy = tmp_path / "no-state-file"
    shutil.copytree(directory, copy)
    (copy / "checkpoint").unlink()
    assert checkpoint_prefix(copy) == copy / "model.ckpt-10000"  # by step number


def test_training_state_carries_softmax_accumulators_and_step(dirs):
    directory = dirs["fixture"]
    bilm = load_bilm(directory)
    state = read_bilm_tf_training_state(directory, bilm)
    variables = bilm_tf_variables(bilm, *_softmax(30, 16))  # the same values the fixture wrote
    assert state.global_step == 10000 and state.checkpoint.name == "model.ckpt-10000"
    assert np.array_equal(state.softmax_weight.numpy(), variables["lm/softmax/W"])
    assert np.array_equal(state.accumulators["softmax.bias"].numpy(), variables["lm/softmax/b/Adagrad"])
    kernel = variables["lm/RNN_1/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel/Adagrad"]  # (in + P, 4C)
    assert np.array_equal(state.accumulators["bilm.backward_lstm.layers.0.input_linearity.weight"].numpy(),
                          kernel[:16].T)
    assert np.array_equal(state.accumulators["bilm.backward_lstm.layers.0.state_linearity.weight"].numpy(),
                          kernel[16:].T)
    chars = state.accumulators["bilm.token_encoder.char_embedding.weight"].numpy()
    assert np.all(chars[0] == 1.0) and np.array_equal(chars[1:], variables["lm/char_embed/Adagrad"])
    params = dict(bilm.named_parameters())
    assert {k.removeprefix("bilm.") for k in state.accumulators} - {"softmax.weight", "softmax.bias"} == set(params)


@pytest.mark.slow
def test_cli_convert_and_checkpoint_flag(dirs, tmp_path):
    out = tmp_path / "converted"
    assert main(["-q", "convert", "--model", str(dirs["fixture"]), str(out), "--to", "hdf5"]) == 0
    assert torch.equal(load_bilm(out).state_dict()["forward_lstm.layers.1.projection.weight"],
                       load_bilm(dirs["fixture"]).state_dict()["forward_lstm.layers.1.projection.weight"])
    older = tmp_path / "older"
    assert main(["-q", "convert", "--model", str(dirs["fixture"]), "--checkpoint", "model.ckpt-7500", str(older)]) == 0
    expected = load_bilm(dirs["fixture"], checkpoint="model.ckpt-7500").state_dict()
    assert all(torch.equal(v, expected[k]) for k, v in load_bilm(older).state_dict().items())


def _one_line_error(argv, capsys, *needles) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_bad_directories_are_one_line_and_nothing_is_written(dirs, tmp_path, capsys):
    source = dirs["3-layers-tanh-no-residual-1-highway"]
    # an index missing a tensor: the checkpoint saved without one of the biLM's variables
    missing = tmp_path / "missing"
    missing.mkdir()
    shutil.copy(source / "options.json", missing)
    bilm = load_bilm(source)
    variables = bilm_tf_variables(bilm, *_softmax(15, 8))
    del variables["lm/RNN_0/rnn/multi_rnn_cell/cell_2/lstm_cell/projection/kernel"]
    save_v2(missing / "model.ckpt-5", variables)
    out = tmp_path / "out"
    _one_line_error(["convert", "--model", str(missing), str(out)], capsys, "model.ckpt-5.index: missing variable",
                    "lm/RNN_0/rnn/multi_rnn_cell/cell_2/lstm_cell/projection/kernel")
    # a truncated data shard and a flipped byte
    for damage in ("truncated", "flipped"):
        broken = tmp_path / damage
        shutil.copytree(source, broken)
        shard = broken / "model.ckpt-10000.data-00000-of-00001"
        data = bytearray(shard.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        else:
            data[40] ^= 0x04  # inside lm/CNN/W_cnn_0 (or another early biLM variable)
        shard.write_bytes(bytes(data))
        _one_line_error(["convert", "--model", str(broken), str(out)], capsys, str(shard),
                        "truncated" if damage == "truncated" else "CRC32C mismatch")
    # options that do not describe the weights
    wrong = tmp_path / "wrong-options"
    shutil.copytree(source, wrong)
    options = json.loads((wrong / "options.json").read_text())
    options["lstm"]["dim"] = 14
    (wrong / "options.json").write_text(json.dumps(options))
    _one_line_error(["convert", "--model", str(wrong), str(out)], capsys, "has shape", "options.json expects")
    # the checkpoint file names a checkpoint that is not there
    stale = tmp_path / "stale"
    shutil.copytree(source, stale)
    (stale / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-99"\n')
    _one_line_error(["convert", "--model", str(stale), str(out)], capsys, "names checkpoint /elsewhere/model.ckpt-99",
                    "model.ckpt-10000")
    _one_line_error(["convert", "--model", str(source), "--checkpoint", "model.ckpt-3", str(out)], capsys,
                    "no checkpoint model.ckpt-3", "model.ckpt-10000")
    assert not out.exists()


def test_a_checkpoint_of_another_model_is_refused(tmp_path, capsys):
    tf = tensorflow()
    keras_model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    other = tmp_path / "keras"
    other.mkdir()
    tf.train.Checkpoint(model=keras_model).write(str(other / "model.ckpt-1"))
    (other / "options.json").write_text(json.dumps(tiny_config().to_options()))
    _one_line_error(["convert", "--model", str(other), str(tmp_path / "out")], capsys,
                    "not a bilm-tf checkpoint: no variable under 'lm/'")
    assert not (tmp_path / "out").exists()


def test_checkpoint_keyword_needs_a_bilm_tf_directory(tmp_path):
    with pytest.raises(ConfigError, match=r"demo: checkpoint goes with a bilm-tf training directory \(options.json "
                       r"\+ model.ckpt-N\); this is a Hugging Face-style folder"):
        load_bilm("demo", checkpoint="model.ckpt-1")
    with pytest.raises(WeightFileError):
        checkpoint_prefix(tmp_path)




@pytest.mark.slow
def test_opening_a_checkpoint_with_optimizer_slots_reads_only_the_weights(tmp_path):
    """Peak RSS of load_bilm over a checkpoint over 2x the biLM (Adagrad slots, softmax) stays near the weights: the
    arrays read become the parameters, and a transposed variable is read one block of rows at a time into its
    parameter. The baseline has loaded a tiny checkpoint once: the first use of the code (torch's and ours, a few MB
    whatever the model's size) is not the reader's memory. Measured 1.03x on AMD EPYC, 2 cores (2026-12-07)."""
    config = BiLMConfig(
        lstm=LSTMConfig(dim=768, projection_dim=384, n_layers=4, cell_clip=3, proj_clip=3),
        char_cnn=CharCNNConfig(filters=[(1, 64), (2, 128), (3, 192)], embedding_dim=16, n_highway=2),
    )
    bilm = build_bilm(config)
    directory = tmp_path / "big"
    write_bilm_tf_dir(directory, bilm, *_softmax(10_000, 384))
    del bilm
    tiny = tmp_path / "tiny"
    write_bilm_tf_dir(tiny, build_bilm(tiny_config()), *_softmax(50, tiny_config().lstm.projection_dim))
    checkpoint_bytes = sum(p.stat().st_size for p in directory.glob("model.ckpt-*"))
    before, peak, weights = peak_growth(directory, tiny)
    print(f"checkpoint {checkpoint_bytes / 1e6:.1f} MB, biLM weights {weights / 1e6:.1f} MB, peak RSS growth "
          f"{(peak - before) / 1e6:.1f} MB ({(peak - before) / weights:.2f}x)")
    assert checkpoint_bytes > 2 * weights
    assert peak - before < 1.2 * weights, (peak - before, weights, checkpoint_bytes)


# ---------------------------------------------------------------- files TensorFlow would not write (no TensorFlow)


def _vectors_of(bilm) -> list[np.ndarray]:
    with torch.no_grad():
        return [x.numpy() for x in bilm(batch_to_ids([["the", "cat", "sat"], ["a"]])).layers]


@pytest.mark.parametrize("named, which", [
    ("/home/someone/bilm-tf/run/model.ckpt-1", "own"),  # the training machine's path: its file name, looked up here
    ("C:\\train\\run\\model.ckpt-1", "own"),
    ("sub/../model.ckpt-1", "own"),  # relative, and inside
    ("../outside/model.ckpt-99", None),  # relative, and outside: refused, though it exists
    ("sub/../../outside/model.ckpt-99", None),
])
def test_a_checkpoint_file_names_only_checkpoints_inside_its_folder(tmp_path, named, which):
    own, other = random_bilm(tiny_config(), seed=1), random_bilm(tiny_config(), seed=2)
    write_bundle_dir(tmp_path / "outside", other, step=99)
    write_bundle_dir(tmp_path / "run", own, step=1, checkpoint_name=named)
    if which is None:
        with pytest.raises(WeightFileError, match=r"checkpoint: names checkpoint .*model\.ckpt-99, which is outside "
                                                  r".*run; a model folder's checkpoint file may name only"):
            load_bilm(tmp_path / "run")
        return
    for ours, theirs in zip(_vectors_of(load_bilm(tmp_path / "run")), _vectors_of(own)):
        np.testing.assert_array_equal(ours, theirs)


def test_the_log_line_says_the_settings_and_where_they_came_from(tmp_path, caplog):
    write_bundle_dir(tmp_path / "run", random_bilm(tiny_config()))
    with caplog.at_level("INFO"):
        load_bilm(tmp_path / "run")
    assert ("activation relu (options.json), cell_clip 3 (options.json), proj_clip 3 (options.json), residual on "
            "(options.json), max_characters_per_token 50 (options.json)") in caplog.text


def test_slices_are_checked_by_position(tmp_path):
    """A variable in slices loads when they tile it; slices that overlap (with as many values in all as the variable
    has: a count would pass, and leave rows of whatever memory held) or leave a gap are one line each."""
    bilm = random_bilm(tiny_config())
    kernel = "lm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel"
    whole = bilm_tf_variables(bilm, *_softmax(20, 8))[kernel]  # (16, 48)
    tilings = {
        "tiled": [([(0, 5), (0, -1)], whole[:5]), ([(5, 11), (0, 20)], whole[5:, :20]),
                  ([(5, 11), (20, 28)], whole[5:, 20:])],
        "overlapping": [([(0, 9), (0, -1)], whole[:9]), ([(7, 9), (0, -1)], whole[7:])],
        "gap": [([(0, 5), (0, -1)], whole[:5]), ([(6, 10), (0, -1)], whole[6:])],
    }
    for name, parts in tilings.items():
        write_bundle_dir(tmp_path / name, bilm, slices={kernel: parts}, declare={kernel: {"shape": whole.shape}})
    for ours, theirs in zip(_vectors_of(load_bilm(tmp_path / "tiled")), _vectors_of(bilm)):
        np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(WeightFileError, match=rf"model\.ckpt-1\.index: tensor '{kernel}': two of its slices overlap"):
        load_bilm(tmp_path / "overlapping")
    with pytest.raises(WeightFileError, match=rf"tensor '{kernel}': its slices cover 720 of its 768 values"):
        load_bilm(tmp_path / "gap")


def test_declared_sizes_are_held_to_the_bytes_before_anything_is_allocated(tmp_path):
    bilm = random_bilm(tiny_config())
    softmax = {"lm/softmax/W": {"shape": (5 * 10**6, 8), "size": 160 * 10**6},
               "lm/softmax/b": {"shape": (5 * 10**6,), "size": 20 * 10**6}}
    write_bundle_dir(tmp_path / "softmax", bilm, declare=softmax)
    with pytest.raises(WeightFileError, match=r"model\.ckpt-1\.data-00000-of-00001: tensor 'lm/softmax/W' needs bytes "
                                              r"\d[\d,]*\.\.[\d,]+, but the file ends at byte"):
        read_bilm_tf_training_state(tmp_path / "softmax", load_bilm(tmp_path / "softmax"))
    write_bundle_dir(tmp_path / "rows", bilm, declare={"lm/softmax/W": {"shape": (10**9, 8), "size": 32 * 10**9}})
    with pytest.raises(WeightFileError, match=r"lm/softmax/W declares 1,000,000,000 rows \(words\); the limit is "
                                              r"10,000,000"):
        read_bilm_tf_training_state(tmp_path / "rows", load_bilm(tmp_path / "rows"))
