"""The original weight layout: load -> save -> load is bit-exact, and mismatches give one-line errors."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest
import torch

from elmo.errors import WeightFileError
from elmo.formats.hdf5 import load_hdf5_weights, save_hdf5_weights
from elmo.formats.model_files import load_bilm, read_options
from elmo.modules.bilm import build_bilm
from elmo.text.char_encoding import batch_to_ids
from tests.conftest import random_bilm, tiny_config


def _datasets(path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_fixture_save_writes_the_original_file_back_bit_for_bit(tmp_path, fixture_dir):
    bilm = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    save_hdf5_weights(bilm, tmp_path / "weights.hdf5")
    original, ours = _datasets(fixture_dir / "lm_weights.hdf5"), _datasets(tmp_path / "weights.hdf5")
    assert sorted(original) == sorted(ours)
    for name, array in original.items():
        assert ours[name].dtype == np.float32 and ours[name].shape == array.shape, name
        assert np.array_equal(ours[name], array), name


def test_fixture_char_embedding_gets_a_zero_padding_row(fixture_dir):
    bilm = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    table = bilm.token_encoder.char_embedding.weight
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as f:
        assert np.array_equal(table[1:].detach().numpy(), f["char_embed"][...])
    assert table.shape == (262, 4) and table[0].eq(0).all()


@pytest.mark.parametrize(
    "config",
    [
        tiny_config(residual=True),
        tiny_config(residual=False, n_highway=0),
        tiny_config(projection=False, n_highway=3),
        tiny_config(n_layers=1),
        tiny_config(n_layers=3),
    ],
    ids=["residual", "no-highway", "no-lstm-projection", "one-layer", "three-layers"],
)
def test_round_trip_for_other_architectures(tmp_path, config):
    bilm = random_bilm(config)
    save_hdf5_weights(bilm, tmp_path / "w.hdf5")
    loaded = build_bilm(config).eval()
    load_hdf5_weights(loaded, tmp_path / "w.hdf5")
    for (name, a), (_, b) in zip(bilm.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    ids = batch_to_ids([["round", "trip"]], add_sentence_boundaries=True)
    with torch.no_grad():
        torch.testing.assert_close(bilm(ids).layers[-1], loaded(ids).layers[-1], rtol=0, atol=0)
    names = set(_datasets(tmp_path / "w.hdf5"))
    assert ("CNN_proj/W_proj" in names) == (config.char_cnn.n_filters != config.lstm.projection_dim)
    assert ("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0" in names) == config.lstm.has_projection
    assert f"RNN_0/RNN/MultiRNNCell/Cell{config.lstm.n_layers - 1}/LSTMCell/W_0" in names


def test_one_layer_training_dump_names_load(tmp_path):
    """The original trainer names a one-layer model's cell RNN_d/RNN/LSTMCell (no MultiRNNCell scope)."""
    config = tiny_config(n_layers=1)
    bilm = random_bilm(config)
    save_hdf5_weights(bilm, tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "r+") as f:
        for d in (0, 1):
            for leaf in ("W_0", "B", "W_P_0"):
                f.move(f"RNN_{d}/RNN/MultiRNNCell/Cell0/LSTMCell/{leaf}", f"RNN_{d}/RNN/LSTMCell/{leaf}")
    loaded = build_bilm(config)
    load_hdf5_weights(loaded, tmp_path / "w.hdf5")
    for (name, a), (_, b) in zip(bilm.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def _copy_with(tmp_path, fixture_dir, edit) -> str:
    path = tmp_path / "weights.hdf5"
    shutil.copy(fixture_dir / "lm_weights.hdf5", path)
    path.chmod(0o644)
    with h5py.File(path, "r+") as f:
        edit(f)
    return str(path)


def test_wrong_shape_names_dataset_and_both_shapes(tmp_path, fixture_dir):
    def edit(f):
        del f["CNN_proj/W_proj"]
        f.create_dataset("CNN_proj/W_proj", data=np.zeros((124, 17), dtype=np.float32))

    bilm = build_bilm(read_options(fixture_dir / "options.json"))
    with pytest.raises(WeightFileError, match=r"dataset 'CNN_proj/W_proj' has shape \(124, 17\), the options expect "
                                              r"\(124, 16\)"):
        load_hdf5_weights(bilm, _copy_with(tmp_path, fixture_dir, edit))


def test_missing_and_unexpected_datasets(tmp_path, fixture_dir):
    bilm = build_bilm(read_options(fixture_dir / "options.json"))
    path = _copy_with(tmp_path, fixture_dir, lambda f: f.__delitem__("CNN_high_1/W_carry"))
    with pytest.raises(WeightFileError, match="missing dataset 'CNN_high_1/W_carry'"):
        load_hdf5_weights(bilm, path)
    path = _copy_with(tmp_path, fixture_dir, lambda f: f.create_dataset("CNN_high_2/W_carry", data=np.zeros((2, 2))))
    with pytest.raises(WeightFileError, match="unexpected dataset 'CNN_high_2/W_carry'"):
        load_hdf5_weights(bilm, path)


def test_softmax_datasets_are_ignored(tmp_path, fixture_dir):
    bilm = build_bilm(read_options(fixture_dir / "options.json"))
    load_hdf5_weights(bilm, _copy_with(tmp_path, fixture_dir, lambda f: f.create_dataset("softmax/W", data=[[1.0]])))


def test_non_finite_weights_are_refused(tmp_path, fixture_dir):
    def edit(f):
        f["CNN/b_cnn_0"][0] = np.nan

    bilm = build_bilm(read_options(fixture_dir / "options.json"))
    with pytest.raises(WeightFileError, match="'CNN/b_cnn_0' contains NaN or Inf"):
        load_hdf5_weights(bilm, _copy_with(tmp_path, fixture_dir, edit))


def test_missing_and_corrupt_files(tmp_path, fixture_dir):
    bilm = build_bilm(read_options(fixture_dir / "options.json"))
    with pytest.raises(WeightFileError, match="nowhere.hdf5: no such weight file"):
        load_hdf5_weights(bilm, tmp_path / "nowhere.hdf5")
    truncated = tmp_path / "truncated.hdf5"
    truncated.write_bytes((fixture_dir / "lm_weights.hdf5").read_bytes()[:5000])
    with pytest.raises(WeightFileError, match="truncated.hdf5"):
        load_hdf5_weights(bilm, truncated)


def test_declared_bytes_must_be_stored_before_anything_is_read(tmp_path, fixture_dir):
    """A dataset of the right shape that was never written (HDF5 would hand back zeros) is refused from its storage
    size, before h5py allocates the array."""
    def edit(f):
        del f["CNN_proj/W_proj"]
        f.create_dataset("CNN_proj/W_proj", shape=(124, 16), dtype="f4")

    bilm = build_bilm(read_options(fixture_dir / "options.json"), device="meta")
    with pytest.raises(WeightFileError, match=r"weights\.hdf5: dataset 'CNN_proj/W_proj' declares 7,936 bytes, but 0 "
                                              r"are stored"):
        load_hdf5_weights(bilm, _copy_with(tmp_path, fixture_dir, edit))


@pytest.mark.slow
def test_compressed_datasets_load_within_the_ratio_cap(tmp_path):
    """A dataset saved with gzip reads back bit for bit; one that inflates more than 100:1 (4 MB of zeros) is refused
    before it is read."""
    config = tiny_config()
    config.lstm.dim, config.lstm.projection_dim = 1024, 128  # W_0: (256, 4096), 4 MB
    bilm = random_bilm(config)
    name = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
    for case in ("random", "zeros"):
        path = tmp_path / f"{case}.hdf5"
        save_hdf5_weights(bilm, path)
        with h5py.File(path, "r+") as f:
            data = f[name][...] if case == "random" else np.zeros_like(f[name][...])
            del f[name]
            f.create_dataset(name, data=data, compression="gzip", chunks=(64, 4096))
    loaded = build_bilm(config, device="meta")
    load_hdf5_weights(loaded, tmp_path / "random.hdf5")
    for (key, a), b in zip(bilm.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), key
    with pytest.raises(WeightFileError, match=rf"zeros\.hdf5: dataset '{name}' declares 4,194,304 bytes compressed "
                                              r"into [\d,]+, more than 100:1"):
        load_hdf5_weights(build_bilm(config, device="meta"), tmp_path / "zeros.hdf5")
