"""The one protobuf wire-format decoder of the TensorFlow readers: what it reads, and every malformed message as one
line naming the file."""

from __future__ import annotations

import struct

import pytest

from elmo.errors import WeightFileError
from elmo.formats.tensorflow.protobuf import (
    BYTES,
    FIXED32,
    FIXED64,
    VARINT,
    decoding,
    fields,
    messages,
    packed_varints,
    read_varint,
)
from tests.formats.tf_bundle_files import field_bytes, field_fixed32, field_varint, varint


def test_each_wire_type_is_read_as_written():
    nested = field_varint(1, 7)
    message = (field_varint(1, 2**63 + 5) + field_bytes(2, nested) + field_fixed32(3, 0xDEADBEEF)
               + varint(4 << 3 | FIXED64) + struct.pack("<Q", 2**64 - 2) + field_bytes(2, b""))
    assert list(fields(message)) == [(1, VARINT, 2**63 + 5), (2, BYTES, nested), (3, FIXED32, 0xDEADBEEF),
                                     (4, FIXED64, 2**64 - 2), (2, BYTES, b"")]
    assert list(messages(message, 2)) == [nested, b""]
    assert list(packed_varints(varint(300) + varint(0) + varint(2**40))) == [300, 0, 2**40]
    assert read_varint(b"\x00" + varint(2**64 - 1), 1) == (2**64 - 1, 11)


@pytest.mark.parametrize(("data", "problem"), [
    (b"\x80", "truncated varint at byte 0"),
    (field_varint(1, 1) + b"\x08", "truncated varint at byte 3"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "varint longer than 64 bits at byte 1"),
    (varint(2 << 3 | BYTES) + varint(5) + b"abc", "field 2 runs past the end of its message"),
    (varint(3 << 3 | FIXED32) + b"\x01\x02", "message ends inside a field"),
    (varint(4 << 3 | FIXED64) + b"\x01" * 7, "message ends inside a field"),
    (varint(1 << 3 | 3), "unsupported wire type 3 (field 1)"),
])
def test_a_malformed_message_is_one_line_naming_where(data, problem):
    with pytest.raises(WeightFileError) as raised, decoding("model.ckpt-1.index: tensor 'w'"):
        list(fields(data))
    assert str(raised.value) == f"model.ckpt-1.index: tensor 'w': {problem}"


def test_a_field_of_another_wire_type_than_its_reader_expects_is_malformed():
    shape_as_a_number = field_varint(2, 7)  # TensorShapeProto where BundleEntryProto has a message
    assert list(fields(shape_as_a_number)) == [(2, VARINT, 7)]
    with pytest.raises(WeightFileError, match="field 2 has the wrong wire type"):
        list(fields(shape_as_a_number, {2: bytes}))
