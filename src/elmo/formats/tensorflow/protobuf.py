"""Protocol Buffers' wire format, decoded by hand: the one reader of TensorFlow's protobufs (a checkpoint's
``BundleHeaderProto`` and ``BundleEntryProto``, a ``saved_model.pb``), so no generated code and no protobuf package
are needed.

A message is a run of fields, each a key (a varint: field number << 3 | wire type) and a value: a varint (wire type
0), 8 little-endian bytes (1), a varint length and that many bytes (2: strings, nested messages, packed repeated
fields), or 4 little-endian bytes (5). Groups (3, 4) are not used by any message read here. A varint is 7 bits a
byte, least significant first, the high bit set on every byte but the last (at most 10 bytes for 64 bits); the
tensor bundle's sorted table uses the same varints for its lengths and block handles.

A malformed message is a :class:`MalformedMessage` saying what is wrong and where in the message; the reader that
decodes names its file in the one line (:func:`decoding`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from elmo.errors import WeightFileError

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5
"""The wire types a message read here may hold."""


class MalformedMessage(WeightFileError):
    """Bytes that are not a well-formed message (or varint); the text says what, not which file."""


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at byte ``pos`` -> (value, position after it)."""
    start, result, shift = pos, 0, 0
    while True:
        if pos >= len(data):
            raise MalformedMessage(f"truncated varint at byte {start}")
        if shift > 63:
            raise MalformedMessage(f"varint longer than 64 bits at byte {start}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes | memoryview, kinds: Mapping[int, type] | None = None
           ) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of one message: an int for varints and fixed fields, bytes
    for length-delimited ones. ``kinds``: fields the caller reads (number -> int or bytes), each held to its kind, so
    that a field of another wire type is malformed, not a value of the wrong Python type further on."""
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, pos = read_varint(data, pos)
        elif wire == BYTES:
            size, pos = read_varint(data, pos)
            if pos + size > len(data):
                raise MalformedMessage(f"field {number} runs past the end of its message")
            value, pos = bytes(data[pos : pos + size]), pos + size
        elif wire in (FIXED32, FIXED64):
            size = 4 if wire == FIXED32 else 8
            if pos + size > len(data):
                raise MalformedMessage("message ends inside a field")
            value, pos = int.from_bytes(data[pos : pos + size], "little"), pos + size
        else:
            raise MalformedMessage(f"unsupported wire type {wire} (field {number})")
        if kinds is not None and number in kinds and not isinstance(value, kinds[number]):
            raise MalformedMessage(f"malformed protobuf message (field {number} has the wrong wire type)")
        yield number, wire, value


def messages(data: bytes, number: int) -> Iterator[bytes]:
    """The length-delimited values of field ``number`` (the nested messages of a repeated message field)."""
    for n, wire, value in fields(data):
        if n == number and wire == BYTES:
            yield value  # type: ignore[misc]


def packed_varints(data: bytes) -> Iterator[int]:
    """The values of a packed repeated varint field (one length-delimited value holding the varints)."""
    pos = 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        yield value


@contextmanager
def decoding(where: str) -> Iterator[None]:
    """A malformed message met inside becomes one line naming ``where`` (the file, and the tensor or block)."""
    try:
        yield
    except MalformedMessage as e:
        raise WeightFileError(f"{where}: {e}") from None
