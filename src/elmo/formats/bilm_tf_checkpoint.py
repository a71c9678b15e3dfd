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
``model.ckpt-8750`` sorts after ``model.ckpt-10000``). That file usually holds absolute paths of the machine that
trained; only the file name is kept and looked up inside the directory. Without a ``checkpoint`` file, the highest
step among the ``*.index`` files. ``checkpoint="model.ckpt-N"`` picks another.

Only the variables the biLM needs are read, one at a time, and each goes into its module as soon as it is read
(through :func:`~elmo.formats.checked_reads.load_checked_state`; the model is built on the meta device and the
arrays become its parameters, an LSTM kernel read one half at a time), so opening a checkpoint costs the biLM plus
half its largest variable, whatever the optimizer slots and the softmax weigh.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.errors import WeightFileError
from elmo.formats.checked_reads import load_checked_state, read_json
from elmo.formats.hdf5 import CONVERSIONS, WeightEntry, _canonical_name, expected_dataset_shape, weight_entries
from elmo.formats.tf_bundle import TensorBundle
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.memory import release_freed_memory

log = logging.getLogger(__name__)

CHECKPOINT_STATE_FILE = "checkpoint"
OPTIONS_FILE = "options.json"
SCOPE = "lm/"
SOFTMAX_W, SOFTMAX_B = "lm/softmax/W", "lm/softmax/b"
SLOT = "/Adagrad"
GLOBAL_STEP = "global_step"
_NOT_WEIGHTS = {GLOBAL_STEP, "train_perplexity"}
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
    return _canonical_name(name)


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
        prefix = directory / named  # an absolute path (the training machine's) keeps only its file name
        if Path(named).is_absolute() or not Path(f"{prefix}.index").is_file():
            prefix = directory / Path(named).name
        if not Path(f"{prefix}.index").is_file():
            raise WeightFileError(
                f"{state}: names checkpoint {named}, but {prefix.name}.index is not in {directory} "
                f"({_listing(available)}; pick one with --checkpoint)"
            )
        return prefix
    if not available:
        raise WeightFileError(f"{directory}: no TensorFlow checkpoint (no '{CHECKPOINT_STATE_FILE}' file, no *.index)")
    return directory / max(available, key=_step_of)


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
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise WeightFileError(f"{path}: cannot read the checkpoint state file ({e})") from e
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.match(r'\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"\s*$', line)
        if match:
            return match.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape")
    raise WeightFileError(f"{path}: no model_checkpoint_path line (not a TensorFlow checkpoint state file)")


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
    return _checked_float(bundle, name, bundle.read(name))


def _checked_float(bundle: TensorBundle, name: str, array: np.ndarray) -> np.ndarray:
    stored = bundle.stored_dtype(name)
    if stored not in _FLOAT_DTYPES:
        raise WeightFileError(f"{bundle.index_path}: variable '{name}' has dtype {stored}, expected a float dtype")
    if array.dtype != np.float32:
        array = array.astype(np.float32)
    if not np.isfinite(array).all():
        raise WeightFileError(f"{bundle.index_path}: variable '{name}' contains NaN or Inf values")
    return array


def _param_arrays(
    bundle: TensorBundle, entry: WeightEntry, tf_name: str, state: dict[str, torch.Tensor], options: Path
) -> dict[str, np.ndarray]:
    """The parameters of one map entry from its checkpoint variable (or from its accumulator: same layout)."""
    want = expected_dataset_shape(entry, state)
    shape = bundle.shape(tf_name)
    rows = None
    if entry.dataset == "char_embed" and shape == (want[0] + 1, want[1]):
        rows = want[0]  # 262 rows: the last one is never indexed (as in the HDF5 reader)
    elif shape != want:
        raise WeightFileError(
            f"{bundle.index_path}: variable '{tf_name}' has shape {shape}, {options} expects {want}"
        )
    if entry.conversion == "lstm_kernel":  # (in + P, 4C): the input half and the recurrent half, each transposed
        return dict(zip(entry.params, _read_transposed(bundle, tf_name, [0, state[entry.params[0]].shape[1]])))
    if entry.conversion == "transpose":
        return dict(zip(entry.params, _read_transposed(bundle, tf_name, [0])))
    array = _read_float(bundle, tf_name)
    if rows is not None:
        array = array[:rows]
    values = CONVERSIONS[entry.conversion].to_params(array, [tuple(state[p].shape) for p in entry.params])
    return dict(zip(entry.params, values))


BLOCK_BYTES = 1 << 20
"""Rows of a variable read at a time where it is transposed: the peak is the parameter plus one block."""


def _read_transposed(bundle: TensorBundle, name: str, parts: list[int]) -> list[np.ndarray]:
    """A 2-D variable's rows ``[parts[0], parts[1])``, ..., ``[parts[-1], rows)``, each part transposed into a
    contiguous float32 array of its own (the parameter itself), filled from blocks of rows read one at a time."""
    rows, columns = bundle.shape(name)
    step = max(1, BLOCK_BYTES // (4 * max(columns, 1)))
    bounds = [*parts, rows]
    outputs = [np.empty((columns, b - a), dtype=np.float32) for a, b in zip(bounds, bounds[1:])]
    starts = sorted(set(parts) | {r for a, b in zip(bounds, bounds[1:]) for r in range(a, b, step)})
    for start, block in zip(starts, bundle.read_row_blocks(name, starts)):
        part = bisect.bisect_right(parts, start) - 1
        offset = start - parts[part]
        outputs[part][:, offset : offset + len(block)] = _checked_float(bundle, name, block).T
        del block
    release_freed_memory()  # the blocks' bytes, before the next variable is read
    return outputs


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
    # one module's parameters next to each other (an LSTM cell's kernel, bias, projection), so that each module is
    # filled, and its arrays freed, before the next one is read
    for entry in sorted(entries, key=lambda e: e.params[0].rsplit(".", 2)[0]):
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


def _fill_by_module(bilm: BiLM, arrays_of_entries, source: str) -> None:
    """Make ``bilm``'s parameters (built on the meta device) from the arrays, module by module, as soon as all of
    one module's are read: the arrays become the parameters, so the peak is the weights plus one variable's
    arrays, never two copies of the model."""
    modules = dict(bilm.named_modules())
    pending: dict[str, dict[str, torch.Tensor]] = {}
    for arrays in arrays_of_entries:
        for param, value in arrays.items():
            module, _, leaf = param.rpartition(".")
            pending.setdefault(module, {})[leaf] = torch.from_numpy(np.ascontiguousarray(value))
        for module in [m for m, got in pending.items() if set(got) == set(modules[m].state_dict())]:
            load_checked_state(modules[module], pending.pop(module), f"{source} ({module})", assign=True)
            release_freed_memory()  # the module's raw bytes and transposes (runtime/memory.py)
    for module, got in pending.items():  # a module the map fills only partly: load_checked_state names the gap
        load_checked_state(modules[module], got, f"{source} ({module})", assign=True)
    unfilled = [name for name, p in bilm.named_parameters() if p.is_meta]
    if unfilled:
        raise WeightFileError(f"{source}: no variable fills the biLM's parameter '{unfilled[0]}'")


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
        vocab_size = bundle.shape(names.weights["embedding"])[0]
    with torch.device("meta"):  # shapes only: _fill_by_module makes the parameters from the checkpoint
        bilm = build_bilm(config, token_vocab_size=vocab_size)
    state = bilm.state_dict()
    options = directory / OPTIONS_FILE
    pairs = _entry_variables(bundle, bilm, names)
    log.info("%s: reading the biLM from %s", directory, Path(bundle.prefix).name)
    _fill_by_module(bilm, (_param_arrays(bundle, e, n, state, options) for e, n in pairs), str(bundle.index_path))
    return bilm


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
    weight = torch.from_numpy(_read_float(bundle, SOFTMAX_W))
    bias = torch.from_numpy(_read_float(bundle, SOFTMAX_B))
    dim = bilm.token_encoder.output_dim
    if weight.dim() != 2 or weight.shape[1] != dim or tuple(bias.shape) != (weight.shape[0],):
        raise WeightFileError(f"{where}: {SOFTMAX_W} {tuple(weight.shape)} and {SOFTMAX_B} {tuple(bias.shape)} do "
                              f"not fit the biLM's output dimension {dim}")
    state = bilm.state_dict()
    accumulators: dict[str, torch.Tensor] = {}
    missing = []
    for entry, tf_name in _entry_variables(bundle, bilm, names):
        slot = names.slots.get(tf_name)
        if slot is None:
            missing.append(tf_name)
            continue
        arrays = _param_arrays(bundle, entry, slot, state, directory / OPTIONS_FILE)
        if entry.conversion == "pad_row":
            for value in arrays.values():
                value[0] = 1.0
        accumulators.update({f"bilm.{p}": torch.from_numpy(np.ascontiguousarray(v)) for p, v in arrays.items()})
    for tf_name, ours in ((SOFTMAX_W, "softmax.weight"), (SOFTMAX_B, "softmax.bias")):
        slot = names.slots.get(tf_name)
        if slot is None:
            missing.append(tf_name)
        elif bundle.shape(slot) != bundle.shape(tf_name):
            raise WeightFileError(f"{where}: '{slot}' has shape {bundle.shape(slot)}, its variable "
                                  f"{bundle.shape(tf_name)}")
        else:
            accumulators[ours] = torch.from_numpy(_read_float(bundle, slot))
    if missing:
        if accumulators:
            raise WeightFileError(f"{where}: no Adagrad accumulator '{missing[0]}{SLOT}' ({len(missing)} missing in "
                                  "all), though other variables have one")
        log.warning("%s: no Adagrad accumulators (a checkpoint saved without the optimizer): they start at 1.0, as "
                    "in a new bilm-tf run", where)
    step = 0
    if GLOBAL_STEP in bundle:
        step = int(np.asarray(bundle.read(GLOBAL_STEP)).reshape(-1)[0])
    return BilmTfTrainingState(weight, bias, accumulators, step, Path(bundle.prefix))
