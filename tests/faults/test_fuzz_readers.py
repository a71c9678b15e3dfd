"""Every reader raises only the project's errors: valid files of every format the project reads, mutated, read
through the public loaders, either load or raise an :class:`~elmo.errors.ElmoError` of the reader's own, one line
naming the file; never another exception, never the boundary's safety net (:func:`elmo.errors.reading`, whose
:class:`~elmo.errors.UnexpectedFileError` means a check is missing), never a hang.

The seeds are built once per module with the suite's own writers (``save_bilm``, ``save_hf_folder``, the tensor
bundles of ``tests/formats/tf_bundle_files.py`` and ``bilm_tf_files.py``, ``manylangs_files.py``), then each example
copies one and mutates it: bytes (flips, hostile bytes, truncation, insertion, deletion, repetition) and, where it is
cheap, structure (a JSON value swapped for a 5,000-digit integer, 100,000 levels of nesting, NaN, a string, ...; an
HDF5 dataset's shape, dtype, storage or kind changed; a zip member renamed, dropped or rewritten; a tensor-bundle
entry declaring another offset, size, shape or dtype; an index block changed with its CRC made to fit; a graph
attribute replaced).

CI runs :data:`EXAMPLES` examples per format, the same ones every run (``derandomize``); ``make fuzz`` runs
``ELMO_FUZZ_EXAMPLES=2000`` and draws new ones each run. A failure prints the example; each leak found is fixed at
its source and kept as a regression test at the end of this module.
"""

from __future__ import annotations

import faulthandler
import gzip
import io
import json
import logging
import os
import shutil
import signal
import struct
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elmo.embedding.embed_options import OutputOptions
from elmo.embedding.embedder import Embedder
from elmo.embedding.engines.local import LocalEngine
from elmo.embedding.file_job import EmbedFileJob
from elmo.errors import ElmoError, UnexpectedFileError
from elmo.formats.archives import open_archive, read_meta
from elmo.formats.hf_folders import save_hf_folder
from elmo.formats.model_files import load_bilm, read_model_config, save_bilm
from elmo.formats.tensorflow.bilm_tf_checkpoint import read_bilm_tf_training_state
from elmo.formats.tensorflow.crc32c import crc32c, mask
from elmo.formats.warm_state import model_warm_state
from elmo.text.sentences import read_sentences
from tests.conftest import random_bilm, tiny_config
from tests.formats.bilm_tf_files import write_bundle_dir
from tests.formats.manylangs_files import write_manylangs_model
from tests.formats.tf_bundle_files import _MAGIC as TABLE_MAGIC
from tests.formats.tf_bundle_files import (
    Bundle,
    _block,
    _with_trailer,
    field_bytes,
    field_fixed32,
    field_varint,
    varint,
    write_hub_module,
    write_index,
)

EXAMPLES = int(os.environ.get("ELMO_FUZZ_EXAMPLES", "40"))
"""Examples per format: 40 in CI; ``make fuzz`` sets 2000."""
EXPLORING = "ELMO_FUZZ_EXAMPLES" in os.environ
HANG_SECONDS = 60
"""One read of a tiny file takes well under a second; one past this is a hang."""

FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=not EXPLORING, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                           HealthCheck.function_scoped_fixture],
)


# ------------------------------------------------------------------ what every example must end in


class Hang(Exception):
    pass


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """A read that runs past ``seconds`` raises :class:`Hang`; one stuck inside C (where no Python signal handler
    runs: a loop of libhdf5's) ends the process at twice that, with every thread's stack, instead of hanging CI."""

    def expired(signum, frame):
        raise Hang(f"the read ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(2 * seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_read(read: Callable[[], object], where: Path) -> None:
    """``read()`` succeeds, or raises an ElmoError of the reader's own: one line that names a file under
    ``where`` (the example's folder or archive)."""
    try:
        with watchdog(HANG_SECONDS):
            read()
    except UnexpectedFileError as e:  # the safety net caught what no check of the reader names
        raise AssertionError(f"a reader let {type(e.__cause__).__name__} through: {e}") from e
    except ElmoError as e:
        message = str(e)
        assert "\n" not in message, f"not one line: {message!r}"
        assert str(where) in message, f"the error does not name the file ({where}): {message}"


# ------------------------------------------------------------------ mutations


HOSTILE_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, ord('"'), ord("\\"), ord("["), ord("{"), ord("\n"), ord("\t"),
                 ord(">"), ord("#"), ord("-"), ord("9"))


@st.composite
def mutated_bytes(draw, data: bytes, max_ops: int = 3) -> bytes:
    """``data`` after 1..max_ops byte mutations."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(("flip", "set", "truncate", "insert", "delete", "repeat")))
        if op == "truncate" or not out:
            out = out[: draw(st.integers(0, max(len(out) - 1, 0)))] if out else bytearray(draw(st.binary(max_size=8)))
            continue
        at = draw(st.integers(0, len(out) - 1))
        if op == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            out[at] = draw(st.sampled_from(HOSTILE_BYTES))
        elif op == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del out[at : at + draw(st.integers(1, 64))]
        else:
            piece = out[at : at + draw(st.integers(1, 32))]
            out[at:at] = piece * draw(st.integers(1, 8))
    return bytes(out)


PAST_PYTHONS_LIMITS = (
    "1" * 5000,  # past Python's 4,300-digit limit of int()
    "[" * 100_000 + "]" * 100_000,  # past the parser's recursion limit
    '{"a": ' * 3000 + "1" + "}" * 3000,
)
HOSTILE_JSON = (
    *PAST_PYTHONS_LIMITS, "NaN", "Infinity", "-Infinity", "-3", "0", "1.5", "1e400", "-1", "4000000000",
    "18446744073709551616",
    '"12"', '"x"', '"\\ud800"', "true", "false", "null", "[]", "{}", "[1, 2]", '[[1, "a"]]', '{"x": 1}',
)
JSON_VALUES = st.one_of(st.sampled_from(PAST_PYTHONS_LIMITS), st.sampled_from(HOSTILE_JSON),
                        st.builds(json.dumps, st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=6),
                                                        st.lists(st.integers(-5, 300), max_size=4))))
_MARK = "\x00fuzz-mark\x00"


def _json_paths(value, path=()) -> Iterator[tuple]:
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _json_paths(child, (*path, key))


@st.composite
def mutated_json(draw, document) -> bytes:
    """``document`` with one value replaced by hostile JSON text, a key dropped or an unknown key added."""
    path = draw(st.sampled_from(list(_json_paths(document))))
    op = draw(st.sampled_from(("replace", "replace", "drop", "add")))
    doc = json.loads(json.dumps(document))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if not path:
        return draw(JSON_VALUES).encode()
    if op == "drop":
        del parent[path[-1]]
    elif op == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(("junk", "format", "options", "lstm", "dim")))] = _MARK
    else:
        parent[path[-1]] = _MARK
    return json.dumps(doc).replace(json.dumps(_MARK), draw(JSON_VALUES)).encode()


def json_or_bytes(data: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(mutated_json(json.loads(data)), mutated_bytes(data))


# ------------------------------------------------------------------ HDF5 structure


def hdf5_datasets(path: Path) -> list[str]:
    names: list[str] = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(names)


HDF5_CHANGES = ("shape", "dtype", "scalar", "group", "nan", "gzip", "unwritten", "delete", "extra", "external",
                "string")


@st.composite
def hdf5_change(draw, names: list[str]) -> tuple[str, str, int]:
    return draw(st.sampled_from(names)), draw(st.sampled_from(HDF5_CHANGES)), draw(st.integers(0, 7))


def apply_hdf5_change(path: Path, change: tuple[str, str, int]) -> None:
    """Rewrite one dataset of ``path`` in place: another shape, dtype or storage, a group in its place, gone..."""
    name, how, k = change
    with h5py.File(path, "r+") as f:
        data = f[name][()]
        array = np.asarray(data)
        if how == "nan":
            if array.dtype.kind == "f" and array.size:
                f[name][tuple(0 for _ in array.shape)] = np.nan
            return
        if how == "extra":
            f.create_dataset(f"junk{k}", data=np.zeros((k + 1, 2), np.float32))
            return
        del f[name]
        if how == "delete":
            return
        if how == "group":
            f.create_group(name)
        elif how == "shape":
            shapes = [array.reshape(-1), array[..., None], array[:-1] if array.ndim else array,
                      np.concatenate([array, array[:1]]) if array.ndim else array[None], np.zeros((0,), array.dtype),
                      array.T, np.zeros((2,) * (k % 4), array.dtype), np.zeros((1, 0, 3), array.dtype)]
            f.create_dataset(name, data=shapes[k])
        elif how == "dtype":
            dtypes = [np.int32, np.float16, np.float64, np.bool_, np.complex64, np.uint8, np.int64,
                      np.dtype([("a", np.float32), ("b", np.int8)])]
            target = np.dtype(dtypes[k])
            numbers = array.dtype.kind in "biuf" and not target.fields
            f.create_dataset(name, data=array.astype(target) if numbers else np.zeros(array.shape, target))
        elif how == "scalar":
            f.create_dataset(name, data=np.float32(1.5) if k % 2 else b"text")
        elif how == "gzip":
            if array.ndim and array.size:
                f.create_dataset(name, data=array, compression="gzip", chunks=True)
            else:
                f.create_dataset(name, data=array)
        elif how == "unwritten":  # storage never written: HDF5 reads it back as its fill value
            f.create_dataset(name, shape=array.shape, dtype=array.dtype)
        elif how == "external":
            f.create_dataset(name, shape=array.shape, dtype=array.dtype if array.dtype.kind != "O" else "f4",
                             external=[(f"missing-{k}.raw", 0, h5py.h5f.UNLIMITED)])
        else:  # string
            f.create_dataset(name, data=[HOSTILE_JSON[k % len(HOSTILE_JSON)][:200]] * 2, dtype=h5py.string_dtype())


# ------------------------------------------------------------------ tensor bundles


def _footer_blocks(index: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the data, index and metaindex blocks of a table that ``write_index`` wrote."""
    footer, handles, pos = index[-48:-8], [], 0
    for _ in range(4):
        value = shift = 0
        while True:
            byte = footer[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        handles.append(value)
    meta_at, meta_size, index_at, index_size = handles
    return [(0, index_at - 5), (index_at, index_size), (meta_at, meta_size)]


@st.composite
def mutated_index(draw, index: bytes) -> bytes:
    """A block of the index changed, its CRC32C made to fit (so the change reaches the decoders): bytes of its
    contents, or its compression type set to another (1: LevelDB's Snappy, which TensorFlow does not write for
    bundles; or one nobody defined)."""
    offset, size = draw(st.sampled_from(_footer_blocks(index)))
    out = bytearray(index)
    if draw(st.booleans()):
        out[offset + size] = draw(st.integers(1, 255))
    else:
        contents = draw(mutated_bytes(bytes(out[offset : offset + size]), max_ops=2))
        contents = contents[:size].ljust(size, b"\0")  # the handle's size stays
        out[offset : offset + size] = contents
    out[offset + size + 1 : offset + size + 5] = struct.pack("<I", mask(crc32c(bytes(out[offset : offset + size + 1]))))
    return bytes(out)


def _rebuilt_index(block: bytes, compression: int) -> bytes:
    """A table whose one data block is ``block`` (stored with this compression type), as ``write_index`` lays it."""
    data = block + bytes([compression]) + struct.pack("<I", mask(crc32c(block + bytes([compression]))))
    index = _with_trailer(_block([(b"\xff", varint(0) + varint(len(block)))]))
    meta = _with_trailer(_block([]))
    handles = varint(len(data) + len(index)) + varint(len(meta) - 5) + varint(len(data)) + varint(len(index) - 5)
    return data + index + meta + handles.ljust(40, b"\0") + struct.pack("<Q", TABLE_MAGIC)


ENTRY_FIELDS = st.one_of(
    st.tuples(st.just("offset"), st.sampled_from((2**63, 2**63 + 8, 2**64 - 1, 2**31, 1, 7))),
    st.tuples(st.just("size"), st.sampled_from((0, 1, 3, 2**63, 2**64 - 1))),
    st.tuples(st.just("dtype"), st.sampled_from((0, 2, 3, 7, 10, 14, 19, 20, 99, 2**63))),
    st.tuples(st.just("shard"), st.sampled_from((1, 5, 2**63))),
    st.tuples(st.just("crc"), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("shape"), st.lists(st.sampled_from((0, 1, 2, 5, 2**31, 2**62, 2**63, 2**64 - 1)), max_size=5)
              .map(tuple)),
)
"""What a bundle entry may declare instead of the truth (``Bundle(declare=...)``)."""

HOSTILE_ARRAYS = (np.float32(np.nan), np.float32(np.inf), np.float32(-np.inf), np.zeros(0, np.float32),
                  np.zeros((2, 2), np.float32), np.float32(1e30), np.float32(-5), np.int64(2**62), np.int32(7),
                  np.float64(1e300))


@st.composite
def bundle_change(draw, names: list[str]) -> tuple[str, str, object]:
    """One tensor's entry declaring something else, or its value replaced (NaN, empty, another dtype...)."""
    name = draw(st.sampled_from(names))
    if draw(st.booleans()):
        field, value = draw(ENTRY_FIELDS)
        return name, field, value
    return name, "value", draw(st.sampled_from(HOSTILE_ARRAYS))


def write_changed_bundle(prefix: Path, tensors: dict[str, np.ndarray], change: tuple[str, str, object]) -> None:
    name, field, value = change
    if field == "value":
        Bundle(tensors=tensors | {name: np.asarray(value)}).write(prefix)
    else:
        Bundle(tensors=tensors, declare={name: {field: value}}).write(prefix)


# ------------------------------------------------------------------ a TF-Hub graph with attributes


def _attr_ints(values: list[int]) -> bytes:
    return field_bytes(1, field_bytes(3, b"".join(varint(v) for v in values)))  # AttrValue.list.i, packed


def _attr_type(dtype: int) -> bytes:
    return field_varint(6, dtype)


def _attr_float(value: float) -> bytes:
    return field_bytes(8, field_varint(1, 1) + field_fixed32(5, struct.unpack("<I", struct.pack("<f", value))[0]))


def hub_graph_nodes(config) -> list[tuple[str, str, list[str], dict[str, bytes]]]:
    """(name, op, inputs, attrs) of a graph that shows what bilm-tf's builder leaves: each convolution's MaxPool
    and activation, both layers' cells with their clips and projection, the residual Add."""
    cnn, lstm = config.char_cnn, config.lstm
    nodes = []
    for i, (width, _) in enumerate(cnn.filters):
        pool = f"bilm/CNN/MaxPool_{i}"
        nodes.append((pool, "MaxPool", [f"bilm/CNN/add_{i}"],
                      {"ksize": _attr_ints([1, 1, cnn.max_characters_per_token - width + 1, 1]), "T": _attr_type(1)}))
        nodes.append((f"bilm/CNN/Relu_{i}", "Relu", [pool], {"T": _attr_type(1)}))
    for layer in range(lstm.n_layers):
        scope = f"bilm/RNN_0/RNN/MultiRNNCell/Cell{layer}/rnn/"
        cell = scope + "lstm_cell/"
        nodes += [
            (cell + "kernel", "VariableV2", [], {}), (cell + "kernel/read", "Identity", [cell + "kernel"], {}),
            (cell + "MatMul", "MatMul", [scope + "concat", cell + "kernel/read"], {"T": _attr_type(1)}),
            (cell + "Sigmoid", "Sigmoid", [cell + "split"], {"T": _attr_type(1)}),
            (cell + "Tanh", "Tanh", [cell + "add"], {"T": _attr_type(1)}),
            (cell + "clip_by_value/Minimum/y", "Const", [], {"value": _attr_float(lstm.cell_clip)}),
            (cell + "clip_by_value/Minimum", "Minimum", [cell + "add_1", cell + "clip_by_value/Minimum/y"], {}),
            (cell + "projection/kernel", "VariableV2", [], {}),
            (cell + "MatMul_1", "MatMul", [cell + "mul", cell + "projection/kernel"], {"T": _attr_type(1)}),
            (cell + "clip_by_value_1/Minimum/y", "Const", [], {"value": _attr_float(lstm.proj_clip)}),
            (cell + "clip_by_value_1/Minimum", "Minimum", [cell + "MatMul_1", cell + "clip_by_value_1/Minimum/y"], {}),
        ]
        if layer > 0 and lstm.use_skip_connections:
            nodes.append((scope + "add", "Add", [cell + "clip_by_value_1/Minimum", scope + "input"],
                          {"T": _attr_type(1)}))
    return nodes


def saved_model_bytes(nodes) -> bytes:
    def node(name, op, inputs, attrs):
        return (field_bytes(1, name.encode()) + field_bytes(2, op.encode())
                + b"".join(field_bytes(3, i.encode()) for i in inputs)
                + b"".join(field_bytes(5, field_bytes(1, k.encode()) + field_bytes(2, v)) for k, v in attrs.items()))

    graph = b"".join(field_bytes(1, node(*n)) for n in nodes)
    return field_varint(1, 1) + field_bytes(2, field_bytes(2, graph))


@st.composite
def mutated_graph(draw, nodes) -> bytes:
    """One node's attribute replaced by other bytes (a malformed AttrValue, say), or the whole file's bytes mutated."""
    with_attrs = [i for i, n in enumerate(nodes) if n[3]]
    if draw(st.booleans()):
        i = draw(st.sampled_from(with_attrs))
        name, op, inputs, attrs = nodes[i]
        key = draw(st.sampled_from(sorted(attrs)))
        value = draw(st.one_of(mutated_bytes(attrs[key]), st.binary(max_size=24)))
        changed = [*nodes[:i], (name, op, inputs, attrs | {key: value}), *nodes[i + 1:]]
        return saved_model_bytes(changed)
    return draw(mutated_bytes(saved_model_bytes(nodes)))


# ------------------------------------------------------------------ archives


@st.composite
def mutated_zip(draw, members: dict[str, bytes], inner: dict[str, Callable]) -> bytes:
    """A zip of ``members`` with one member renamed, dropped, added twice or rewritten (``inner``: a strategy for a
    member's new bytes), stored or deflated; or the whole zip's bytes mutated."""
    members = dict(members)
    op = draw(st.sampled_from(("rename", "drop", "twice", "rewrite", "rewrite", "bytes")))
    name = draw(st.sampled_from(sorted(members)))
    if op == "rename":
        folder, _, base = name.rpartition("/")
        new = draw(st.sampled_from((f"x/{name}", f"a/b/{base}", base + ".bak", "__MACOSX/" + base, "../" + base,
                                    "/abs/" + base, base.upper(), "model.hdf5", "weights.hdf5", "other.hdf5",
                                    "options.json", "config.json", "meta.json", "")))
        members[new or "unnamed"] = members.pop(name)
    elif op == "drop":
        del members[name]
    elif op == "twice":
        members["copy/" + name.rpartition("/")[2]] = members[name]
    elif op in ("rewrite", "bytes"):
        strategy = inner.get(name.rpartition("/")[2]) or mutated_bytes
        members[name] = draw(strategy(members[name]))
    buffer = io.BytesIO()
    method = draw(st.sampled_from((zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)))
    with zipfile.ZipFile(buffer, "w", method) as z:
        for member, data in members.items():
            z.writestr(member, data)
    data = buffer.getvalue()
    return draw(mutated_bytes(data)) if op == "bytes" and draw(st.booleans()) else data


def tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue(), mtime=0)


def folder_members(directory: Path, prefix: str = "") -> dict[str, bytes]:
    return {prefix + p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ the seeds


class Seeds:
    """Valid files of every format, built once; each example copies what it mutates into a folder of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        bilm = random_bilm(tiny_config())
        self.bilm = bilm
        self.original = save_bilm(bilm, root / "original")  # options.json + weights.hdf5
        warm = random_bilm(tiny_config(), seed=1)
        warm.warm_state = model_warm_state(warm)
        self.native = save_hf_folder(warm, root / "native")  # config.json, model.safetensors, warm state, card
        self.bilm_tf = root / "bilm-tf"
        self.bilm_tf_tensors = write_bundle_dir(self.bilm_tf, bilm, softmax_rows=6)
        self.hub = write_hub_module(root / "hub", bilm)
        self.hub_nodes = hub_graph_nodes(bilm.config)
        (self.hub / "saved_model.pb").write_bytes(saved_model_bytes(self.hub_nodes))
        self.hub_tensors = _bundle_tensors(self.hub / "variables" / "variables")
        self.manylangs = write_manylangs_model(root / "manylangs", dim=8, projection_dim=4, n_highway=1, word_dim=3,
                                               char_dim=2)
        meta = {"id": 195, "corpus": [{"description": "Wikipedia", "language": "rus", "lemmatized": False,
                                       "tokens": 1000}], "algorithm": {"name": "ELMo"}}
        self.nlpl_members = {"195/options.json": (self.original / "options.json").read_bytes(),
                             "195/model.hdf5": (self.original / "weights.hdf5").read_bytes(),
                             "195/meta.json": json.dumps(meta).encode(), "195/vocab.txt": b"<S>\n</S>\n<UNK>\nthe\n"}
        self.manylangs_members = folder_members(self.manylangs, "144/")
        self.resume = Resume(root / "resume", bilm)


def _bundle_tensors(prefix: Path) -> dict[str, np.ndarray]:
    from elmo.formats.tensorflow.tf_bundle import TensorBundle

    bundle = TensorBundle(prefix)
    return {name: bundle.read(name) for name in bundle.names()}


class _Stop(Exception):
    pass


class Resume:
    """An ``elmo embed`` job of 7 lines in chunks of 2, stopped after its parts were written (``parts``), and the
    same job finished (``finished``): what ``--resume`` reads."""

    def __init__(self, root: Path, bilm) -> None:
        root.mkdir()
        self.embedder = Embedder(bilm, chunk_size=2, batch_size=4)
        self.input = root / "input.txt"
        self.input.write_text("the cat sat\non the mat\n\na b c d e\nx\nyes no\nlast line\n", encoding="utf-8")

        class StopAfterAllParts(LocalEngine):
            def run(self, *args):
                yield from super().run(*args)
                raise _Stop

        with pytest.raises(_Stop):
            EmbedFileJob(StopAfterAllParts(self.embedder)).run(self.input, root / "stopped" / "out.hdf5")
        self.parts = root / "stopped" / "out.hdf5.parts"
        EmbedFileJob(self.embedder).run(self.input, root / "finished" / "out.hdf5")
        self.finished = root / "finished" / "out.hdf5"

    def run(self, output: Path) -> None:
        EmbedFileJob(self.embedder, OutputOptions(), resume=True).run(self.input, output)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Seeds:
    return Seeds(tmp_path_factory.mktemp("fuzz-seeds"))


@contextmanager
def example_dir(seeds: Seeds) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="example-", dir=seeds.root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def copy_folder(source: Path, target: Path) -> Path:
    return Path(shutil.copytree(source, target))


def read_model(path: Path) -> None:
    """What ``--model PATH`` does first (the architecture), then ``load_bilm``."""
    read_model_config(path)
    load_bilm(path)


# ------------------------------------------------------------------ model formats


def json_target(seeds: Seeds) -> dict[str, Path]:
    """Every JSON file a model format reads, by the folder it sits in."""
    return {"original/options.json": seeds.original / "options.json",
            "native/config.json": seeds.native / "config.json",
            "bilm-tf/options.json": seeds.bilm_tf / "options.json",
            "manylangs/config.json": seeds.manylangs / "config.json",
            "manylangs/cnn_50_100_512_4096_sample.json": seeds.manylangs / "cnn_50_100_512_4096_sample.json"}


@FUZZ
@given(data=st.data())
def test_options_and_config_json(seeds, data):
    """options.json (original, bilm-tf), config.json (native, ELMoForManyLangs), ELMoForManyLangs' model config:
    a value swapped for a 5,000-digit number, deep nesting, NaN, a string, ...; a key dropped or added; bytes."""
    key = data.draw(st.sampled_from(sorted(json_target(seeds))))
    source = json_target(seeds)[key]
    with example_dir(seeds) as root:
        model = copy_folder(source.parent, root / "model")
        (model / source.name).write_bytes(data.draw(json_or_bytes(source.read_bytes())))
        check_read(lambda: read_model(model), model)


@FUZZ
@given(data=st.data())
def test_hdf5_weights(seeds, data):
    """weights.hdf5: its bytes, or a dataset's shape, dtype, storage or kind changed."""
    weights = seeds.original / "weights.hdf5"
    structure = data.draw(st.booleans())
    change = data.draw(hdf5_change(hdf5_datasets(weights)) if structure else mutated_bytes(weights.read_bytes()))
    with example_dir(seeds) as root:
        model = copy_folder(seeds.original, root / "model")
        if structure:
            apply_hdf5_change(model / "weights.hdf5", change)
        else:
            (model / "weights.hdf5").write_bytes(change)
        check_read(lambda: read_model(model), model)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_safetensors(seeds, data):
    """model.safetensors (its bytes, or its JSON header's values) and warm_state.safetensors of a native folder."""
    which = data.draw(st.sampled_from(("model.safetensors", "header", "warm_state.safetensors")))
    with example_dir(seeds) as root:
        model = copy_folder(seeds.native, root / "model")
        if which == "header":
            raw = (model / "model.safetensors").read_bytes()
            length = int.from_bytes(raw[:8], "little")
            header = data.draw(mutated_json(json.loads(raw[8 : 8 + length])))
            (model / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw[8 + length:])
        else:
            (model / which).write_bytes(data.draw(mutated_bytes((model / which).read_bytes())))
        check_read(lambda: read_model(model), model)


def read_bilm_tf(model: Path) -> None:
    """What ``load_bilm`` and ``elmo finetune`` (the softmax, the accumulators, ``global_step``) read."""
    read_model_config(model)
    read_bilm_tf_training_state(model, load_bilm(model))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_tensor_bundles(seeds, data):
    """A bilm-tf checkpoint's ``.index`` (bytes; a block changed with its CRC made to fit, or marked with another
    compression type) and ``.data-*`` shard (bytes), an entry declaring another offset, size, shape, dtype or shard,
    a tensor holding NaN, nothing, or another dtype."""
    which = data.draw(st.sampled_from(("index", "index-block", "data", "entry")))
    prefix = "model.ckpt-1"
    with example_dir(seeds) as root:
        model = copy_folder(seeds.bilm_tf, root / "model")
        index, shard = model / f"{prefix}.index", model / f"{prefix}.data-00000-of-00001"
        if which == "index":
            index.write_bytes(data.draw(mutated_bytes(index.read_bytes())))
        elif which == "index-block":
            index.write_bytes(data.draw(mutated_index(index.read_bytes())))
        elif which == "data":
            shard.write_bytes(data.draw(mutated_bytes(shard.read_bytes())))
        else:
            change = data.draw(bundle_change(sorted(seeds.bilm_tf_tensors)))
            write_changed_bundle(model / prefix, seeds.bilm_tf_tensors, change)
        check_read(lambda: read_bilm_tf(model), model)


CHECKPOINT_NAMES = st.one_of(
    st.sampled_from(("model.ckpt-1\\x", "model.ckpt-1\\x4", "\\u12", "\\U0011ffff", "\\N{nope}", "\\777", "\\",
                     "\\ud800", "../model.ckpt-1", "/abs/run/model.ckpt-1", "C:\\\\run\\\\model.ckpt-1", "", ".", "..",
                     "model.ckpt-1\\000", "model.ckpt-\\x31")),
    st.text(alphabet="\\xuUN{}0123789afmodel.ckpt-/\"'", max_size=24),
    st.text(max_size=12),
)


@FUZZ
@given(data=st.data())
def test_checkpoint_state_files(seeds, data):
    """bilm-tf's ``checkpoint`` file (its bytes; the path it names, escapes included) and the ``global_step`` a
    fine-tuning continues from (NaN, Inf, empty, negative, another dtype)."""
    which = data.draw(st.sampled_from(("bytes", "name", "global_step")))
    with example_dir(seeds) as root:
        model = copy_folder(seeds.bilm_tf, root / "model")
        state = model / "checkpoint"
        if which == "bytes":
            state.write_bytes(data.draw(mutated_bytes(state.read_bytes())))
        elif which == "name":
            name = data.draw(CHECKPOINT_NAMES)
            state.write_bytes(f'model_checkpoint_path: "{name}"\n'.encode("utf-8", "surrogatepass"))
        else:
            step = data.draw(st.sampled_from(HOSTILE_ARRAYS))
            write_changed_bundle(model / "model.ckpt-1", seeds.bilm_tf_tensors, ("global_step", "value", step))
        check_read(lambda: read_bilm_tf(model), model)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_saved_model_graphs(seeds, data):
    """A TF-Hub module's ``saved_model.pb``: a node's attribute replaced (a malformed AttrValue), or the file's
    bytes; the ``tfhub_module.pb`` marker; the variables' index, data and entries."""
    which = data.draw(st.sampled_from(("saved_model.pb", "saved_model.pb", "tfhub_module.pb", "index-block",
                                       "entry")))
    with example_dir(seeds) as root:
        module = copy_folder(seeds.hub, root / "module")
        prefix = module / "variables" / "variables"
        index = Path(f"{prefix}.index")
        if which == "saved_model.pb":
            (module / which).write_bytes(data.draw(mutated_graph(seeds.hub_nodes)))
        elif which == "tfhub_module.pb":
            (module / which).write_bytes(data.draw(mutated_bytes((module / which).read_bytes())))
        elif which == "index-block":
            index.write_bytes(data.draw(mutated_index(index.read_bytes())))
        else:
            write_changed_bundle(prefix, seeds.hub_tensors, data.draw(bundle_change(sorted(seeds.hub_tensors))))
        check_read(lambda: read_model(module), module)


@FUZZ
@given(data=st.data())
def test_tar_archives(seeds, data):
    """A hub module as ``.tar.gz``: the gzip bytes, the tar's own bytes (headers), a member renamed or rewritten;
    an error names the archive (and the member), never the temporary folder it was extracted to."""
    members = folder_members(seeds.hub, "module/")
    op = data.draw(st.sampled_from(("gzip", "tar", "member", "rename")))
    if op == "member":
        name = data.draw(st.sampled_from(sorted(members)))
        members[name] = data.draw(mutated_bytes(members[name]))
    elif op == "rename":
        name = data.draw(st.sampled_from(sorted(members)))
        new = data.draw(st.sampled_from(("module/x/" + name[7:], name[7:], "../" + name, "/" + name, name + "~",
                                         "module/variables/variables.index", "other/tfhub_module.pb")))
        members[new] = members.pop(name)
    archive = tar_gz(members)
    if op == "gzip":
        archive = data.draw(mutated_bytes(archive))
    elif op == "tar":
        archive = gzip.compress(data.draw(mutated_bytes(gzip.decompress(archive))), mtime=0)
    with example_dir(seeds) as root:
        path = root / "module.tar.gz"
        path.write_bytes(archive)
        check_read(lambda: read_model(path), path)


@FUZZ
@given(data=st.data())
def test_manylangs_models(seeds, data):
    """ELMoForManyLangs: the dictionaries and the two pickles (read by ``torch.load(weights_only=True)``)."""
    which = data.draw(st.sampled_from(("char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl")))
    with example_dir(seeds) as root:
        model = copy_folder(seeds.manylangs, root / "model")
        (model / which).write_bytes(data.draw(mutated_bytes((model / which).read_bytes())))
        check_read(lambda: read_model(model), model)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_zip_archives(seeds, data):
    """NLPL zips of both types: options.json + model.hdf5 + meta.json + vocab.txt (type a), an ELMoForManyLangs
    folder (type b); a member renamed, dropped, doubled or rewritten, or the zip's bytes. A bad meta.json is a
    warning, not an error."""
    manylangs = data.draw(st.booleans())
    members = seeds.manylangs_members if manylangs else seeds.nlpl_members
    inner = {name: json_or_bytes for name in ("options.json", "meta.json", "config.json",
                                              "cnn_50_100_512_4096_sample.json")}
    archive = data.draw(mutated_zip(members, inner))
    with example_dir(seeds) as root:
        path = root / "model.zip"
        path.write_bytes(archive)

        def read() -> None:
            read_model(path)
            read_meta(path)
            with open_archive(path) as opened:
                opened.vocabulary()

        check_read(read, path)


# ------------------------------------------------------------------ user text and records


@st.composite
def text_file(draw, seed: bytes, lines: st.SearchStrategy[bytes]) -> tuple[bytes, bool]:
    """The seed with a hostile line inserted or its bytes mutated, maybe gzip'ed (and then maybe the gzip's bytes
    mutated); (bytes, gzip'ed)."""
    data = seed
    if draw(st.booleans()):
        rows = data.split(b"\n")
        at = draw(st.integers(0, len(rows)))
        rows[at:at] = [draw(lines)]
        data = b"\n".join(rows)
    else:
        data = draw(mutated_bytes(data))
    packed = draw(st.booleans())
    if packed:
        data = gzip.compress(data, mtime=0)
        if draw(st.booleans()):
            data = draw(mutated_bytes(data))
    return data, packed


FASTA = b">p1 first protein\nMKTAYIAKQR\nQISFVKSHFS\n;comment\n>p2\nMVLSPADKTN\n\n>p3 x\nA*X-\n"
CONLLU = (b"# sent_id = 1\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2-3\tcat's\t_\t_\t_\t_\t_\t_\t_\t_\n"
          b"2\tcat\tcat\tNOUN\tNN\t_\t0\troot\t_\t_\n3\t's\t's\tPART\tPOS\t_\t2\tcase\t_\t_\n"
          b"3.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n")
JSONL = (b'{"id": "a", "text": "the cat sat"}\n{"id": 2, "text": ["on", "the", "mat"]}\n\n'
         b'{"id": "c", "text": "", "other": [1, {"x": null}]}\n')
TEXT = b"the cat sat\n\non the mat\n  \n\xef\xbb\xbfcaf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87\n"

JSON_LINE = st.one_of(mutated_json(json.loads(JSONL.split(b"\n")[0])), mutated_json(json.loads(JSONL.split(b"\n")[1])),
                      st.sampled_from([v.encode() for v in HOSTILE_JSON]))
TEXT_FORMATS = {
    "text": (TEXT, ".txt", st.binary(max_size=40)),
    "fasta": (FASTA, ".fasta", st.one_of(st.sampled_from((b">", b"> ", b">p1", b">p2 again", b";", b">\t")),
                                         st.binary(max_size=20))),
    "conllu": (CONLLU, ".conllu", st.one_of(
        st.lists(st.sampled_from(("1", "0", "2-1", "1-", "1.0", "0.1", "99999999999999999999", "x", "", "1e3",
                                  "\u0661")), min_size=1, max_size=12).map(lambda c: "\t".join(c).encode()),
        st.binary(max_size=30))),
    "jsonl": (JSONL, ".jsonl", JSON_LINE),
}


@pytest.mark.parametrize("input_format", sorted(TEXT_FORMATS))
@FUZZ
@given(data=st.data())
def test_text_inputs(seeds, input_format, data):
    """Text, FASTA, CoNLL-U and JSON Lines, plain or gzip, through ``read_sentences`` (what ``elmo embed``,
    training and the probes read); both encodings' error modes."""
    seed, suffix, lines = TEXT_FORMATS[input_format]
    content, packed = data.draw(text_file(seed, lines))
    errors = data.draw(st.sampled_from(("strict", "replace")))
    id_field = "id" if input_format == "jsonl" and data.draw(st.booleans()) else None
    with example_dir(seeds) as root:
        path = root / f"input{suffix}{'.gz' if packed else ''}"
        path.write_bytes(content)
        check_read(lambda: list(read_sentences(path, "auto", errors, id_field=id_field)), path)


PARQUET_COLUMNS = {
    "text": ["the cat sat", "on the mat", "", "x y"],
    "tokens": [["a", "b"], [], None, ["c"]],
    "number": [1, 2, 3, 4],
    "float": [1.5, float("nan"), None, 2.0],
    "ints": [[1, 2], None, [], [3]],
    "binary": [b"\xff\xfe", b"ok", None, b""],
    "nested": [{"a": 1}, {"a": None}, None, {"a": 3}],
    "nulls": [None, None, None, None],
    "dupes": ["k", "k", "l", "m"],
}


@FUZZ
@given(data=st.data())
def test_parquet_inputs(seeds, data):
    """Parquet records: text and id columns of every type (lists, nulls, NaN, binary, structs, repeated ids), and
    the file's bytes mutated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text_field = data.draw(st.sampled_from(sorted(PARQUET_COLUMNS)))
    id_field = data.draw(st.one_of(st.none(), st.sampled_from(sorted(PARQUET_COLUMNS))))
    buffer = io.BytesIO()
    pq.write_table(pa.table(PARQUET_COLUMNS), buffer, row_group_size=data.draw(st.sampled_from((1, 3, 100))))
    content = buffer.getvalue()
    if data.draw(st.booleans()):
        content = data.draw(mutated_bytes(content))
    with example_dir(seeds) as root:
        path = root / "input.parquet"
        path.write_bytes(content)
        check_read(lambda: list(read_sentences(path, "auto", text_field=text_field, id_field=id_field)), path)


# ------------------------------------------------------------------ elmo embed --resume


@FUZZ
@given(data=st.data())
def test_resume_over_damaged_parts(seeds, data):
    """``elmo embed --resume`` over a parts folder whose manifest or a part is damaged, or a part gone."""
    resume = seeds.resume
    names = sorted(p.name for p in resume.parts.iterdir())
    which = data.draw(st.sampled_from(names))
    op = data.draw(st.sampled_from(("bytes", "structure", "json", "delete")))
    with example_dir(seeds) as root:
        parts = copy_folder(resume.parts, root / "out.hdf5.parts")
        target = parts / which
        if op == "delete":
            target.unlink()
        elif op == "structure" and which.endswith(".hdf5"):
            bookkeeping = ["__keys__", "__sentences__"] * 3  # what the merge reads before the vectors
            apply_hdf5_change(target, data.draw(hdf5_change(hdf5_datasets(target) + bookkeeping)))
        elif op == "json" and which.endswith(".json"):
            target.write_bytes(data.draw(mutated_json(json.loads(target.read_bytes()))))
        else:
            target.write_bytes(data.draw(mutated_bytes(target.read_bytes())))
        check_read(lambda: resume.run(root / "out.hdf5"), root)


@FUZZ
@given(data=st.data())
def test_resume_over_a_damaged_finished_output(seeds, data):
    """``elmo embed --resume`` when the output is there: its settings attribute, its datasets, its bytes."""
    resume = seeds.resume
    op = data.draw(st.sampled_from(("bytes", "structure", "settings")))
    with example_dir(seeds) as root:
        output = Path(shutil.copy(resume.finished, root / "out.hdf5"))
        if op == "bytes":
            output.write_bytes(data.draw(mutated_bytes(output.read_bytes())))
        elif op == "structure":
            apply_hdf5_change(output, data.draw(hdf5_change(hdf5_datasets(output))))
        else:
            with h5py.File(output, "r+") as f:
                f.attrs["embed_settings"] = data.draw(mutated_json(json.loads(f.attrs["embed_settings"]))).decode()
        check_read(lambda: resume.run(output), root)


# ------------------------------------------------------------------ the boundary


def test_what_a_reader_lets_through_is_one_line_naming_the_model_and_exit_1(seeds, tmp_path, monkeypatch, capsys):
    """The safety net of the loaders (``elmo.errors.reading``) and the CLI's: a reader's bug is one line naming the
    model, exit 1, no output; ``--debug`` shows the traceback."""
    from elmo import cli
    from elmo.formats import original

    def broken(*args, **kwargs):
        raise IndexError("index 0 is out of bounds for axis 0 with size 0")

    monkeypatch.setattr(original, "load_hdf5_weights", broken)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n")
    args = ["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", str(seeds.original)]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err == (f"elmo: error: {seeds.original}: cannot read this model (IndexError: index 0 is out of bounds for "
                   "axis 0 with size 0)\n")
    assert not (tmp_path / "out.hdf5").exists()
    with pytest.raises(UnexpectedFileError) as raised:
        cli.main(["--debug", *args])
    assert isinstance(raised.value.__cause__, IndexError)


def test_any_other_bug_is_one_line_and_exit_1(seeds, tmp_path, monkeypatch, capsys):
    from elmo import cli
    from elmo.embedding import embedder

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(embedder.Embedder, "embed_batch", broken)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n")
    assert cli.main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", str(seeds.original)]) == 1
    assert capsys.readouterr().err == ("elmo: error: ZeroDivisionError: division by zero; this is a bug of elmo: "
                                       "please report it (--debug shows where)\n")


# ------------------------------------------------------------------ the leaks this suite found, kept


def _options(text: str) -> Callable:
    def build(seeds: Seeds, root: Path):
        model = copy_folder(seeds.original, root / "model")
        (model / "options.json").write_text(text)
        return lambda: load_bilm(model), model
    return build


def _native_config(change: Callable[[dict], None]) -> Callable:
    def build(seeds: Seeds, root: Path):
        model = copy_folder(seeds.native, root / "model")
        config = json.loads((model / "config.json").read_text())
        change(config)
        (model / "config.json").write_text(json.dumps(config))
        return lambda: load_bilm(model), model
    return build


def _file_of(folder: str, name: str, change: Callable[[bytes], bytes], read: Callable = load_bilm) -> Callable:
    def build(seeds: Seeds, root: Path):
        model = copy_folder(getattr(seeds, folder), root / "model")
        (model / name).write_bytes(change((model / name).read_bytes()))
        return lambda: read(model), model
    return build


def _jsonl(seeds: Seeds, root: Path):
    path = root / "records.jsonl"
    path.write_text('{"text": "a b"}\n{"text": "c", "id": ' + "1" * 5000 + "}\n")
    return lambda: list(read_sentences(path, "auto")), path


def _safetensors_header(seeds: Seeds, root: Path):
    model = copy_folder(seeds.native, root / "model")
    raw = (model / "model.safetensors").read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = raw[8 : 8 + length].replace(b'"data_offsets":[0,', b'"data_offsets":[' + b"1" * 5000 + b",", 1)
    (model / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw[8 + length:])
    return lambda: load_bilm(model), model


def _group_for_dataset(seeds: Seeds, root: Path):
    model = copy_folder(seeds.original, root / "model")
    apply_hdf5_change(model / "weights.hdf5", ("char_embed", "group", 0))
    return lambda: load_bilm(model), model


def _malformed_attribute(seeds: Seeds, root: Path):
    module = copy_folder(seeds.hub, root / "module")
    nodes = [(n, op, i, {k: field_bytes(1, field_bytes(3, b"\x80")) for k in a}) for n, op, i, a in seeds.hub_nodes]
    (module / "saved_model.pb").write_bytes(saved_model_bytes(nodes))  # every list of ints ends inside a varint
    return lambda: load_bilm(module), module


def _parquet_page(seeds: Seeds, root: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"text": ["the cat sat", "on the mat"] * 50}), buffer, compression="none")
    data = bytearray(buffer.getvalue())
    data[4] ^= 0xFF  # the first page's header
    path = root / "input.parquet"
    path.write_bytes(bytes(data))
    return lambda: list(read_sentences(path, "auto")), path


def _parts(change: Callable[[Path], None]) -> Callable:
    def build(seeds: Seeds, root: Path):
        parts = copy_folder(seeds.resume.parts, root / "out.hdf5.parts")
        change(parts)
        return lambda: seeds.resume.run(root / "out.hdf5"), parts
    return build


def _finished_settings(seeds: Seeds, root: Path):
    output = Path(shutil.copy(seeds.resume.finished, root / "out.hdf5"))
    with h5py.File(output, "r+") as f:
        f.attrs["embed_settings"] = "[1, 2]"
    return lambda: seeds.resume.run(output), output


def _tar_index(seeds: Seeds, root: Path):
    members = folder_members(seeds.hub, "module/")
    members["module/variables/variables.index"] = members["module/variables/variables.index"][:-9]
    path = root / "module.tar.gz"
    path.write_bytes(tar_gz(members))
    return lambda: load_bilm(path), path


def _checkpoint_name(name: str) -> Callable:
    def build(seeds: Seeds, root: Path):
        model = copy_folder(seeds.bilm_tf, root / "model")
        (model / "checkpoint").write_text(f'model_checkpoint_path: "{name}"\n')
        return lambda: read_bilm_tf(model), model
    return build


def _bundle(change: tuple[str, str, object]) -> Callable:
    def build(seeds: Seeds, root: Path):
        model = copy_folder(seeds.bilm_tf, root / "model")
        write_changed_bundle(model / "model.ckpt-1", seeds.bilm_tf_tensors, change)
        return lambda: read_bilm_tf(model), model
    return build


def _snappy_block(seeds: Seeds, root: Path):
    """The index's data block marked Snappy-compressed, as a Snappy stream cut inside a tag."""
    model = copy_folder(seeds.bilm_tf, root / "model")
    index = model / "model.ckpt-1.index"
    offset, size = _footer_blocks(index.read_bytes())[0]
    raw = index.read_bytes()[offset : offset + size]
    index.write_bytes(_rebuilt_index(varint(len(raw)) + bytes([(10 - 1) << 2]) + raw[:10] + bytes([0b01]), 1))
    return lambda: read_bilm_tf(model), model


def _wire_type(seeds: Seeds, root: Path):
    model = copy_folder(seeds.bilm_tf, root / "model")
    write_index(model / "model.ckpt-1.index", {b"lm/CNN/W_cnn_0": field_varint(1, 1) + field_varint(2, 7)})
    return lambda: read_bilm_tf(model), model


LEAKS: dict[str, tuple[Callable, str]] = {
    # (what triggered it: what was raised, where) -> (the file, a fragment of the one line now)
    "options.json holding a 5,000-digit number (ValueError, checked_reads.read_json)":
        (_options('{"lstm": ' + "1" * 5000 + "}"), "invalid JSON: a number of more than 4,300 digits"),
    "options.json nested 100,000 deep (RecursionError, checked_reads.read_json)":
        (_options("[" * 100_000 + "]" * 100_000), "invalid JSON: nested deeper than the JSON parser goes"),
    "config.json: char_cnn.embedding.dim -3 (RuntimeError, config)":
        (_native_config(lambda c: c["options"]["char_cnn"]["embedding"].update(dim=-3)), "char_cnn.embedding.dim"),
    "config.json: token_vocab_size a string (TypeError, native)":
        (_native_config(lambda c: c.update(token_vocab_size="12")), "token_vocab_size"),
    "an ELMoForManyLangs config.json nested deep (RecursionError, manylangs)":
        (_file_of("manylangs", "config.json", lambda _: b"[" * 100_000), "nested deeper than the JSON parser goes"),
    "a JSONL record with a 5,000-digit id (ValueError, records.read_jsonl)":
        (_jsonl, "records.jsonl:2: not a JSON object (a number of more than 4,300 digits)"),
    "a safetensors header with a 5,000-digit offset (ValueError, checked_reads.safetensors_header)":
        (_safetensors_header, "its header is not JSON"),
    "weights.hdf5 with a damaged symbol table node (RuntimeError from h5py's visititems, hdf5)":
        (_file_of("original", "weights.hdf5", lambda b: b.replace(b"SNOD", b"SNOX", 1)), "damaged HDF5 file"),
    "weights.hdf5 with a group where a dataset belongs (AttributeError, hdf5)":
        (_group_for_dataset, "'char_embed' is a group, not a dataset"),
    "saved_model.pb whose attribute ends inside a varint (ValueError, graph_def)":
        (_malformed_attribute, "saved_model.pb): not a readable SavedModel (truncated varint"),
    "a Parquet file with a damaged page header (OSError from pyarrow, records)":
        (_parquet_page, "input.parquet: damaged Parquet data at row 0"),
    "--resume: manifest.json nested 100,000 deep (RecursionError, parts)":
        (_parts(lambda d: (d / "manifest.json").write_text("[" * 100_000)), "cannot read the earlier run's settings"),
    "--resume: a part whose __keys__ is a group (AttributeError, parts)":
        (_parts(lambda d: apply_hdf5_change(d / "part-00000001.hdf5", ("__keys__", "group", 0))),
         "part-00000001.hdf5: cannot read this finished part (no dataset '__keys__')"),
    "--resume: a part cut in half (h5py's words without the file's name)":
        (_parts(lambda d: (d / "part-00000000.hdf5").write_bytes((d / "part-00000000.hdf5").read_bytes()[:3000])),
         "part-00000000.hdf5: cannot read this finished part"),
    "--resume: a finished output whose settings are a JSON list (AttributeError, parts.complete_output)":
        (_finished_settings, "records no settings of an elmo embed run"),
    "a .tar.gz module with a cut index (named the temporary folder, not the archive)":
        (_tar_index, "module/variables/variables.index in "),
    "a checkpoint file naming model.ckpt-1\\x (UnicodeDecodeError, bilm_tf_checkpoint)":
        (_checkpoint_name("model.ckpt-1\\x"), "'\\\\x' is not an escape of TensorFlow's text format"),
    "a checkpoint file naming \\777 (a DeprecationWarning, an error in later Pythons)":
        (_checkpoint_name("\\777"), "is not an escape of TensorFlow's text format"),
    "global_step empty (IndexError, bilm_tf_checkpoint)":
        (_bundle(("global_step", "value", np.zeros(0, np.float32))), "'global_step' is [] of shape (0,)"),
    "global_step NaN (ValueError, bilm_tf_checkpoint)":
        (_bundle(("global_step", "value", np.float32(np.nan))), "'global_step' is [nan]"),
    "global_step Inf (OverflowError, bilm_tf_checkpoint)":
        (_bundle(("global_step", "value", np.float32(np.inf))), "'global_step' is [inf]"),
    "a bundle entry at offset 2**63 (ValueError, tf_bundle)":
        (_bundle(("lm/CNN/W_cnn_0", "offset", 2**63)), "needs bytes 9,223,372,036,854,775,808"),
    "a bundle entry whose shape is a number, not a message (TypeError, tf_bundle; found by make fuzz)":
        (_wire_type, "malformed protobuf message (field 2 has the wrong wire type)"),
    "a Snappy-marked index block cut inside a tag (IndexError, tf_bundle's Snappy decoder, now gone)":
        (_snappy_block, "is compressed with Snappy, which TensorFlow does not write for checkpoints; not supported"),
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_each_leak_found_is_now_one_line_naming_the_file(seeds, leak):
    build, fragment = LEAKS[leak]
    with example_dir(seeds) as root:
        read, where = build(seeds, root)
        with pytest.raises(ElmoError) as raised:
            check_read(read, where)
            read()
        assert fragment in str(raised.value), str(raised.value)


@pytest.mark.parametrize("meta", ["[" * 100_000, '{"id": ' + "9" * 5000 + "}", "[1, 2]", "\udcff"])
def test_a_hostile_meta_json_is_a_warning_and_the_model_loads(seeds, meta, caplog):
    """docs/formats.md: an unreadable meta.json is a warning, not an error (was a RecursionError or ValueError)."""
    members = dict(seeds.nlpl_members) | {"195/meta.json": meta.encode("utf-8", "surrogateescape")}
    with example_dir(seeds) as root:
        path = root / "195.zip"
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
        with caplog.at_level(logging.WARNING):
            load_bilm(path)
        assert read_meta(path) is None
        assert meta == "[1, 2]" or "meta.json in" in caplog.text and "ignoring it" in caplog.text


def test_the_seeds_load(seeds):
    """The seeds themselves load, and resume: a failing read of a mutation is the mutation's."""
    for model in (seeds.original, seeds.native, seeds.bilm_tf, seeds.hub, seeds.manylangs):
        assert isinstance(load_bilm(model).forward_lstm, torch.nn.Module)
    resume = seeds.resume
    with example_dir(seeds) as root:
        copy_folder(resume.parts, root / "out.hdf5.parts")
        resume.run(root / "out.hdf5")
        with h5py.File(root / "out.hdf5") as ours, h5py.File(resume.finished) as theirs:
            assert sorted(ours) == sorted(theirs)
