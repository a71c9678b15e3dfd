"""bilm-tf training directories: ``options.json`` + TensorFlow checkpoints (``checkpoint``, ``model.ckpt-N.index``,
``model.ckpt-N.data-*``), loaded without TensorFlow.

This is how a group that trained its own ELMo with bilm-tf keeps it, and the only form that still has the softmax
and the Adagrad accumulators, which continuing the LM's training needs. bilm-tf's ``train()`` builds the model
under the scope ``lm/`` and saves every global variable; its ``dump_weights`` turns the trainable ones, softmax
aside, into ``weights.hdf5`` by renaming them (:func:`hdf5_name`). So a checkpoint variable goes through that same
renaming and then through the HDF5 layout's one name map (:data:`elmo.formats.hdf5.WEIGHT_MAP`): the two formats
cannot drift apart. The checkpoint also holds::

    lm/softmax/W (V, P), lm/softmax/b (V)   the softmax, rows in the order of the training vocabulary
    <variable>/Adagrad                      Adagrad's accumulator of each trainable variable (same shape)
    global_step                             float32 scalar, the number of updates made
    train_perplexity                        float32 scalar (a summary, not read)

Which checkpoint: the one the ``checkpoint`` file names (``model_checkpoint_path``; not the largest name, since
``model.ckpt-8750`` sorts after ``model.ckpt-10000``), always inside the directory: that file usually holds absolute
paths of the machine that trained, of which only the file name is kept and looked up in the directory; a relative
path is taken from the directory, and one that leaves it (``../other/model.ckpt-99``) is refused. Without a
``checkpoint`` file, the highest step among the ``*.index`` files. ``checkpoint="model.ckpt-N"`` picks another.

The biLM is built on the meta device; every variable it needs is checked (name, shape against options.json, float
dtype, its bytes present in the data shards) before any is read. Then they are read one at a time, each going into
its module as soon as the module's are all read (:func:`~elmo.formats.checked_reads.fill_by_module`; a transposed
variable is read in blocks of rows straight into its parameter), so opening a checkpoint costs the biLM plus one
block, whatever the optimizer slots and the softmax weigh.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from elmo.config import MAX_VOCABULARY, BiLMConfig
from elmo.errors import WeightFileError
from elmo.formats.checked_reads import all_finite, fill_by_module, read_json, read_whole
from elmo.formats.hdf5 import (
    WeightEntry,
    canonical_name,
    cell_order,
    entry_params,
    expected_dataset_shape,
    weight_entries,
)
from elmo.formats.tensorflow.tf_bundle import TensorBundle
from elmo.modules.bilm import BiLM, build_bilm

log = logging.getLogger(__name__)

CHECKPOINT_STATE_FILE = "checkpoint"
OPTIONS_FILE = "options.json"
SCOPE = "lm/"
SOFTMAX_W, SOFTMAX_B = "lm/softmax/W", "lm/softmax/b"
SLOT = "/Adagrad"
GLOBAL_STEP = "global_step"
_FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64"}


def hdf5_name(tf_name: str) -> str:
    """bilm-tf's ``dump_weights`` renaming (``_get_outname``), then the HDF5 map's canonical one-layer spelling:
    ``lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/kernel`` -> ``RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0``."""
    name = tf_name.lstrip("lm/")  # as dump_weights does it: strips the characters l, m and /
    name = re.sub("/rnn/", "/RNN/", name)
    name = re.sub("/multi_rnn_cell/", "/MultiRNNCell/", name)
    name = re.sub("/cell_", "/Cell", name)
    name = re.sub("/lstm_cell/", "/LSTMCell/", name)
    if "/RNN/" in name:
        if "projection" in name:
            name = re.sub("projection/kernel", "W_P_0", name)
        else:
            name = re.sub("/kernel", "/W_0", name)
            name = re.sub("/bias", "/B", name)
    return canonical_name(name)


def is_bilm_tf_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory with ``options.json`` and a TensorFlow checkpoint (a ``checkpoint`` file or
    a ``*.ckpt*.index``)."""
    directory = Path(path)
    if not directory.is_dir() or not (directory / OPTIONS_FILE).is_file():
        return False
    return (directory / CHECKPOINT_STATE_FILE).is_file() or any(directory.glob("*.ckpt*.index"))


def loads_as_bilm_tf(path: str | os.PathLike, checkpoint: str | os.PathLike | None = None) -> bool:
    """Whether :func:`~elmo.formats.model_files.load_bilm` reads ``path`` as a bilm-tf training directory: it has a
    TensorFlow checkpoint and no ``*.hdf5`` weights (a ``dump_weights`` output beside the checkpoint wins, as it
    did before this reader existed), or ``checkpoint`` picks one."""
    if not is_bilm_tf_dir(path):
        return False
    return checkpoint is not None or not any(p.suffix.lower() == ".hdf5" for p in Path(path).iterdir())


def checkpoint_prefix(directory: str | os.PathLike, checkpoint: str | os.PathLike | None = None) -> Path:
    """The checkpoint to read: ``checkpoint`` (``model.ckpt-N``, in the directory or as a path), else the one the
    ``checkpoint`` file names, else the highest step."""
    directory = Path(directory)
    available = _available(directory)
    if checkpoint is not None:
        text = os.fspath(checkpoint).removesuffix(".index")
        text = re.sub(r"\.data-\d+-of-\d+$", "", text)
        candidates = [Path(text), directory / text, directory / Path(text).name]
        for prefix in candidates:
            if Path(f"{prefix}.index").is_file():
                return prefix
        raise WeightFileError(f"{directory}: no checkpoint {checkpoint} ({_listing(available)})")
    state = directory / CHECKPOINT_STATE_FILE
    if state.is_file():
        named = _named_checkpoint(state)
        prefix = _named_prefix(directory, named, state)
        if not Path(f"{prefix}.index").is_file():
            raise WeightFileError(
                f"{state}: names checkpoint {named}, but {prefix.name}.index is not in {directory} "
                f"({_listing(available)}; pick one with --checkpoint)"
            )
        return prefix
    if not available:
        raise WeightFileError(f"{directory}: no TensorFlow checkpoint (no '{CHECKPOINT_STATE_FILE}' file, no *.index)")
    return directory / max(available, key=_step_of)


def _named_prefix(directory: Path, named: str, state: Path) -> Path:
    """The checkpoint a ``checkpoint`` file names, inside ``directory``: an absolute path (the training machine's,
    POSIX or Windows) keeps only its file name; a relative one is taken from the directory and must stay in it (if
    it is not there, its file name is looked up in the directory, as for an absolute one)."""
    text = named.replace("\\", "/")
    base = text.rsplit("/", 1)[-1]
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        return directory / base
    relative = posixpath.normpath(text)
    if relative == ".." or relative.startswith("../"):
        raise WeightFileError(f"{state}: names checkpoint {named}, which is outside {directory}; a model folder's "
                              "checkpoint file may name only checkpoints inside it")
    prefix = directory / relative
    return prefix if Path(f"{prefix}.index").is_file() else directory / base


def _available(directory: Path) -> list[str]:
    return sorted((p.name.removesuffix(".index") for p in directory.glob("*.index")), key=_step_of)


def _step_of(name: str) -> tuple[int, str]:
    match = re.search(r"-(\d+)$", name)
    return (int(match.group(1)) if match else -1, name)


def _listing(available: list[str]) -> str:
    return f"the directory has {', '.join(available)}" if available else "the directory has no *.index file"


def _named_checkpoint(path: Path) -> str:
    """``model_checkpoint_path`` of a CheckpointState text file."""
    try:
        text = read_whole(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise WeightFileError(f"{path}: cannot read the checkpoint state file ({e})") from e
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.match(r'\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"\s*$', line)
        if match:
            return _text_proto_string(match.group(1), f"{path}, line {number}: model_checkpoint_path")
    raise WeightFileError(f"{path}: no model_checkpoint_path line (not a TensorFlow checkpoint state file)")


_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63}
_ESCAPED = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))|([^\\]+)", re.S)


def _text_proto_string(escaped: str, where: str) -> str:
    """A text proto's string: C escapes (as TensorFlow's text format writes them: \\n, \\", \\ooo for other
    bytes, \\xHH), the bytes read as UTF-8; any other escape, or bytes that are not UTF-8, is one line."""
    out = bytearray()
    for match in _ESCAPED.finditer(escaped):
        octal, hexadecimal, char, plain = match.groups()
        if plain is not None:
            out += plain.encode("utf-8")
        elif octal is not None and int(octal, 8) < 256:
            out.append(int(octal, 8))
        elif hexadecimal is not None:
            out.append(int(hexadecimal, 16))
        elif char in _C_ESCAPES:
            out.append(_C_ESCAPES[char])
        else:
            raise WeightFileError(f"{where}: {match.group(0)!r} is not an escape of TensorFlow's text format")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WeightFileError(f"{where}: not UTF-8 once its escapes are read ({e.reason} at byte {e.start})") from None


def read_bilm_tf_options(directory: str | os.PathLike) -> BiLMConfig:
    path = Path(directory) / OPTIONS_FILE
    return BiLMConfig.from_options(read_json(path), source=str(path))


@dataclass(frozen=True)
class _Names:
    """The checkpoint's variables by role."""

    weights: dict[str, str]  # HDF5 dataset name -> checkpoint name
    slots: dict[str, str]  # checkpoint name of a variable -> of its Adagrad accumulator


def _classify(bundle: TensorBundle) -> _Names:
    names = bundle.names()
    where = bundle.index_path
    model = [n for n in names if n.startswith(SCOPE)]
    if not model:
        shown = ", ".join(f"'{n}'" for n in names[:3]) or "no variables"
        raise WeightFileError(
            f"{where}: not a bilm-tf checkpoint: no variable under '{SCOPE}' (it holds {shown}); bilm-tf's train() "
            "names every biLM variable lm/..."
        )
    weights, slots = {}, {}
    for name in model:
        if name.endswith(SLOT):
            slots[name.removesuffix(SLOT)] = name
        elif name not in (SOFTMAX_W, SOFTMAX_B):
            weights[hdf5_name(name)] = name
    return _Names(weights, slots)


def _read_float(bundle: TensorBundle, name: str) -> np.ndarray:
    """A whole float variable as float32 (after :meth:`TensorBundle.check`), checked finite."""
    stored = bundle.stored_dtype(name)
    if stored not in _FLOAT_DTYPES:
        raise WeightFileError(f"{bundle.index_path}: variable '{name}' has dtype {stored}, expected a float dtype")
    array = bundle.read(name)
    if array.dtype != np.float32:
        array = array.astype(np.float32)
    if not all_finite(array):
        raise WeightFileError(f"{bundle.index_path}: variable '{name}' contains NaN or Inf values")
    return array


def _check_variable(bundle: TensorBundle, entry: WeightEntry, tf_name: str, state: dict[str, torch.Tensor],
                    options: Path) -> None:
    """The variable (or its accumulator: same layout) has the shape options.json gives, a float dtype, and its
    bytes in the shards; nothing is read."""
    want = expected_dataset_shape(entry, state)
    shape = bundle.shape(tf_name)
    if shape != want and not (entry.dataset == "char_embed" and shape == (want[0] + 1, want[1])):
        # (262 rows: the last one is never indexed, as in the HDF5 reader)
        raise WeightFileError(f"{bundle.index_path}: variable '{tf_name}' has shape {shape}, {options} expects {want}")
    if bundle.stored_dtype(tf_name) not in _FLOAT_DTYPES:
        raise WeightFileError(f"{bundle.index_path}: variable '{tf_name}' has dtype {bundle.stored_dtype(tf_name)}, "
                              "expected a float dtype")
    bundle.check(tf_name)


def _param_arrays(bundle: TensorBundle, entry: WeightEntry, tf_name: str,
                  state: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The parameters of one map entry from its checkpoint variable (or from its accumulator: same layout), read
    block by block into arrays of their own (after :func:`_check_variable`)."""
    shapes = [tuple(state[p].shape) for p in entry.params]
    rows = expected_dataset_shape(entry, state)[0]

    def blocks(starts: list[int], stop: int):
        return bundle.float_row_blocks(tf_name, starts, stop)

    return entry_params(entry, shapes, rows, blocks)


def _entry_variables(bundle: TensorBundle, bilm: BiLM, names: _Names) -> list[tuple[WeightEntry, str]]:
    """(map entry, checkpoint variable) for every dataset this biLM needs; unknown lm/ variables are refused."""
    entries = weight_entries(bilm)
    needed = {e.dataset for e in entries}
    for dataset, tf_name in names.weights.items():
        if dataset not in needed:
            raise WeightFileError(
                f"{bundle.index_path}: unexpected variable '{tf_name}' for the options in options.json (wrong "
                "options file?)"
            )
    pairs = []
    for entry in sorted(entries, key=cell_order):  # one module's entries together: filled, then freed
        if entry.dataset not in names.weights:
            raise WeightFileError(
                f"{bundle.index_path}: missing variable for '{entry.dataset}' of the HDF5 layout (bilm-tf names it "
                f"lm/{_tf_spelling(entry.dataset)}), which options.json requires"
            )
        pairs.append((entry, names.weights[entry.dataset]))
    return pairs


def _tf_spelling(dataset: str) -> str:
    name = dataset.replace("/RNN/", "/rnn/").replace("/MultiRNNCell/", "/multi_rnn_cell/")
    name = re.sub(r"/Cell(\d+)", r"/cell_\1", name).replace("/LSTMCell/", "/lstm_cell/")
    return name.replace("/W_P_0", "/projection/kernel").replace("/W_0", "/kernel").replace("/B", "/bias")


def open_bilm_tf_checkpoint(
    directory: str | os.PathLike, checkpoint: str | os.PathLike | None = None
) -> tuple[TensorBundle, BiLMConfig]:
    directory = Path(directory)
    config = read_bilm_tf_options(directory)
    return TensorBundle(checkpoint_prefix(directory, checkpoint)), config


def load_bilm_tf_checkpoint(directory: str | os.PathLike, checkpoint: str | os.PathLike | None = None) -> BiLM:
    """The biLM of a bilm-tf training directory (options.json + the checkpoint; see the module's docstring), on the
    CPU, in eval mode. Everything is checked before the model is returned; nothing is written."""
    bundle, config = open_bilm_tf_checkpoint(directory, checkpoint)
    return _load_with(bundle, config, Path(directory)).eval()


def _load_with(bundle: TensorBundle, config: BiLMConfig, directory: Path) -> BiLM:
    names = _classify(bundle)
    vocab_size = None
    if config.char_cnn is None:  # a word-input model keeps its table as lm/embedding
        if "embedding" not in names.weights:
            raise WeightFileError(f"{bundle.index_path}: options.json has no char_cnn block, so the model reads "
                                  "word ids, but the checkpoint has no lm/embedding table")
        shape = bundle.shape(names.weights["embedding"])
        if len(shape) != 2 or not 1 <= shape[0] <= MAX_VOCABULARY:
            raise WeightFileError(f"{bundle.index_path}: variable '{names.weights['embedding']}' has shape {shape}, "
                                  f"expected (V, P) with at most {MAX_VOCABULARY:,} rows (docs/formats.md, Limits)")
        vocab_size = shape[0]
    bilm = build_bilm(config, token_vocab_size=vocab_size, device="meta")  # fill_by_module makes its parameters
    state = bilm.state_dict()
    options = directory / OPTIONS_FILE
    pairs = _entry_variables(bundle, bilm, names)
    for entry, tf_name in pairs:  # every declared size against options.json and the shards, before any read
        _check_variable(bundle, entry, tf_name, state, options)
    log.info("%s: reading the biLM from %s; %s", directory, Path(bundle.prefix).name,
             describe_settings(config, dict.fromkeys(SETTINGS, OPTIONS_FILE)))
    fill_by_module(bilm, (_param_arrays(bundle, e, n, state) for e, n in pairs), str(bundle.index_path))
    return bilm


SETTINGS = ("activation", "cell_clip", "proj_clip", "use_skip_connections", "max_characters_per_token")
"""What only a graph (or options.json) says, not a variable's shape: the log line of every TF load names each,
with where it came from."""


def describe_settings(config: BiLMConfig, sources: Mapping[str, str]) -> str:
    """``activation relu (options.json), cell_clip 3 (graph), ...``: what a load used, and from where."""
    cnn, lstm = config.char_cnn, config.lstm
    values = {"activation": cnn.activation if cnn else None, "cell_clip": lstm.cell_clip, "proj_clip": lstm.proj_clip,
              "use_skip_connections": lstm.use_skip_connections,
              "max_characters_per_token": cnn.max_characters_per_token if cnn else None}
    shown = {"cell_clip": "none", "proj_clip": "none"}
    parts = []
    for key in SETTINGS:
        value = values[key]
        if key not in sources or (value is None and key not in shown):
            continue
        if isinstance(value, bool):
            text = "on" if value else "off"
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = shown[key] if value is None else str(value)
        name = "residual" if key == "use_skip_connections" else key
        parts.append(f"{name} {text} ({sources[key]})")
    return ", ".join(parts)


def _global_step(bundle: TensorBundle) -> int:
    """bilm-tf's ``global_step``: a scalar (float32 as its trainer makes it, or an integer) holding a whole number of
    updates."""
    value = np.asarray(bundle.read(GLOBAL_STEP))
    whole = value.size == 1 and value.dtype.kind in "fiu" and bool(np.isfinite(value).all())
    if not whole or value.item() < 0 or value.item() != int(value.item()):
        shown = value.reshape(-1)[:3].tolist() if value.dtype.kind in "fiub" else value.dtype
        raise WeightFileError(f"{bundle.index_path}: '{GLOBAL_STEP}' is {shown} of shape {value.shape}, expected one "
                              "whole number of updates >= 0")
    return int(value.item())


@dataclass
class BilmTfTrainingState:
    """What continuing bilm-tf's training needs besides the biLM: the softmax, the Adagrad accumulators (keyed by
    our parameter names: ``bilm.<biLM parameter>``, ``softmax.weight``, ``softmax.bias``) and the step count."""

    softmax_weight: torch.Tensor  # (V, P)
    softmax_bias: torch.Tensor  # (V,)
    accumulators: dict[str, torch.Tensor]
    global_step: int
    checkpoint: Path

    @property
    def vocab_size(self) -> int:
        return int(self.softmax_weight.shape[0])


def read_bilm_tf_training_state(
    directory: str | os.PathLike, bilm: BiLM, checkpoint: str | os.PathLike | None = None
) -> BilmTfTrainingState:
    """The softmax, accumulators and step of the checkpoint ``bilm`` was loaded from. Accumulators are mapped to
    our parameters as the weights are (transposes and splits; the char embedding's padding row, which bilm-tf does
    not have, gets Adagrad's initial value 1.0, the value bilm-tf's ``initial_accumulator_value`` gives)."""
    directory = Path(directory)
    bundle = TensorBundle(checkpoint_prefix(directory, checkpoint))
    names = _classify(bundle)
    where = bundle.index_path
    for name in (SOFTMAX_W, SOFTMAX_B):
        if name not in bundle:
            raise WeightFileError(f"{where}: no '{name}': this checkpoint has no softmax to continue training from")
    dim = bilm.token_encoder.output_dim
    shape_w, shape_b = bundle.shape(SOFTMAX_W), bundle.shape(SOFTMAX_B)
    if shape_w and not 1 <= shape_w[0] <= MAX_VOCABULARY:
        raise WeightFileError(f"{where}: {SOFTMAX_W} declares {shape_w[0]:,} rows (words); the limit is "
                              f"{MAX_VOCABULARY:,} (docs/formats.md, Limits)")
    if len(shape_w) != 2 or shape_w[1] != dim or shape_b != shape_w[:1]:
        raise WeightFileError(f"{where}: {SOFTMAX_W} {shape_w} and {SOFTMAX_B} {shape_b} do not fit the biLM's output "
                              f"dimension {dim}")
    bundle.check(SOFTMAX_W)  # its bytes are in the shards, before anything is allocated for it
    bundle.check(SOFTMAX_B)
    state = bilm.state_dict()
    options = directory / OPTIONS_FILE
    slots, missing = [], []
    for entry, tf_name in _entry_variables(bundle, bilm, names):
        slot = names.slots.get(tf_name)
        if slot is None:
            missing.append(tf_name)
        else:
            _check_variable(bundle, entry, slot, state, options)
            slots.append((entry, slot))
    softmax_slots = []
    for tf_name, ours in ((SOFTMAX_W, "softmax.weight"), (SOFTMAX_B, "softmax.bias")):
        slot = names.slots.get(tf_name)
        if slot is None:
            missing.append(tf_name)
        elif bundle.shape(slot) != bundle.shape(tf_name):
            raise WeightFileError(f"{where}: '{slot}' has shape {bundle.shape(slot)}, its variable "
                                  f"{bundle.shape(tf_name)}")
        else:
            softmax_slots.append((slot, ours))
    for slot, _ in softmax_slots:
        bundle.check(slot)  # every declared size against the shards, before anything is read
    weight = torch.from_numpy(_read_float(bundle, SOFTMAX_W))
    bias = torch.from_numpy(_read_float(bundle, SOFTMAX_B))
    accumulators: dict[str, torch.Tensor] = {}
    for entry, slot in slots:
        arrays = _param_arrays(bundle, entry, slot, state)
        if entry.conversion == "pad_row":
            for value in arrays.values():
                value[0] = 1.0
        accumulators.update({f"bilm.{p}": torch.from_numpy(v) for p, v in arrays.items()})
    for slot, ours in softmax_slots:
        accumulators[ours] = torch.from_numpy(_read_float(bundle, slot))
    if missing:
        if accumulators:
            raise WeightFileError(f"{where}: no Adagrad accumulator '{missing[0]}{SLOT}' ({len(missing)} missing in "
                                  "all), though other variables have one")
        log.warning("%s: no Adagrad accumulators (a checkpoint saved without the optimizer): they start at 1.0, as "
                    "in a new bilm-tf run", where)
    step = 0
    if GLOBAL_STEP in bundle:
        step = _global_step(bundle)
    return BilmTfTrainingState(weight, bias, accumulators, step, Path(bundle.prefix))
