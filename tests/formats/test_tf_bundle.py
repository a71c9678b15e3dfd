"""TensorFlow's tensor bundle read without TensorFlow: every tensor bit-identical to ``tf.train.load_checkpoint``'s,
for every dtype TF saves, sliced variables and several shards; damaged files are one line naming file and tensor."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

from elmo.errors import WeightFileError
from elmo.formats.tensorflow.crc32c import _update_bytes, crc32c, mask, unmask
from elmo.formats.tensorflow.tf_bundle import TensorBundle
from tests.formats.bilm_tf_files import save_v2, tensorflow


def _values() -> dict[str, np.ndarray]:
    tf = tensorflow()
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal((7,)).astype(np.float16),
        "bf16": tf.constant(rng.standard_normal((4, 6)), dtype=tf.bfloat16).numpy(),
        "f64": rng.standard_normal((2, 2)),
        "i64": np.arange(-5, 5, dtype=np.int64),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "u8": np.arange(9, dtype=np.uint8),
        "flags": np.array([True, False, True]),
        "scalar": np.float32(3.5),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "words": np.array([b"<S>", b"", b"caf\xc3\xa9" * 50], dtype=object),
        "scope/with/slashes": rng.standard_normal((40, 30)).astype(np.float32),
    }


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Prefixes of real checkpoints: SaveV2, a 3-shard merged one, and TF2's own with a size-capped sharding
    policy (which splits big variables into slices across 5 shards)."""
    tf = tensorflow()
    root = tmp_path_factory.mktemp("bundles")
    values = _values()
    save_v2(root / "plain", values)
    save_v2(root / "merged", values, shards=3)
    variables = {"big": tf.Variable(np.random.default_rng(1).standard_normal((300, 400)).astype(np.float32)),
                 "bf": tf.Variable(tf.constant(np.ones((50, 3)), dtype=tf.bfloat16)),
                 "step": tf.Variable(np.int64(42))}
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=100_000)
    sliced = tf.train.Checkpoint(**variables).write(
        str(root / "sliced" / "ckpt"), options=tf.train.CheckpointOptions(experimental_sharding_callback=policy))
    return {"plain": str(root / "plain"), "merged": str(root / "merged"), "sliced": sliced}


def _same_bits(ours: np.ndarray, theirs) -> bool:
    if isinstance(theirs, bytes):  # a scalar string
        return ours.shape == () and ours.item() == theirs
    theirs = np.asarray(theirs)
    if theirs.dtype == object:
        return ours.shape == theirs.shape and ours.reshape(-1).tolist() == theirs.reshape(-1).tolist()
    if theirs.dtype.name == "bfloat16":  # ours is widened to float32: its upper 16 bits are the stored ones
        return ours.dtype == np.float32 and np.array_equal((ours.view(np.uint32) >> 16).astype(np.uint16),
                                                           theirs.view(np.uint16))
    return ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("kind", ["plain", "merged", "sliced"])
def test_every_tensor_is_bit_identical_to_tensorflows(checkpoints, kind):
    tf = tensorflow()
    reader = tf.train.load_checkpoint(checkpoints[kind])
    bundle = TensorBundle(checkpoints[kind])
    assert bundle.names() == sorted(reader.get_variable_to_shape_map())
    for name in bundle.names():
        theirs = reader.get_tensor(name)
        ours = bundle.read(name)
        assert _same_bits(ours, theirs), name
        assert bundle.shape(name) == tuple(np.shape(theirs)), name
        assert bundle.dtype(name) == ours.dtype, name
    if kind != "plain":
        assert bundle.num_shards > 1


def test_dtypes_are_reported_as_stored(checkpoints):
    bundle = TensorBundle(checkpoints["plain"])
    stored = {name: bundle.stored_dtype(name) for name in bundle.names()}
    assert stored["bf16"] == "bfloat16" and bundle.dtype("bf16") == np.float32
    assert stored["f16"] == "float16" and stored["i64"] == "int64" and stored["words"] == "string"


def test_the_prefix_may_be_given_as_its_index_or_a_shard(checkpoints):
    prefix = checkpoints["merged"]
    for spelling in (prefix + ".index", prefix + ".data-00001-of-00003"):
        assert TensorBundle(spelling).names() == TensorBundle(prefix).names()


def _copy(prefix: str, tmp_path):
    from pathlib import Path

    source = Path(prefix)
    for path in source.parent.glob(source.name + ".*"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / source.name


def test_a_truncated_shard_is_one_line_naming_file_and_tensor(checkpoints, tmp_path):
    prefix = _copy(checkpoints["plain"], tmp_path)
    shard = tmp_path / "plain.data-00000-of-00001"
    bundle = TensorBundle(prefix)
    last = max(bundle.names(), key=lambda n: bundle.entry(n).offset + bundle.entry(n).size)
    shard.write_bytes(shard.read_bytes()[: bundle.entry(last).offset + bundle.entry(last).size - 1])
    with pytest.raises(WeightFileError) as error:
        bundle.read(last)
    message = str(error.value)
    assert "\n" not in message and str(shard) in message and f"'{last}'" in message and "truncated" in message


def test_a_flipped_byte_is_a_crc_mismatch(checkpoints, tmp_path):
    prefix = _copy(checkpoints["plain"], tmp_path)
    bundle = TensorBundle(prefix)
    shard = tmp_path / "plain.data-00000-of-00001"
    data = bytearray(shard.read_bytes())
    data[bundle.entry("scope/with/slashes").offset + 17] ^= 0x10
    shard.write_bytes(bytes(data))
    assert np.array_equal(bundle.read("f32"), TensorBundle(checkpoints["plain"]).read("f32"))  # others still read
    with pytest.raises(WeightFileError, match=r"CRC32C mismatch in tensor 'scope/with/slashes'") as error:
        bundle.read("scope/with/slashes")
    assert str(shard) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("kind", ["plain", "sliced"])
def test_row_blocks_are_the_tensors_rows(checkpoints, kind):
    bundle = TensorBundle(checkpoints[kind])
    checked = 0
    for name in bundle.names():
        shape = bundle.shape(name)
        if len(shape) < 2 or shape[0] < 3 or bundle.stored_dtype(name) == "string":
            continue
        checked += 1
        whole = bundle.read(name)
        blocks = list(bundle.read_row_blocks(name, [0, 1, shape[0] - 1]))
        assert [len(b) for b in blocks] == [1, shape[0] - 2, 1], name
        assert np.concatenate(blocks).tobytes() == whole.tobytes(), name
    assert checked >= 2


def test_a_flipped_byte_in_a_later_row_block_is_a_crc_mismatch(checkpoints, tmp_path):
    prefix = _copy(checkpoints["plain"], tmp_path)
    bundle = TensorBundle(prefix)
    name = max((n for n in bundle.names() if len(bundle.shape(n)) == 2 and bundle.stored_dtype(n) == "float32"),
               key=lambda n: bundle.shape(n)[0])
    shard = tmp_path / "plain.data-00000-of-00001"
    data = bytearray(shard.read_bytes())
    entry = bundle.entry(name)
    data[entry.offset + entry.size - 2] ^= 0x01  # in the last row
    shard.write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=f"CRC32C mismatch in tensor '{name}'"):
        list(bundle.read_row_blocks(name, [0, 1]))


def test_a_damaged_index_block_is_refused(checkpoints, tmp_path):
    prefix = _copy(checkpoints["plain"], tmp_path)
    index = tmp_path / "plain.index"
    data = bytearray(index.read_bytes())
    data[10] ^= 0x01
    index.write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"plain\.index: CRC32C mismatch in the block at byte 0"):
        TensorBundle(prefix)


def test_missing_tensors_and_files_are_one_line(checkpoints, tmp_path):
    bundle = TensorBundle(checkpoints["plain"])
    with pytest.raises(WeightFileError, match=r"plain\.index: no tensor 'lm/softmax/W' in this checkpoint"):
        bundle.read("lm/softmax/W")
    with pytest.raises(WeightFileError, match="no such checkpoint index"):
        TensorBundle(tmp_path / "nothing")
    (tmp_path / "fake.index").write_bytes(b"not a table at all, clearly" * 3)
    with pytest.raises(WeightFileError, match=r"fake\.index: not a TensorFlow checkpoint index"):
        TensorBundle(tmp_path / "fake")
    prefix = _copy(checkpoints["merged"], tmp_path)
    (tmp_path / "merged.data-00002-of-00003").unlink()
    merged = TensorBundle(prefix)
    lost = next(n for n in merged.names() if merged.entry(n).shard == 2)
    with pytest.raises(WeightFileError, match=rf"merged\.data-00002-of-00003: cannot read tensor '{lost}'"):
        merged.read(lost)


def test_crc32c_matches_the_reference_values_and_the_plain_loop():
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
    assert crc32c(b"") == 0
    assert unmask(mask(0xE3069283)) == 0xE3069283
    rng = np.random.default_rng(0)
    for n in (1, 3, 32767, 32768, 40_001, 300_007):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        expected = _update_bytes(0xFFFFFFFF, data) ^ 0xFFFFFFFF
        assert crc32c(data) == expected, n
        assert crc32c(data[n // 3 :], crc32c(data[: n // 3])) == expected, n


def test_crc32c_is_fast_enough_for_weights():
    data = np.random.default_rng(0).standard_normal(4_000_000, dtype=np.float32)  # 16 MB
    start = time.perf_counter()
    crc32c(data)
    assert 16 / (time.perf_counter() - start) > 40  # MB/s; ~330 MB/s measured on an idle core
