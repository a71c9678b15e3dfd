"""Fuzzed and extreme input through the character encoder, `elmo embed` and the training readers."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import embed_file
from elmo.errors import InputFileError
from elmo.formats.checked_reads import read_json
from elmo.formats.model_files import load_bilm
from elmo.text.char_encoding import batch_to_ids
from tests.faults.conftest import assert_one_line_error, elmo, train_args

LINE_BYTES = st.binary(max_size=30).filter(lambda b: b"\n" not in b)


@pytest.fixture(scope="module")
def embedder(tiny_model) -> Embedder:
    return Embedder(load_bilm(tiny_model), batch_size=4, chunk_size=3)


def _lines_in(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f if k.isdigit()}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE_BYTES, max_size=6), errors=st.sampled_from(["strict", "replace"]))
@example(lines=[b"nul\x00inside", b"\x00", b""], errors="strict")  # found by this test in CI: HDF5 strings and NUL
@example(lines=[b"caf\xe9", b"ok"], errors="strict")
def test_arbitrary_bytes_give_aligned_output_or_an_error_naming_the_line(embedder, tmp_path_factory, lines, errors):
    directory = tmp_path_factory.mktemp("fuzz")
    text, out = directory / "in.txt", directory / "out.hdf5"
    text.write_bytes(b"\n".join(lines) + (b"\n" if lines else b""))
    first_bad = next((i for i, b in enumerate(lines) if not _is_utf8(b)), None)
    if errors == "strict" and first_bad is not None:
        with pytest.raises(InputFileError, match=rf"in\.txt, line {first_bad + 1}: not valid UTF-8"):
            embed_file(embedder, text, out, errors=errors)
        assert not out.exists()
        return
    assert embed_file(embedder, text, out, errors=errors) == len(lines)
    got = _lines_in(out)
    assert sorted(got, key=int) == [str(i) for i in range(len(lines))]
    for i, raw in enumerate(lines):
        n_tokens = len(raw.decode("utf-8", errors="replace").split())
        assert got[str(i)].shape == (embedder.num_layers, n_tokens, embedder.output_dim)
        assert np.isfinite(got[str(i)]).all()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), max_size=5))
def test_the_character_encoder_takes_any_unicode(words):
    ids = batch_to_ids([words])
    assert ids.shape == (1, len(words), 50)
    assert ids.numel() == 0 or (int(ids.min()) >= 0 and int(ids.max()) <= 261)


@pytest.mark.slow
def test_extreme_lines(embedder, tmp_path):
    text, out = tmp_path / "in.txt", tmp_path / "out.hdf5"
    long_line = " ".join(["word"] * 10_000)
    long_token = "x" * 10_000
    text.write_bytes(("\n".join([long_line, long_token, " \t \u3000 ", "", "crlf line\r", "lone\rcr"]) + "\n").encode())
    assert embed_file(embedder, text, out) == 6
    got = _lines_in(out)
    shapes = [got[str(i)].shape[1] for i in range(6)]
    assert shapes == [10_000, 1, 0, 0, 2, 2]  # \r is whitespace inside a line; lines end at \n only
    assert all(np.isfinite(v).all() for v in got.values())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["truncated_gzip", "vocab_without_specials", "missing_shard", "not_utf8_corpus",
                                  "directory_shard", "stdin_corpus"])
def test_bad_training_input_is_a_one_line_error(corpus, tmp_path, case):
    train, vocab = corpus["train"], corpus["vocab"]
    if case == "truncated_gzip":
        train = tmp_path / "shard.txt.gz"
        data = gzip.compress(corpus["train"].read_bytes())
        train.write_bytes(data[: len(data) // 2])
        expected = ["shard.txt.gz", "truncated gzip"]
    elif case == "vocab_without_specials":
        vocab = tmp_path / "vocab.txt"
        vocab.write_text("the\ncat\n")
        expected = ["vocab.txt", "<S>"]
    elif case == "missing_shard":
        train = tmp_path / "no-such-shard-*.txt"
        expected = ["no-such-shard-*.txt", "matches no shard"]
    elif case == "directory_shard":
        train = tmp_path
        expected = [f"{tmp_path}: is a directory", f"'{tmp_path}/*'"]
    elif case == "stdin_corpus":
        train = "-"
        expected = ["<stdin>: training reads its corpus once per epoch"]
    else:
        train = tmp_path / "latin1.txt"
        train.write_bytes(b"the cat sat\n" * 3 + "caf\xe9 au lait\n".encode("latin-1"))
        expected = ["latin1.txt", "line 4"]
    args = train_args(dict(corpus, train=train, vocab=vocab), tmp_path / "run", "--max-steps", "3")
    assert_one_line_error(elmo(*args), *expected)


@pytest.mark.slow
def test_embed_errors_name_file_and_line(tiny_model, tmp_path):
    text = tmp_path / "in.txt"
    text.write_bytes(b"fine line\nanother\n\xff\xfe broken\n")
    result = elmo("embed", "--all", "--model", str(tiny_model), str(text), str(tmp_path / "out.hdf5"))
    line = assert_one_line_error(result, "in.txt, line 3: not valid UTF-8", "--errors replace")
    assert re.search(r"line 3", line)
    assert not (tmp_path / "out.hdf5").exists()
    missing = elmo("embed", "--all", "--model", str(tiny_model), str(tmp_path / "nope.txt"), str(tmp_path / "out.hdf5"))
    assert_one_line_error(missing, "nope.txt: no such input file")


def test_a_json_config_saved_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "preset.json"
    path.write_bytes('\ufeff{"batch_size": 2}'.encode())
    assert read_json(path) == {"batch_size": 2}
