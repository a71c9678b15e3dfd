"""TensorFlow's tensor bundle (a checkpoint ``PREFIX.index`` + ``PREFIX.data-NNNNN-of-NNNNN``), read without TensorFlow.

Published ELMo models trained with bilm-tf, and every TF-Hub module, keep their weights in this format; reading it
here means none of them needs TensorFlow installed. The layout, as TensorFlow writes it (``tensor_bundle.cc``,
``table_builder.cc``):

* ``PREFIX.index`` is a LevelDB-style sorted table. Its last 48 bytes are the footer: two block handles (varint
  offset, varint size; the metaindex block, then the index block), zero padding, and the magic number
  ``0xdb4775248b80fb57``. Each block is followed by a 1-byte compression type (0: TensorFlow writes bundles
  uncompressed; a block marked with LevelDB's Snappy, 1, is refused) and the masked CRC32C of block + type byte.
  A block holds prefix-compressed entries (varint shared, unshared and value lengths, the key's new bytes, the
  value), then the restart offsets (uint32 each) and their count. The index block's values are the data blocks'
  handles.
* The entry with the empty key is a ``BundleHeaderProto`` (``num_shards`` = 1, ``endianness`` = 2, ``version`` = 3);
  every other key is a tensor name and its value a ``BundleEntryProto``: ``dtype`` = 1 (TensorFlow's DataType enum),
  ``shape`` = 2 (``TensorShapeProto``: repeated ``dim`` = 2, each with ``size`` = 1), ``shard_id`` = 3, ``offset``
  = 4, ``size`` = 5, ``crc32c`` = 6 (fixed32, masked), ``slices`` = 7. The protobufs are decoded by the wire-format
  reader of :mod:`elmo.formats.tensorflow.protobuf`, so no generated code is needed.
* A variable saved in slices (a partitioned variable, or one TensorFlow split to keep shards under a size) has an
  entry with its full shape and ``slices`` set, and one entry per slice under a key in TensorFlow's "ordered code"
  (a 0 byte, the escaped name ending in ``00 01``, the rank, then each dimension's start and length, -1 for all):
  the slices are read and put together.
* A tensor's bytes are ``size`` bytes at ``offset`` in shard ``shard_id``, in C order, in the header's byte order.
  A string tensor holds each element's length (varint64), the masked CRC32C of those lengths (4 bytes), then the
  bytes.

Only the tensors asked for are read (a seek and one read of ``size`` bytes into the array itself), so a training
checkpoint whose optimizer slots and softmax are several times the biLM costs only the biLM to open. Before anything
is allocated for a tensor, :meth:`TensorBundle.check` holds its entry to the files: the size agrees with dtype and
shape, the bytes lie inside an existing shard, and a sliced variable's slices tile it exactly (each inside it, none
overlapping another, their volumes adding up to the whole: positions, not counts). Every read then checks the
CRC32C.

bfloat16 (TensorFlow's DT_BFLOAT16) has no numpy dtype in the core install: :meth:`TensorBundle.read` widens it to
float32, which is exact (a bfloat16 is the upper half of a float32), and :meth:`TensorBundle.dtype` says float32;
:meth:`TensorBundle.stored_dtype` gives TensorFlow's own name of what the file holds.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo.errors import WeightFileError
from elmo.formats.checked_reads import all_finite, read_whole
from elmo.formats.tensorflow.crc32c import crc32c, unmask
from elmo.formats.tensorflow.protobuf import decoding, fields, read_varint

_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_TRAILER = 5  # compression type + masked CRC32C

# TensorFlow's DataType enum (types.proto) -> (name, numpy dtype of the stored bytes, little-endian).
_DTYPES: dict[int, tuple[str, str]] = {
    1: ("float32", "<f4"),
    2: ("float64", "<f8"),
    3: ("int32", "<i4"),
    4: ("uint8", "u1"),
    5: ("int16", "<i2"),
    6: ("int8", "i1"),
    7: ("string", "O"),
    8: ("complex64", "<c8"),
    9: ("int64", "<i8"),
    10: ("bool", "?"),
    14: ("bfloat16", "<u2"),
    17: ("uint16", "<u2"),
    18: ("complex128", "<c16"),
    19: ("float16", "<f2"),
    22: ("uint32", "<u4"),
    23: ("uint64", "<u8"),
}
_FLOATS = {"float32", "float16", "bfloat16", "float64"}
MAX_SLICES = 1024
"""Slices of one variable (TensorFlow partitions a variable into a few dozen at most)."""


@dataclass(frozen=True)
class BundleEntry:
    """Where one tensor lies and what it is (a decoded ``BundleEntryProto``)."""

    dtype: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int  # unmasked
    sliced: bool


_ENTRY_FIELDS = {1: int, 2: bytes, 3: int, 4: int, 5: int, 6: int, 7: bytes}
"""BundleEntryProto: dtype, shape (a message), shard_id, offset, size, crc32c, slices (messages)."""


def _decode_entry(value: bytes, where: str) -> BundleEntry:
    dtype, shape, shard, offset, size, crc, sliced = 0, [], 0, 0, 0, 0, False
    with decoding(where):
        for number, _, field in fields(value, _ENTRY_FIELDS):
            if number == 1:
                dtype = field
            elif number == 2:
                for dim_number, _, dim in fields(field, {2: bytes}):
                    if dim_number == 2:
                        size_fields = [v for n, _, v in fields(dim, {1: int}) if n == 1]
                        shape.append(size_fields[-1] if size_fields else 0)
                    elif dim_number == 3 and dim:
                        raise WeightFileError(f"{where}: tensor of unknown rank")
            elif number == 3:
                shard = field
            elif number == 4:
                offset = field
            elif number == 5:
                size = field
            elif number == 6:
                crc = unmask(field)
            elif number == 7:
                sliced = True
    return BundleEntry(int(dtype), tuple(int(d) for d in shape), int(shard), int(offset), int(size), crc, sliced)


# --- the keys of slices (tensorflow/core/lib/strings/ordered_code.cc) ---------------------------------------------


def _ordered_string(key: bytes, pos: int, where: str) -> tuple[str, int]:
    out = bytearray()
    while pos + 1 < len(key):
        byte = key[pos]
        if byte == 0 and key[pos + 1] == 1:
            return out.decode("utf-8", errors="replace"), pos + 2
        if byte in (0, 0xFF):  # escaped: 00 ff is a 0 byte, ff 00 a ff byte
            out.append(byte)
            pos += 2
        else:
            out.append(byte)
            pos += 1
    raise WeightFileError(f"{where}: malformed slice key")


def _ordered_unsigned(key: bytes, pos: int, where: str) -> tuple[int, int]:
    length = key[pos] if pos < len(key) else 99
    if length > 8 or pos + 1 + length > len(key):
        raise WeightFileError(f"{where}: malformed slice key")
    return int.from_bytes(key[pos + 1 : pos + 1 + length], "big"), pos + 1 + length


def _ordered_signed(key: bytes, pos: int, where: str) -> tuple[int, int]:
    if pos >= len(key):
        raise WeightFileError(f"{where}: malformed slice key")
    negative = not key[pos] & 0x80
    head = bytes(b ^ 0xFF for b in key[pos : pos + 2]) if negative else key[pos : pos + 2]
    bits = int.from_bytes(head.ljust(2, b"\0"), "big")
    length = 0
    while length < 10 and bits & (0x8000 >> length):  # the length is the count of leading one bits
        length += 1
    if length == 0 or pos + length > len(key):
        raise WeightFileError(f"{where}: malformed slice key")
    body = bytearray(b ^ 0xFF for b in key[pos : pos + length]) if negative else bytearray(key[pos : pos + length])
    for i in range(length):  # clear the header bits
        body[i // 8] &= ~(0x80 >> (i % 8)) & 0xFF
    value = int.from_bytes(bytes(body), "big")
    return (~value if negative else value), pos + length


def _decode_slice_key(key: bytes, where: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(tensor name, (start, length) per dimension; length -1: the whole dimension) of a slice's key."""
    name, pos = _ordered_string(key, 1, where)
    rank, pos = _ordered_unsigned(key, pos, where)
    extents = []
    for _ in range(rank):
        start, pos = _ordered_signed(key, pos, where)
        length, pos = _ordered_signed(key, pos, where)
        extents.append((start, length))
    return name, tuple(extents)


# --- the sorted table of the .index file ---------------------------------------------------------------------------


def _block(index: bytes, offset: int, size: int, where: str) -> bytes:
    if offset + size + _TRAILER > len(index):
        raise WeightFileError(f"{where}: block at byte {offset} runs past the end of the file (truncated?)")
    contents = index[offset : offset + size]
    kind = index[offset + size]
    (stored,) = struct.unpack_from("<I", index, offset + size + 1)
    if crc32c(index[offset : offset + size + 1]) != unmask(stored):
        raise WeightFileError(f"{where}: CRC32C mismatch in the block at byte {offset} (the file is damaged)")
    if kind == 0:
        return contents
    if kind == 1:  # LevelDB's default; TensorFlow turns it off for bundles
        raise WeightFileError(f"{where}: block at byte {offset} is compressed with Snappy, which TensorFlow does not "
                              "write for checkpoints; not supported")
    raise WeightFileError(f"{where}: block at byte {offset} has unknown compression type {kind}")


def _block_entries(block: bytes, where: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise WeightFileError(f"{where}: block too short")
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise WeightFileError(f"{where}: malformed block (restart array larger than the block)")
    entries, key, pos = [], b"", 0
    while pos < end:
        shared, pos = read_varint(block, pos)
        unshared, pos = read_varint(block, pos)
        value_length, pos = read_varint(block, pos)
        if shared > len(key) or pos + unshared + value_length > end:
            raise WeightFileError(f"{where}: malformed block entry at byte {pos}")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        entries.append((key, block[pos : pos + value_length]))
        pos += value_length
    return entries


def _read_table(path: Path) -> list[tuple[bytes, bytes]]:
    where = str(path)
    try:
        index = read_whole(path)
    except OSError as e:
        raise WeightFileError(f"{where}: cannot read the checkpoint index ({e.strerror or e})") from e
    if len(index) < _FOOTER or int.from_bytes(index[-8:], "little") != _MAGIC:
        raise WeightFileError(f"{where}: not a TensorFlow checkpoint index (no table footer)")
    footer = index[-_FOOTER:-8]
    entries = []
    with decoding(where):
        _, pos = read_varint(footer, 0)  # the metaindex block: empty in bundles
        _, pos = read_varint(footer, pos)
        index_offset, pos = read_varint(footer, pos)
        index_size, pos = read_varint(footer, pos)
        for _, handle in _block_entries(_block(index, index_offset, index_size, where), where):
            offset, pos = read_varint(handle, 0)
            size, _ = read_varint(handle, pos)
            entries.extend(_block_entries(_block(index, offset, size, where), where))
    return entries


# --- the bundle ----------------------------------------------------------------------------------------------------


def bundle_prefix_of(path: str | os.PathLike) -> str:
    """``dir/model.ckpt-10`` from the prefix itself, its ``.index`` or one of its ``.data-*`` shards."""
    text = os.fspath(path)
    if text.endswith(".index"):
        return text[: -len(".index")]
    head, sep, _ = text.rpartition(".data-")
    return head if sep else text


class TensorBundle:
    """The tensors of one TensorFlow checkpoint, ``TensorBundle("dir/model.ckpt-10")`` (the prefix of
    ``dir/model.ckpt-10.index`` and its data shards). Opening reads only the index; :meth:`read` reads one tensor."""

    def __init__(self, prefix: str | os.PathLike) -> None:
        self.prefix = bundle_prefix_of(prefix)
        self.index_path = Path(self.prefix + ".index")
        if not self.index_path.is_file():
            raise WeightFileError(f"{self.index_path}: no such checkpoint index")
        where = str(self.index_path)
        self._entries: dict[str, BundleEntry] = {}
        self._slices: dict[str, list[tuple[tuple[tuple[int, int], ...], BundleEntry]]] = {}
        self._shard_sizes: dict[int, int] = {}
        self._checked: set[str] = set()
        self.num_shards, self.big_endian = 1, False
        for key, value in _read_table(self.index_path):
            if key == b"":
                with decoding(f"{where}: the bundle's header"):
                    for number, _, field in fields(value, {1: int, 2: int}):
                        if number == 1:
                            self.num_shards = int(field)
                        elif number == 2:
                            self.big_endian = field == 1
            elif key[0] == 0:  # one slice of a variable saved in slices
                name, extents = _decode_slice_key(key, where)
                self._slices.setdefault(name, []).append((extents, _decode_entry(value, f"{where}: '{name}'")))
            else:
                name = key.decode("utf-8", errors="replace")
                self._entries[name] = _decode_entry(value, f"{where}: tensor '{name}'")

    def names(self) -> list[str]:
        """Every tensor in the checkpoint, sorted (the index's order)."""
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def entry(self, name: str) -> BundleEntry:
        if name not in self._entries:
            raise WeightFileError(f"{self.index_path}: no tensor '{name}' in this checkpoint")
        return self._entries[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entry(name).shape

    def stored_dtype(self, name: str) -> str:
        """TensorFlow's name of the stored dtype (``float32``, ``bfloat16``, ...)."""
        return self._dtype_info(name)[0]

    def dtype(self, name: str) -> np.dtype:
        """The dtype :meth:`read` returns (bfloat16 widened to float32; strings as Python bytes objects)."""
        stored, numpy_dtype = self._dtype_info(name)
        return np.dtype(np.float32) if stored == "bfloat16" else np.dtype(numpy_dtype).newbyteorder("=")

    def shard_path(self, shard: int) -> Path:
        return Path(f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}")

    def _dtype_info(self, name: str, entry: BundleEntry | None = None) -> tuple[str, str]:
        entry = entry or self.entry(name)
        if entry.dtype not in _DTYPES:
            raise WeightFileError(
                f"{self.index_path}: tensor '{name}' has TensorFlow dtype number {entry.dtype}, which this reader "
                "does not know"
            )
        return _DTYPES[entry.dtype]

    def check(self, name: str) -> None:
        """The tensor's entry against the files, before anything is allocated for it: its size is what its dtype
        and shape take, its bytes lie inside its shard, and, for a variable saved in slices, the slices tile it
        exactly. One line naming the file and the tensor otherwise."""
        if name in self._checked:
            return
        entry = self.entry(name)
        if entry.sliced:
            self._check_slices(name, entry)
        else:
            self._check_bytes(name, entry)
        self._checked.add(name)

    def _shard_size(self, shard: int, name: str) -> int:
        if shard >= self.num_shards:
            raise WeightFileError(
                f"{self.index_path}: tensor '{name}' is in shard {shard}, but the checkpoint has {self.num_shards}"
            )
        if shard not in self._shard_sizes:
            path = self.shard_path(shard)
            try:
                self._shard_sizes[shard] = path.stat().st_size
            except OSError as e:
                raise WeightFileError(f"{path}: cannot read tensor '{name}' ({e.strerror or e})") from e
        return self._shard_sizes[shard]

    def _check_bytes(self, name: str, entry: BundleEntry) -> None:
        stored, numpy_dtype = self._dtype_info(name, entry)
        if stored != "string":
            need = math.prod(entry.shape) * np.dtype(numpy_dtype).itemsize
            if entry.size != need:
                raise WeightFileError(
                    f"{self.index_path}: tensor '{name}' has {entry.size:,} bytes, but {stored} of shape "
                    f"{entry.shape} takes {need:,}"
                )
        end = entry.offset + entry.size
        if end > self._shard_size(entry.shard, name):
            raise WeightFileError(
                f"{self.shard_path(entry.shard)}: tensor '{name}' needs bytes {entry.offset:,}..{end:,}, but the file "
                f"ends at byte {self._shard_size(entry.shard, name):,} (truncated shard, or an index that declares "
                "more than the checkpoint holds)"
            )

    def _check_slices(self, name: str, entry: BundleEntry) -> None:
        parts = self._slices.get(name, [])
        where = f"{self.index_path}: tensor '{name}'"
        if len(parts) > MAX_SLICES:
            raise WeightFileError(f"{where} is saved in {len(parts)} slices, more than {MAX_SLICES}")
        boxes = []
        for extents, part in parts:
            if len(extents) != len(entry.shape) or part.dtype != entry.dtype:
                raise WeightFileError(f"{where}: a slice does not match the tensor (rank or dtype)")
            box = []
            for (start, length), size in zip(extents, entry.shape):
                stop = size if length < 0 else start + length
                if not 0 <= start <= stop <= size:
                    raise WeightFileError(f"{where}: a slice spans {start}..{stop} of a dimension of {size}")
                box.append((start, stop))
            if tuple(b - a for a, b in box) != part.shape:
                raise WeightFileError(f"{where}: a slice has shape {part.shape}, its key says "
                                      f"{tuple(b - a for a, b in box)}")
            self._check_bytes(name, part)
            boxes.append(box)
        if boxes:
            corners = np.array(boxes, dtype=object)  # (slices, rank, 2), Python ints: no overflow
            starts, stops = corners[:, :, 0], corners[:, :, 1]
            for i in range(len(boxes) - 1):  # two boxes overlap when they overlap along every dimension
                apart = (np.maximum(starts[i], starts[i + 1:]) >= np.minimum(stops[i], stops[i + 1:])).any(axis=1)
                if not apart.all():
                    raise WeightFileError(f"{where}: two of its slices overlap (the index is damaged)")
        covered = sum(math.prod(b - a for a, b in box) for box in boxes)
        if covered != math.prod(entry.shape):
            raise WeightFileError(f"{where}: its slices cover {covered:,} of its {math.prod(entry.shape):,} values "
                                  "(the index is missing a slice)")

    def read(self, name: str) -> np.ndarray:
        """The tensor ``name``, its bytes read from its shard and checked (length, CRC32C, size for dtype and
        shape)."""
        self.check(name)
        entry = self.entry(name)
        if entry.sliced:
            return self._read_sliced(name, entry)
        return self._read_entry(name, entry)

    def float_row_blocks(self, name: str, starts: list[int], stop: int, label: str | None = None
                         ) -> Iterator[np.ndarray]:
        """The rows ``[starts[0], starts[1])``, ..., ``[starts[-1], stop)`` of a float variable as float32, each
        checked finite (``label`` names the model in the messages): :data:`elmo.formats.hdf5.RowBlocks`."""
        where = label or str(self.index_path)
        stored = self.stored_dtype(name)
        if stored not in _FLOATS:
            raise WeightFileError(f"{where}: variable '{name}' has dtype {stored}, expected a float dtype")
        shape = self.shape(name)
        if shape and stop == shape[0]:
            blocks = self.read_row_blocks(name, starts)
        else:  # part of the rows (a 262-row char_embed), or a scalar: read whole (small), then cut
            whole = self.read(name)
            blocks = (whole[a:b] for a, b in zip(starts, [*starts[1:], stop]))
        for block in blocks:
            if block.dtype != np.float32:
                block = block.astype(np.float32)
            if not all_finite(block):
                raise WeightFileError(f"{where}: variable '{name}' contains NaN or Inf values")
            yield block

    def read_row_blocks(self, name: str, starts: list[int]) -> Iterator[np.ndarray]:
        """The tensor's rows in consecutive blocks, ``[starts[0], starts[1])``, ..., ``[starts[-1], rows)``, each
        read only when the one before it has been taken: a caller that transposes each block as it comes holds one
        block's raw bytes, not the whole tensor's. The CRC32C runs over the blocks in order and is checked before
        the last one is given. Tensors stored otherwise (in slices, big-endian, bfloat16, strings) are read whole."""
        self.check(name)
        entry = self.entry(name)
        stored, numpy_dtype = self._dtype_info(name)
        bounds = [*starts, entry.shape[0] if entry.shape else 0]
        if entry.sliced or self.big_endian or stored in ("string", "bfloat16") or not entry.shape or not bounds[-1]:
            whole = self.read(name)
            yield from (whole[a:b] for a, b in zip(bounds, bounds[1:]))
            return
        row_bytes = entry.size // entry.shape[0]
        path = self.shard_path(entry.shard)
        crc = 0
        with open(path, "rb") as f:
            for a, b in zip(bounds, bounds[1:]):
                raw = np.empty((b - a) * row_bytes, dtype=np.uint8)
                f.seek(entry.offset + a * row_bytes)
                got = f.readinto(memoryview(raw)) if raw.size else 0
                if got != raw.size:
                    raise WeightFileError(
                        f"{path}: tensor '{name}' needs bytes {entry.offset}..{entry.offset + entry.size}, but the "
                        f"file ends at byte {entry.offset + a * row_bytes + got} (truncated shard)"
                    )
                crc = crc32c(raw, crc)
                if b == bounds[-1] and crc != entry.crc32c:
                    self._crc_mismatch(name, entry)
                block = raw.view(numpy_dtype).reshape((b - a, *entry.shape[1:]))
                del raw
                yield block
                del block  # before the next block is read: the caller's copy is all that stays

    def _read_sliced(self, name: str, entry: BundleEntry) -> np.ndarray:
        out = np.empty(entry.shape, dtype=self.dtype(name))  # after check(): the slices tile it exactly
        for extents, part in self._slices.get(name, []):
            where = tuple(slice(start, start + length if length >= 0 else size)
                          for (start, length), size in zip(extents, entry.shape))
            out[where] = self._read_entry(name, part)
        return out

    def _read_entry(self, name: str, entry: BundleEntry) -> np.ndarray:
        stored, numpy_dtype = self._dtype_info(name, entry)
        count = math.prod(entry.shape)
        raw = self._read_bytes(name, entry, check_crc=stored != "string")
        if stored == "string":
            return self._strings(name, entry, raw, count).reshape(entry.shape)
        dtype = np.dtype(numpy_dtype)
        if self.big_endian:
            dtype = dtype.newbyteorder(">")
        array = raw.view(dtype).reshape(entry.shape)
        if stored == "bfloat16":  # exact: the bits are the upper half of a float32
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array if dtype.isnative else array.astype(dtype.newbyteorder("="))

    def _read_bytes(self, name: str, entry: BundleEntry, check_crc: bool = True) -> np.ndarray:
        path = self.shard_path(entry.shard)
        self._check_bytes(name, entry)  # the bytes are in the shard: nothing is allocated for what is not there
        raw = np.empty(entry.size, dtype=np.uint8)
        try:
            with open(path, "rb") as f:
                f.seek(entry.offset)
                got = f.readinto(memoryview(raw)) if entry.size else 0
        except OSError as e:
            raise WeightFileError(f"{path}: cannot read tensor '{name}' ({e.strerror or e})") from e
        if got != entry.size:
            raise WeightFileError(
                f"{path}: tensor '{name}' needs bytes {entry.offset}..{entry.offset + entry.size}, but the file ends "
                f"at byte {entry.offset + got} (truncated shard)"
            )
        if check_crc and crc32c(raw) != entry.crc32c:
            self._crc_mismatch(name, entry)
        return raw

    def _crc_mismatch(self, name: str, entry: BundleEntry) -> None:
        raise WeightFileError(
            f"{self.shard_path(entry.shard)}: CRC32C mismatch in tensor '{name}' (bytes {entry.offset}.."
            f"{entry.offset + entry.size}): the file is damaged; copy or download it again"
        )

    def _strings(self, name: str, entry: BundleEntry, raw: np.ndarray, count: int) -> np.ndarray:
        data = raw.tobytes()
        where = f"{self.shard_path(entry.shard)}: tensor '{name}'"
        lengths, pos = [], 0
        with decoding(where):
            for _ in range(count):
                length, pos = read_varint(data, pos)
                lengths.append(length)
        # The checksum covers each length as a little-endian uint32 (uint64 past 4 GiB), not as the varint stored.
        crc = crc32c(b"".join(n.to_bytes(4 if n <= 0xFFFFFFFF else 8, "little") for n in lengths))
        crc = crc32c(data[pos : pos + 4], crc)
        pos += 4
        out = np.empty(count, dtype=object)
        for i, length in enumerate(lengths):
            out[i] = data[pos : pos + length]
            crc = crc32c(out[i], crc)
            pos += length
        if pos != len(data):
            raise WeightFileError(f"{where}: string lengths do not add up to the tensor's size")
        if crc != entry.crc32c:
            self._crc_mismatch(name, entry)
        return out

