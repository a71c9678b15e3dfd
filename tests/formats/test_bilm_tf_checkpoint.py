"""bilm-tf training directories (options.json + TensorFlow checkpoints written by TensorFlow) load without TensorFlow
and give the vectors the same weights give from HDF5; the checkpoint the ``checkpoint`` file names is the one read;
bad directories are one line and nothing is written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo import StatefulBiLM, batch_to_ids
from elmo.cli import main
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.bilm_tf_checkpoint import checkpoint_prefix, read_bilm_tf_training_state
from elmo.formats.hdf5 import save_hdf5_weights
from elmo.formats.model_files import load_bilm, read_model_config
from elmo.modules.bilm import build_bilm
from tests.conftest import random_bilm, tiny_config
from tests.formats.bilm_tf_files import bilm_tf_variables, save_v2, tensorflow, write_bilm_tf_dir

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
    with pytest.raises(ConfigError, match="checkpoint=model.ckpt-1: a checkpoint is picked in a bilm-tf"):
        load_bilm("demo-not-a-dir", checkpoint="model.ckpt-1")
    with pytest.raises(WeightFileError):
        checkpoint_prefix(tmp_path)


RSS_SCRIPT = textwrap.dedent("""
    import sys
    from elmo.formats.model_files import load_bilm
    from tests.conftest import tiny_config
    from elmo.modules.bilm import build_bilm
    import torch
    build_bilm(tiny_config())  # torch's first-use allocations, before the baseline
    with torch.device("meta"):  # and the modules torch imports once for its meta tensors (~70 MB, any model size)
        build_bilm(tiny_config())
    load_bilm(sys.argv[2])  # and the reader's code paths, once, on a tiny checkpoint: the rest scales with the model

    def status_kb(field):  # VmHWM: the peak of this process's own memory (ru_maxrss keeps a forking parent's)
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    before = status_kb("VmRSS")
    bilm = load_bilm(sys.argv[1])
    peak = status_kb("VmHWM")
    weights = sum(p.numel() * p.element_size() for p in bilm.parameters())
    print(before * 1024, peak * 1024, weights)
""")


def test_opening_a_checkpoint_with_optimizer_slots_reads_only_the_weights(tmp_path):
    """Peak RSS of load_bilm over a checkpoint over 2x the biLM (Adagrad slots, softmax) stays near the weights: the
    arrays read become the parameters, and a transposed variable is read one block of rows at a time into its
    parameter. The baseline has loaded a tiny checkpoint once: the first use of the code (torch's and ours, about
    7 MB whatever the model's size) is not the reader's memory. Measured 1.08-1.12x (1.16-1.21x without that
    warm-up) on AMD EPYC, 2 cores."""
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
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(directory), str(tiny)], capture_output=True,
                            text=True, cwd=root, check=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    before, peak, weights = map(int, result.stdout.split())
    print(f"checkpoint {checkpoint_bytes / 1e6:.1f} MB, biLM weights {weights / 1e6:.1f} MB, peak RSS growth "
          f"{(peak - before) / 1e6:.1f} MB ({(peak - before) / weights:.2f}x)")
    assert checkpoint_bytes > 2 * weights
    assert peak - before < 1.2 * weights, (peak - before, weights, checkpoint_bytes)
