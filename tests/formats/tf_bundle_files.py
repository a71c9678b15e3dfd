"""TensorFlow tensor bundles and SavedModel graphs written byte by byte, without TensorFlow: for files that declare
what TensorFlow would never write (a shape over bytes that are not there, overlapping slices) and for tests that must
not wait for TensorFlow to import. The layout follows TensorFlow's ``table_builder.cc`` / ``tensor_bundle.cc``
(docs/formats.md describes it); the real files written by TensorFlow itself are in ``bilm_tf_files.py``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from elmo.formats.tensorflow.crc32c import crc32c, mask

_MAGIC = 0xDB4775248B80FB57
_DTYPES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.int64): 9,
           np.dtype(np.float16): 19}


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def field_fixed32(number: int, value: int) -> bytes:
    return varint(number << 3 | 5) + struct.pack("<I", value)


@dataclass
class Entry:
    """One BundleEntryProto: what the index says about a tensor (or one slice of it)."""

    dtype: int
    shape: tuple[int, ...]
    offset: int
    size: int
    crc: int
    shard: int = 0
    sliced: bool = False

    def encode(self) -> bytes:
        shape = b"".join(field_bytes(2, field_varint(1, d)) for d in self.shape)
        proto = field_varint(1, self.dtype) + field_bytes(2, shape)
        if self.shard:
            proto += field_varint(3, self.shard)
        proto += field_varint(4, self.offset) + field_varint(5, self.size) + field_fixed32(6, mask(self.crc))
        if self.sliced:
            proto += field_bytes(7, b"")  # a TensorSliceProto per slice; the reader only notes that there are slices
        return proto


def _ordered_signed(value: int) -> bytes:
    """TensorFlow's ordered code for a small signed number (|value| < 8192), as slice keys hold it."""
    if value < 0:
        return bytes(b ^ 0xFF for b in _ordered_signed(~value))
    if value < 64:
        return bytes([0x80 | value])
    assert value < 8192
    return bytes([0xC0 | value >> 8, value & 0xFF])


def slice_key(name: str, extents: list[tuple[int, int]]) -> bytes:
    """The index key of one slice: (start, length) per dimension, length -1 for all of it."""
    escaped = name.encode()
    assert b"\x00" not in escaped and b"\xff" not in escaped  # (TensorFlow escapes them; names never hold them)
    key = b"\x00" + escaped + b"\x00\x01" + bytes([1, len(extents)])
    for start, length in extents:
        key += _ordered_signed(start) + _ordered_signed(length)
    return key


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(varint(0) + varint(len(k)) + varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)  # one restart point, at 0


def _with_trailer(block: bytes) -> bytes:
    return block + b"\x00" + struct.pack("<I", mask(crc32c(block + b"\x00")))


def write_index(path: Path, entries: dict[bytes, bytes], num_shards: int = 1) -> None:
    """A ``.index`` table holding ``entries`` (key -> value; the header is added) in one data block."""
    items = sorted({b"": field_varint(1, num_shards), **entries}.items())
    data = _with_trailer(_block(items))
    index_at = len(data)
    index = _with_trailer(_block([(items[-1][0], varint(0) + varint(len(data) - 5))]))
    meta_at = index_at + len(index)
    meta = _with_trailer(_block([]))
    handles = varint(meta_at) + varint(len(meta) - 5) + varint(index_at) + varint(len(index) - 5)
    footer = handles.ljust(40, b"\x00") + struct.pack("<Q", _MAGIC)
    path.write_bytes(data + index + meta + footer)


@dataclass
class Bundle:
    """Tensors to write as ``PREFIX.index`` + ``PREFIX.data-00000-of-00001``; ``declare`` makes an entry say
    what the bytes are not (a shape, size or offset of its own), ``slices`` stores a variable in slices."""

    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    declare: dict[str, dict] = field(default_factory=dict)
    slices: dict[str, list[tuple[list[tuple[int, int]], np.ndarray]]] = field(default_factory=dict)

    def write(self, prefix: Path) -> None:
        data, entries = bytearray(), {}

        def add(array: np.ndarray) -> Entry:
            raw = np.ascontiguousarray(array).tobytes()
            entry = Entry(_DTYPES[array.dtype], tuple(array.shape), len(data), len(raw), crc32c(raw))
            data.extend(raw)
            return entry

        for name, array in self.tensors.items():
            entry = add(np.asarray(array))
            for key, value in self.declare.get(name, {}).items():
                setattr(entry, key, value)
            entries[name.encode()] = entry.encode()
        for name, parts in self.slices.items():
            full = tuple(self.declare.get(name, {}).get("shape", ()))
            dtype = _DTYPES[parts[0][1].dtype]
            entries[name.encode()] = Entry(dtype, full, 0, 0, 0, sliced=True).encode()
            for extents, array in parts:
                entries[slice_key(name, extents)] = add(array).encode()
        prefix.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{prefix}.data-00000-of-00001").write_bytes(bytes(data))
        write_index(Path(f"{prefix}.index"), entries)


def saved_model(nodes: list[tuple[str, str, list[str]]]) -> bytes:
    """A ``saved_model.pb`` whose one meta graph holds these (name, op, inputs) nodes and nothing else."""
    graph = b"".join(field_bytes(1, field_bytes(1, name.encode()) + field_bytes(2, op.encode())
                                 + b"".join(field_bytes(3, i.encode()) for i in inputs)) for name, op, inputs in nodes)
    return field_varint(1, 1) + field_bytes(2, field_bytes(2, graph))


def write_hub_module(directory: Path, bilm, declare: dict | None = None) -> Path:
    """A TF-Hub module folder of ``bilm`` (the ``tfhub_module.pb`` marker and its variables; no graph, so the
    reader takes the published activation, clips and residual): bilm-tf's variables under ``bilm/``, each in the
    layout of its HDF5 dataset, ``char_embed`` with its padding row. ``declare``: entries that say what their bytes
    are not (``Bundle``)."""
    from elmo.formats.hdf5 import bilm_to_datasets
    from elmo.formats.tensorflow.tf_hub import hub_variable_name

    datasets = bilm_to_datasets(bilm)
    tensors = {hub_variable_name(name): value for name, value in datasets.items()}
    embed = datasets["char_embed"]
    tensors["bilm/char_embed"] = np.concatenate([np.zeros((1, embed.shape[1]), np.float32), embed])
    (directory / "variables").mkdir(parents=True)
    (directory / "tfhub_module.pb").write_bytes(b"\x08\x01")  # ModuleDef{format: 1}
    Bundle(tensors=tensors, declare=declare or {}).write(directory / "variables" / "variables")
    return directory
