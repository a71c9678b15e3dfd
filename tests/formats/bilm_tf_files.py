"""Real TensorFlow checkpoints for the tests, written by TensorFlow itself (tensorflow-cpu, of the test extra).

bilm-tf's variable names are spelled out here by hand from bilm-tf's ``training.py`` (scope ``lm/``, LSTMCell's
``kernel``/``bias``/``projection/kernel``, Adagrad slots ``<variable>/Adagrad``), not derived from the reader's own
renaming, so the tests check the reader against bilm-tf and not against itself.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

from elmo.formats.hdf5 import bilm_to_datasets


def tensorflow():
    import tensorflow as tf  # only in tests: the package never imports it

    return tf


def bilm_tf_name(dataset: str, n_layers: int) -> str:
    """HDF5 dataset name -> the variable bilm-tf's train() saves it as."""
    match = re.fullmatch(r"RNN_(\d)/RNN/MultiRNNCell/Cell(\d+)/LSTMCell/(W_0|B|W_P_0)", dataset)
    if match is None:
        return "lm/" + dataset  # char_embed, CNN/W_cnn_0, CNN_high_0/W_carry, CNN_proj/W_proj, embedding
    direction, layer, kind = match.groups()
    cell = f"multi_rnn_cell/cell_{layer}/lstm_cell" if n_layers > 1 else "lstm_cell"
    leaf = {"W_0": "kernel", "B": "bias", "W_P_0": "projection/kernel"}[kind]
    return f"lm/RNN_{direction}/rnn/{cell}/{leaf}"


def bilm_tf_options(config, vocab_size: int, **training) -> dict:
    """options.json as bilm-tf's train() writes it (n_characters 261, the training keys)."""
    options = config.to_options()
    if "char_cnn" in options:
        options["char_cnn"]["n_characters"] = 261
    options.update({"bidirectional": True, "n_tokens_vocab": vocab_size, "batch_size": 2, "unroll_steps": 5,
                    "n_negative_samples_batch": 4, "all_clip_norm_val": 10.0, "dropout": 0.1, "n_epochs": 1,
                    "n_train_tokens": 1000} | training)
    return options


def bilm_tf_variables(bilm, softmax_weight: np.ndarray, softmax_bias: np.ndarray, seed: int = 0,
                      global_step: float = 10000.0) -> dict[str, np.ndarray]:
    """Every variable of a bilm-tf training checkpoint of ``bilm``: weights, softmax, Adagrad slots (random values
    > 1, as after some training), global_step and train_perplexity."""
    n_layers = len(bilm.forward_lstm.layers)
    variables = {bilm_tf_name(name, n_layers): array for name, array in bilm_to_datasets(bilm).items()}
    variables["lm/softmax/W"] = softmax_weight.astype(np.float32)
    variables["lm/softmax/b"] = softmax_bias.astype(np.float32)
    rng = np.random.default_rng(seed)
    for name, array in list(variables.items()):
        variables[name + "/Adagrad"] = (1.0 + rng.random(array.shape)).astype(np.float32)
    variables["global_step"] = np.float32(global_step)
    variables["train_perplexity"] = np.float32(123.5)
    return variables


def save_v2(prefix: Path, variables: dict[str, np.ndarray], shards: int = 1) -> None:
    """Write ``variables`` under their names with TensorFlow's SaveV2 (V2 checkpoints, as TF 1.x Savers write);
    with ``shards`` > 1, as a sharded Saver does: one SaveV2 per shard, then MergeV2Checkpoints."""
    tf = tensorflow()
    names = sorted(variables)
    if shards == 1:
        tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(variables[n]) for n in names])
        return
    parts = []
    for i in range(shards):
        part = f"{prefix}_temp/part-{i:05d}-of-{shards:05d}"
        mine = names[i::shards]
        tf.raw_ops.SaveV2(prefix=part, tensor_names=mine, shape_and_slices=[""] * len(mine),
                          tensors=[tf.constant(variables[n]) for n in mine])
        parts.append(part)
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=parts, destination_prefix=str(prefix), delete_old_dirs=True)
    shutil.rmtree(f"{prefix}_temp", ignore_errors=True)


def write_checkpoint_state(directory: Path, latest: str, all_names: list[str], trained_in: str) -> None:
    """The ``checkpoint`` file, by TensorFlow, naming paths of the machine that trained (``trained_in``)."""
    tf = tensorflow()
    tf.compat.v1.train.update_checkpoint_state(
        str(directory), f"{trained_in}/{latest}", all_model_checkpoint_paths=[f"{trained_in}/{n}" for n in all_names]
    )


def write_bilm_tf_dir(directory: Path, bilm, softmax_weight: np.ndarray, softmax_bias: np.ndarray, *,
                      step: int = 10000, shards: int = 1, older=None) -> dict[str, np.ndarray]:
    """A bilm-tf training directory: options.json, model.ckpt-<step> (+ model.ckpt-7500 of the biLM ``older``,
    which sorts after it by name) and the ``checkpoint`` file naming the newest with absolute paths of another
    machine. Returns the newest checkpoint's variables."""
    directory.mkdir(parents=True, exist_ok=True)
    options = bilm_tf_options(bilm.config, len(softmax_bias))
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    variables = bilm_tf_variables(bilm, softmax_weight, softmax_bias, global_step=float(step))
    save_v2(directory / f"model.ckpt-{step}", variables, shards=shards)
    names = [f"model.ckpt-{step}"]
    if older is not None:
        save_v2(directory / "model.ckpt-7500", bilm_tf_variables(older, softmax_weight, softmax_bias, seed=1,
                                                                 global_step=7500.0))
        names.insert(0, "model.ckpt-7500")
    write_checkpoint_state(directory, names[-1], names, "/home/someone/bilm-tf/run")
    return variables


def write_bundle_dir(directory: Path, bilm, softmax_rows: int = 20, *, options: dict | None = None,
                     declare: dict | None = None, slices: dict | None = None, step: int = 1,
                     checkpoint_name: str | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """A bilm-tf training directory of ``bilm`` written without TensorFlow (``tf_bundle_files.Bundle``): for files
    TensorFlow would not write (``declare``: an entry's own shape, size or offset; ``slices``: a variable stored in
    the given (extents, array) slices instead) and for tests that must not wait for TensorFlow. ``checkpoint_name``:
    what the ``checkpoint`` file names. Returns the variables."""
    from tests.formats.tf_bundle_files import Bundle

    rng = np.random.default_rng(seed)
    dim = bilm.token_encoder.output_dim
    variables = bilm_tf_variables(bilm, rng.standard_normal((softmax_rows, dim)), rng.standard_normal(softmax_rows),
                                  seed=seed, global_step=float(step))
    for name in slices or {}:
        variables.pop(name)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "options.json").write_text(json.dumps(options or bilm_tf_options(bilm.config, softmax_rows)))
    Bundle(tensors=variables, declare=declare or {}, slices=slices or {}).write(directory / f"model.ckpt-{step}")
    name = (checkpoint_name or f"model.ckpt-{step}").replace("\\", "\\\\").replace('"', '\\"')  # as a text proto
    (directory / "checkpoint").write_text(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    return variables
