"""The original weight file (``weights.hdf5``) <-> our parameters, through ONE declarative name map.

The original ``dump_weights`` writes every trainable variable but the softmax as a float32 dataset named after its
TF scope. Each row of :data:`WEIGHT_MAP` pairs a dataset name template with the parameter(s) it fills and the
conversion between the two layouts:

=============== ==================================================== ===========================================
conversion      HDF5 layout                                          our layout
=============== ==================================================== ===========================================
``pad_row``     [V, E] (no padding row)                              [V + 1, E], row 0 zero (id 0 pads)
``conv``        [1, width, E, n] (TF conv2d NHWC kernel)             Conv1d weight [n, E, width]
``transpose``   [in, out] (TF ``x @ W``)                             Linear weight [out, in]
``lstm_kernel`` [in + P, 4C] on concat(input, h_prev), gates i,j,f,o input [4C, in] and recurrent [4C, P] weights
``same``        unchanged (biases; the LSTM bias keeps TF's gate order, and the forget-gate +1 stays a
                constant of the cell, so nothing is added or subtracted)
=============== ==================================================== ===========================================

Every conversion is a reshape, transpose or split, so load -> save -> load is bit-exact.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import h5py
import numpy as np
import torch

from elmo.config import MAX_VOCABULARY
from elmo.errors import WeightFileError
from elmo.formats.archive_limits import MAX_COMPRESSION_RATIO, RATIO_FLOOR
from elmo.formats.checked_reads import all_finite, fill_by_module
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.runtime.atomic_files import atomic_file, first_line, is_write_failure, write_error

_CELL = "RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell"
_LSTM = "{direction}_lstm.layers.{l}"

# (dataset template, parameter templates, conversion, when). Placeholders: i conv index, k highway layer,
# d direction (0 forward, 1 backward) with ``direction`` its name, l LSTM layer.
WEIGHT_MAP: list[tuple[str, tuple[str, ...], str, str]] = [
    ("char_embed", ("token_encoder.char_embedding.weight",), "pad_row", "char_cnn"),
    ("CNN/W_cnn_{i}", ("token_encoder.convolutions.{i}.weight",), "conv", "char_cnn"),
    ("CNN/b_cnn_{i}", ("token_encoder.convolutions.{i}.bias",), "same", "char_cnn"),
    ("CNN_high_{k}/W_carry", ("token_encoder.highway.carry.{k}.weight",), "transpose", "char_cnn"),
    ("CNN_high_{k}/b_carry", ("token_encoder.highway.carry.{k}.bias",), "same", "char_cnn"),
    ("CNN_high_{k}/W_transform", ("token_encoder.highway.transform.{k}.weight",), "transpose", "char_cnn"),
    ("CNN_high_{k}/b_transform", ("token_encoder.highway.transform.{k}.bias",), "same", "char_cnn"),
    ("CNN_proj/W_proj", ("token_encoder.projection.weight",), "transpose", "cnn_projection"),
    ("CNN_proj/b_proj", ("token_encoder.projection.bias",), "same", "cnn_projection"),
    ("embedding", ("token_encoder.embedding.weight",), "pad_row", "token_embedding"),
    (
        _CELL + "/W_0",
        (_LSTM + ".input_linearity.weight", _LSTM + ".state_linearity.weight"),
        "lstm_kernel",
        "lstm",
    ),
    (_CELL + "/B", (_LSTM + ".input_linearity.bias",), "same", "lstm"),
    (_CELL + "/W_P_0", (_LSTM + ".projection.weight",), "transpose", "lstm_projection"),
]


@dataclass(frozen=True)
class _Conversion:
    to_params: Callable[[np.ndarray, list[tuple[int, ...]]], list[np.ndarray]]
    to_dataset: Callable[[list[np.ndarray]], np.ndarray]


def _pad_row_in(array: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    return [np.concatenate([np.zeros((1, array.shape[1]), dtype=array.dtype), array])]


def _lstm_kernel_in(array: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    input_dim = shapes[0][1]
    return [array[:input_dim].T, array[input_dim:].T]


CONVERSIONS = {
    "same": _Conversion(lambda a, s: [a], lambda p: p[0]),
    "transpose": _Conversion(lambda a, s: [a.T], lambda p: p[0].T),
    "pad_row": _Conversion(_pad_row_in, lambda p: p[0][1:]),
    "conv": _Conversion(lambda a, s: [a[0].transpose(2, 1, 0)], lambda p: p[0].transpose(2, 1, 0)[None]),
    "lstm_kernel": _Conversion(_lstm_kernel_in, lambda p: np.concatenate([p[0].T, p[1].T], axis=0)),
}


@dataclass(frozen=True)
class WeightEntry:
    dataset: str
    params: tuple[str, ...]
    conversion: str


def weight_entries(bilm: BiLM) -> list[WeightEntry]:
    """The concrete rows of :data:`WEIGHT_MAP` for this model (every dataset a dump of it contains)."""
    encoder = bilm.token_encoder
    flags = {"lstm": True, "token_embedding": not isinstance(encoder, CharCNNEncoder)}
    flags["char_cnn"] = isinstance(encoder, CharCNNEncoder)
    flags["cnn_projection"] = flags["char_cnn"] and encoder.projection is not None
    flags["lstm_projection"] = bilm.forward_lstm.layers[0].projection is not None
    n_convs = len(encoder.convolutions) if flags["char_cnn"] else 0
    n_highway = len(encoder.highway.carry) if flags["char_cnn"] and encoder.highway is not None else 0
    n_layers = len(bilm.forward_lstm.layers)

    entries = []
    for dataset, params, conversion, when in WEIGHT_MAP:
        if not flags[when]:
            continue
        if "{i}" in dataset:
            ranges = [{"i": i} for i in range(n_convs)]
        elif "{k}" in dataset:
            ranges = [{"k": k} for k in range(n_highway)]
        elif "{l}" in dataset:
            ranges = [
                {"d": d, "direction": name, "l": layer}
                for d, name in enumerate(("forward", "backward"))
                for layer in range(n_layers)
            ]
        else:
            ranges = [{}]
        for values in ranges:
            entries.append(
                WeightEntry(dataset.format(**values), tuple(p.format(**values) for p in params), conversion)
            )
    return entries


def expected_dataset_shape(entry: WeightEntry, state: dict[str, torch.Tensor]) -> tuple[int, ...]:
    """The shape this model's parameters have in the HDF5 layout."""
    fakes = [np.empty(tuple(state[p].shape), dtype=np.float32) for p in entry.params]
    return tuple(CONVERSIONS[entry.conversion].to_dataset(fakes).shape)


BLOCK_BYTES = 1 << 20
"""Rows of a stored array read at a time where they are transposed or shifted on the way: a parameter is filled from
blocks of about this size, so reading it costs the parameter plus one block, not two copies of it."""

RowBlocks = Callable[[list[int], int], Iterator[np.ndarray]]
"""``blocks(starts, stop)``: rows ``[starts[0], starts[1])``, ..., ``[starts[-1], stop)`` of a stored array (its first
axis), in that order, each as float32 checked finite. Each reader (HDF5, tensor bundle) provides one."""


def entry_params(entry: WeightEntry, shapes: list[tuple[int, ...]], stored_rows: int,
                 blocks: RowBlocks) -> dict[str, np.ndarray]:
    """The parameters of one map entry (``shapes``: theirs), converted from the stored array (``stored_rows`` rows)
    block by block into arrays of their own: the same values :data:`CONVERSIONS` gives from the whole array."""
    conversion = entry.conversion
    if conversion in ("transpose", "lstm_kernel"):  # (in, out) -> (out, in); the kernel split at ``in`` first
        outputs = [np.empty(shape, dtype=np.float32) for shape in shapes]
        parts = [0] if conversion == "transpose" else [0, shapes[0][1]]
        bounds = [*parts, stored_rows]
        step = max(1, BLOCK_BYTES // (4 * max(shapes[0][0], 1)))
        starts = sorted(set(parts) | {r for a, b in zip(bounds, bounds[1:]) for r in range(a, b, step)})
        for start, block in zip(starts, blocks(starts, stored_rows)):
            part = bisect.bisect_right(parts, start) - 1
            offset = start - parts[part]
            outputs[part][:, offset : offset + len(block)] = block.T
            del block
        return dict(zip(entry.params, outputs))
    if conversion == "pad_row":  # (V, E) -> (V + 1, E), row 0 zero (the padding id)
        [(rows, width)] = shapes
        out = np.empty((rows, width), dtype=np.float32)
        out[0] = 0.0
        step = max(1, BLOCK_BYTES // (4 * max(width, 1)))
        starts = list(range(0, rows - 1, step)) or [0]
        for start, block in zip(starts, blocks(starts, rows - 1)):
            out[1 + start : 1 + start + len(block)] = block
            del block
        return {entry.params[0]: out}
    [whole] = list(blocks([0], stored_rows))  # biases and convolutions: small
    values = CONVERSIONS[conversion].to_params(whole, shapes)
    return {name: np.ascontiguousarray(value) for name, value in zip(entry.params, values)}


def cell_order(entry: WeightEntry) -> str:
    """A sort key that puts one module's entries (an LSTM cell's kernel, bias and projection) next to each other,
    so that each module is filled, and its arrays freed, before the next is read."""
    return entry.params[0].rsplit(".", 2)[0]


def load_hdf5_weights(
    bilm: BiLM,
    path: str | os.PathLike | BinaryIO,
    embedding_path: str | os.PathLike | None = None,
    name: str | None = None,
) -> None:
    """Fill ``bilm`` from an original weight file (and, for token inputs, the separate ``embedding`` file).

    ``bilm`` is best built on the meta device: its parameters are then made from the file, module by module, and
    loading costs the weights plus one block (a biLM built normally is copied into). Every dataset's name, shape,
    dtype and stored bytes (against the file's size) are checked before any is read. ``path`` may be a seekable
    binary file object; ``name`` then says in messages which file it is.

    Raises:
        WeightFileError: a dataset is missing, unexpected, of the wrong shape or dtype, not all stored, or not
            finite; the message names the file and the dataset.
    """
    state = bilm.state_dict()
    entries = weight_entries(bilm)
    main = [e for e in entries if e.dataset != "embedding" or embedding_path is None]
    extra = [e for e in entries if e not in main]
    with ExitStack() as stack:
        handle, label = stack.enter_context(_opened(path, name, "weight file"))
        sources = _checked_datasets(handle, label, main, state, token_inputs=embedding_path is not None)
        if extra:
            table, table_label = stack.enter_context(_opened(Path(embedding_path), None, "weight file"))
            sources.update(_checked_datasets(table, table_label, extra, state, only_listed=True))

        def arrays():
            for entry in sorted(entries, key=cell_order):
                dataset, where = sources[entry.dataset]
                shapes = [tuple(state[p].shape) for p in entry.params]
                yield entry_params(entry, shapes, dataset.shape[0], _dataset_blocks(dataset, where, entry.dataset))

        fill_by_module(bilm, arrays(), label)


@contextmanager
def _opened(path: str | os.PathLike | BinaryIO, name: str | None, what: str) -> Iterator[tuple[h5py.File, str]]:
    handle, label = _open_hdf5(path, name, what)
    with handle:
        yield handle, label


def _open_hdf5(path: str | os.PathLike | BinaryIO, name: str | None, what: str) -> tuple[h5py.File, str]:
    """(open handle, the name messages use): a path, or a binary file object called ``name``."""
    if isinstance(path, (str, os.PathLike)):
        name = name or str(path)
        if not Path(path).is_file():
            raise WeightFileError(f"{name}: no such {what}")
    name = name or repr(path)
    try:
        return h5py.File(path, "r"), name
    except OSError as e:
        raise WeightFileError(f"{name}: not a readable HDF5 file ({e})") from e


def _check_stored(dataset: h5py.Dataset, label: str, name: str, file_size: int) -> None:
    """The bytes the dataset's shape declares are in the file (before anything is read: h5py allocates the array
    first, and HDF5 hands back its fill value for storage that was never written)."""
    declared = int(dataset.size) * dataset.dtype.itemsize
    stored = dataset.id.get_storage_size()
    filters = dataset.id.get_create_plist().get_nfilters()
    if filters == 0 and stored < declared:
        raise WeightFileError(f"{label}: dataset '{name}' declares {declared:,} bytes, but {stored:,} are stored")
    if filters and declared > RATIO_FLOOR and declared > MAX_COMPRESSION_RATIO * stored:
        raise WeightFileError(f"{label}: dataset '{name}' declares {declared:,} bytes compressed into {stored:,}, "
                              f"more than {MAX_COMPRESSION_RATIO}:1; refusing it")
    offset = dataset.id.get_offset()
    if offset is not None and offset + stored > file_size:
        raise WeightFileError(f"{label}: dataset '{name}' lies at bytes {offset:,}..{offset + stored:,}, past the end "
                              f"of the file ({file_size:,} bytes: truncated?)")
    if dataset.chunks is not None:
        for i in range(dataset.id.get_num_chunks()):
            chunk = dataset.id.get_chunk_info(i)
            if chunk.byte_offset is None or chunk.byte_offset + chunk.size > file_size:
                raise WeightFileError(f"{label}: dataset '{name}' has a chunk past the end of the file ({file_size:,} "
                                      "bytes: truncated?)")


def _checked_datasets(
    handle: h5py.File,
    path: str,
    entries: list[WeightEntry],
    state: dict[str, torch.Tensor],
    token_inputs: bool = False,
    only_listed: bool = False,
) -> dict[str, tuple[h5py.Dataset, str]]:
    """dataset name -> (the dataset, the file's name) for every entry, after checking that no other dataset is there
    and that each has the shape, a float dtype and the stored bytes it should; nothing is read."""
    names: list[str] = []
    try:
        handle.visititems(lambda item, obj: names.append(item) if isinstance(obj, h5py.Dataset) else None)
    except (RuntimeError, KeyError, OSError, ValueError) as e:  # h5py's words for a damaged object header or link
        raise WeightFileError(f"{path}: damaged HDF5 file ({first_line(e)})") from e
    expected = {e.dataset for e in entries}
    if not only_listed:
        for name in sorted(names):
            if name in expected or canonical_name(name) in expected or "softmax" in name:
                continue  # softmax weights are the LM head, not part of the biLM (the original skips them too)
            if token_inputs and (name in ("char_embed", "embedding") or name.startswith("CNN")):
                continue  # a token-input biLM reads its token layer elsewhere and leaves the char CNN unused
            raise WeightFileError(f"{path}: unexpected dataset '{name}' for these options (wrong options file?)")
    file_size = handle.id.get_filesize()  # what the file holds (for a file object too)
    found = {}
    for entry in entries:
        stored = _stored_name(handle, entry.dataset)
        if stored is None:
            raise WeightFileError(f"{path}: missing dataset '{entry.dataset}' required by the options")
        dataset = handle[stored]
        if not isinstance(dataset, h5py.Dataset):
            raise WeightFileError(f"{path}: '{entry.dataset}' is a group, not a dataset")
        want = expected_dataset_shape(entry, state)
        if entry.dataset == "char_embed" and tuple(dataset.shape) == (want[0] + 1, want[1]):
            pass  # 262 rows (n_characters 262 at training): bilm-tf and AllenNLP prepend the padding row to whatever
            # the file holds and index it with ids 0..261, so the file's last row is never used (not read)
        elif tuple(dataset.shape) != want:
            raise WeightFileError(
                f"{path}: dataset '{entry.dataset}' has shape {tuple(dataset.shape)}, the options expect {want}"
            )
        if dataset.dtype.kind != "f":
            raise WeightFileError(f"{path}: dataset '{entry.dataset}' has dtype {dataset.dtype}, expected float32")
        _check_stored(dataset, path, entry.dataset, file_size)
        found[entry.dataset] = (dataset, path)
    return found


def _dataset_blocks(dataset: h5py.Dataset, path: str, name: str) -> RowBlocks:
    def blocks(starts: list[int], stop: int) -> Iterator[np.ndarray]:
        for a, b in zip(starts, [*starts[1:], stop]):
            try:
                block = dataset[a:b].astype(np.float32, copy=False)
            except OSError as e:
                raise WeightFileError(f"{path}: dataset '{name}' cannot be read ({e})") from e
            if not all_finite(block):
                raise WeightFileError(f"{path}: dataset '{name}' contains NaN or Inf values")
            yield block

    return blocks


# A one-layer model trained by the original code has no MultiRNNCell scope: RNN_0/RNN/LSTMCell/W_0.
_MULTI_CELL0, _SINGLE_CELL = "/RNN/MultiRNNCell/Cell0/LSTMCell/", "/RNN/LSTMCell/"


def canonical_name(name: str) -> str:
    """The map's spelling of a dataset name: a one-layer model's ``RNN_d/RNN/LSTMCell/...`` is
    ``RNN_d/RNN/MultiRNNCell/Cell0/LSTMCell/...``."""
    return name.replace(_SINGLE_CELL, _MULTI_CELL0)


def _stored_name(handle: h5py.File, name: str) -> str | None:
    """The dataset's name in this file: the canonical one, or its one-layer spelling."""
    if name in handle:
        return name
    alias = name.replace(_MULTI_CELL0, _SINGLE_CELL)
    return alias if alias != name and alias in handle else None


def read_embedding_vocab_size(
    path: str | os.PathLike | BinaryIO,
    options_without_char_cnn: str | os.PathLike | None = None,
    name: str | None = None,
) -> int:
    """Number of rows of the ``embedding`` dataset of a token-embedding file.

    ``options_without_char_cnn``: the options file, when ``path`` is the weight file of the word-input model it
    describes (the error then says why a table was expected). ``path`` may be a binary file object called ``name``.
    """
    handle, path = _open_hdf5(path, name, "embedding file")
    try:
        with handle:
            if "embedding" not in handle and options_without_char_cnn is None:
                raise WeightFileError(f"{path}: missing dataset 'embedding'")
            if "embedding" not in handle and "char_embed" in handle:
                raise WeightFileError(
                    f"{options_without_char_cnn}: no 'char_cnn' block, but {path} holds a character CNN: the options "
                    "file does not describe these weights (use the options.json published with them)"
                )
            if "embedding" not in handle:
                raise WeightFileError(
                    f"{options_without_char_cnn}: no 'char_cnn' block, so the model reads word ids, but {path} holds "
                    "no token table (dataset 'embedding'); pass the table as embedding_file, or use options with "
                    "a char_cnn block"
                )
            shape = handle["embedding"].shape
            if len(shape) != 2 or not 1 <= shape[0] <= MAX_VOCABULARY:
                raise WeightFileError(f"{path}: dataset 'embedding' has shape {shape}, expected (V, P) with at most "
                                      f"{MAX_VOCABULARY:,} rows (docs/formats.md, Limits)")
            return int(shape[0])
    except OSError as e:
        raise WeightFileError(f"{path}: not a readable HDF5 file ({e})") from e


def bilm_to_datasets(bilm: BiLM) -> dict[str, np.ndarray]:
    """Every dataset of the original layout for this model, float32, in map order."""
    state = {k: v.detach().to("cpu", torch.float32).numpy() for k, v in bilm.state_dict().items()}
    return {
        e.dataset: np.ascontiguousarray(CONVERSIONS[e.conversion].to_dataset([state[p] for p in e.params]))
        for e in weight_entries(bilm)
    }


def save_hdf5_weights(
    bilm: BiLM, path: str | os.PathLike, token_embedding_path: str | os.PathLike | None = None
) -> None:
    """Write ``bilm`` in the original layout, atomically (temp file + rename).

    For a token-input biLM the ``embedding`` table goes to ``token_embedding_path`` when given (the original
    keeps it in a separate file), else into the weight file itself (as the original trainer's dump does).
    """
    datasets = bilm_to_datasets(bilm)
    if token_embedding_path is not None and "embedding" in datasets:
        write_hdf5_atomic(token_embedding_path, {"embedding": datasets.pop("embedding")})
    write_hdf5_atomic(path, datasets)


def write_hdf5_atomic(path: str | os.PathLike, datasets: dict[str, np.ndarray]) -> None:
    """Write float32 datasets to ``path`` atomically."""

    try:  # h5py through a file that keeps a failed write (a full disk) for us to raise, not HDF5's C code
        with atomic_file(path) as file, h5py.File(file, "w") as handle:
            for name, array in datasets.items():
                handle.create_dataset(name, data=array, dtype="float32")
                file.raise_kept()
    except Exception as e:
        if not is_write_failure(e):
            raise
        raise write_error(path, e, "nothing was written there") from e
