"""Damaged, mismatched and malicious model files: one-line errors naming the file, and no code ever runs."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from elmo.formats.checkpoints import latest_checkpoint
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm, tiny_config
from tests.faults.conftest import assert_one_line_error, elmo, train_args


@pytest.fixture()
def sentences(tmp_path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("the cat sat\n", encoding="utf-8")
    return path


def _copy(model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(model, tmp_path / "model"))


def _truncate(model: Path) -> str:
    weights = model / "weights.hdf5"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return "weights.hdf5"


def _corrupt(model: Path) -> str:
    weights = model / "weights.hdf5"
    data = bytearray(weights.read_bytes())
    data[:64] = bytes(64)  # the HDF5 superblock
    weights.write_bytes(bytes(data))
    return "weights.hdf5"


def _mismatch(model: Path) -> str:
    options = json.loads((model / "options.json").read_text())
    options["lstm"]["dim"] = 16  # the weights were saved with 12 cells
    (model / "options.json").write_text(json.dumps(options))
    return "shape"


def _unknown_key(model: Path) -> str:
    options = json.loads((model / "options.json").read_text())
    options["lstm"]["cells"] = 12
    (model / "options.json").write_text(json.dumps(options))
    return "cells"


def _missing_key(model: Path) -> str:
    options = json.loads((model / "options.json").read_text())
    del options["lstm"]["projection_dim"]
    (model / "options.json").write_text(json.dumps(options))
    return "projection_dim"


def _nan_weight(model: Path) -> str:
    with h5py.File(model / "weights.hdf5", "r+") as f:
        name = next(n for n in _datasets(f) if "LSTM" in n)
        data = f[name][()]
        data.flat[0] = np.nan
        f[name][...] = data
    return "contains NaN or Inf values"


def _datasets(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


@pytest.mark.slow
@pytest.mark.parametrize("damage", [_truncate, _corrupt, _mismatch, _unknown_key, _missing_key, _nan_weight])
def test_damaged_original_format_model(tiny_model, tmp_path, sentences, damage):
    model = _copy(tiny_model, tmp_path)
    fragment = damage(model)
    result = elmo("embed", "--all", "--model", str(model), str(sentences), str(tmp_path / "out.hdf5"))
    line = assert_one_line_error(result, fragment)
    assert str(model) in line
    assert not (tmp_path / "out.hdf5").exists()


@pytest.mark.slow
def test_safetensors_with_wrong_shapes(tmp_path, sentences):
    model = tmp_path / "native"
    save_bilm(random_bilm(tiny_config()), model, native=True)
    tensors = load_file(model / "model.safetensors")
    name = next(n for n in tensors if n.endswith("weight") and tensors[n].dim() == 2)
    tensors[name] = torch.zeros(tensors[name].shape[0] + 1, tensors[name].shape[1])
    save_file(tensors, model / "model.safetensors")
    result = elmo("embed", "--all", "--model", str(model), str(sentences), str(tmp_path / "out.hdf5"))
    assert_one_line_error(result, "model.safetensors", name)


class _CreatesAFile:
    """Unpickling this object would run ``open(path, 'w')``: the attack a checkpoint must never carry out."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["optimizer.pt", "rank-0.pt"])
def test_a_malicious_checkpoint_is_refused_without_running_code(corpus, tmp_path, victim):
    run = tmp_path / "run"
    elmo(*train_args(corpus, run, "--max-steps", "2"), check=True)
    marker = tmp_path / "pwned"
    with open(latest_checkpoint(run) / victim, "wb") as f:
        pickle.dump({"state": _CreatesAFile(marker)}, f)
    with open(tmp_path / "probe.pkl", "wb") as f:  # the payload is real: plain unpickling creates the file
        pickle.dump(_CreatesAFile(tmp_path / "probe"), f)
    with open(tmp_path / "probe.pkl", "rb") as f:
        pickle.load(f).close()
    assert (tmp_path / "probe").exists()
    result = elmo(*train_args(corpus, run, "--max-steps", "4", "--resume"))
    assert_one_line_error(result, victim, "not a readable checkpoint file")
    assert not marker.exists(), "unpickling the checkpoint ran code"


@pytest.mark.slow
def test_a_checkpoint_with_wrong_shapes_is_refused(corpus, tmp_path):
    run = tmp_path / "run"
    elmo(*train_args(corpus, run, "--max-steps", "2"), check=True)
    path = latest_checkpoint(run) / "model.safetensors"
    tensors = load_file(path)
    name = sorted(tensors)[0]
    tensors[name] = torch.zeros(3, 3, 3)
    save_file(tensors, path)
    result = elmo(*train_args(corpus, run, "--max-steps", "4", "--resume"))
    assert_one_line_error(result, "model.safetensors", name)


@pytest.mark.slow
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_malicious_alignment_matrix_is_refused_without_running_code(tiny_model, sentences, tmp_path, legacy):
    """``--align`` reads a pickle (a numpy array saved with torch.save): only numpy's array globals may load."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "es_best_mapping.pth"
    torch.save([np.eye(16), _CreatesAFile(marker)], evil, _use_new_zipfile_serialization=not legacy)
    with open(tmp_path / "probe.pkl", "wb") as f:  # the payload is real: plain unpickling creates the file
        pickle.dump(_CreatesAFile(tmp_path / "probe"), f)
    with open(tmp_path / "probe.pkl", "rb") as f:
        pickle.load(f).close()
    assert (tmp_path / "probe").exists()
    result = elmo("embed", "--all", "--model", str(tiny_model), "--align", str(evil), str(sentences),
                  str(tmp_path / "out.hdf5"))
    assert_one_line_error(result, str(evil), "refused global", "only numpy array reconstruction is allowed")
    assert not marker.exists(), "unpickling the alignment file ran code"
    assert not (tmp_path / "out.hdf5").exists()
