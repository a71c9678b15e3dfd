"""The output of ``elmo embed``: paths checked before any work, sentence keys refused with their real cause."""

from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path

import h5py
import pytest

from elmo.cli import main
from elmo.embedding.parts import check_paths
from elmo.errors import ElmoError
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("model"))


def _embed(text: Path | str, out: Path | str, model: Path, *extra: str) -> int:
    return main(["-q", "embed", str(text), str(out), "--top", "--model", str(model), *extra])


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_the_input_is_never_the_output(tmp_path, model_dir, capsys, link):
    text = tmp_path / "one.txt"
    text.write_text("the cat sat .\n")
    out = {"same": text, "symlink": tmp_path / "sym.hdf5", "hardlink": tmp_path / "hard.hdf5"}[link]
    if link == "symlink":
        out.symlink_to(text)
    elif link == "hardlink":
        os.link(text, out)
    assert _embed(text, out, model_dir, "--force") == 1
    assert _error(capsys) == f"elmo: error: {out}: is also input, an input of this command; writing there would " \
                             "destroy it: give another output"
    assert text.read_text() == "the cat sat .\n"
    with pytest.raises(ElmoError, match="is the input file; writing to it would destroy the text"):
        check_paths(text, out, force=True)  # the Python API's own check says the same


def test_an_existing_output_needs_force(tmp_path, model_dir, capsys):
    text, out = tmp_path / "in.txt", tmp_path / "notes.txt"
    text.write_text("the cat\n")
    out.write_text("keep me\n")
    assert _embed(text, out, model_dir) == 1
    assert _error(capsys) == f"elmo: error: {out} exists; pass --force to replace it"
    assert out.read_text() == "keep me\n"
    with pytest.raises(ElmoError, match="exists; pass --force to replace it"):
        check_paths(text, out)
    assert _embed(text, out, model_dir, "--force") == 0
    assert h5py.is_hdf5(out)
    before = out.read_bytes()
    assert _embed(text, out, model_dir) == 1  # an earlier output too: hours of work, maybe
    assert _error(capsys) == f"elmo: error: {out} exists; pass --force to replace it"
    assert out.read_bytes() == before
    assert _embed(text, out, model_dir, "--resume") == 0  # the same job, finished: nothing to do
    assert out.read_bytes() == before


def test_bad_outputs_are_refused_before_the_model_loads(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    no_model = tmp_path / "no-model"  # loading it would fail: the path errors must come first
    cases = {
        tmp_path / "dir": "is a directory; give the file to write",
        "-": "an HDF5 file cannot be written to stdout",
        tmp_path / "file" / "sub" / "out.hdf5": "file: is a file, not a directory: ",
    }
    for out, message in cases.items():
        assert _embed(text, out, no_model) == 1
        assert message in _error(capsys), out
    assert _embed(tmp_path / "dir", tmp_path / "o.hdf5", no_model) == 1
    assert _error(capsys) == f"elmo: error: {tmp_path / 'dir'}: is a directory, not a text file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "file", "in.txt"]  # no OUT.parts left behind


def test_a_stream_cannot_resume(tmp_path, model_dir, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(b"the cat\n"))))
    assert _embed("-", tmp_path / "out.hdf5", model_dir, "--resume") == 1
    assert _error(capsys) == ("elmo: error: <stdin> is read once, as it comes: --resume and torchrun need an input "
                              "file they can read again")


def test_an_empty_input_warns_and_writes_a_valid_empty_file(tmp_path, model_dir, caplog):
    text, out = tmp_path / "empty.txt", tmp_path / "out.hdf5"
    text.write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        assert _embed(text, out, model_dir) == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"{text} is empty: {out} holds no sentences"
    ]
    with h5py.File(out, "r") as f:
        assert list(f) == ["sentence_to_index"] and f["sentence_to_index"].asstr()[0] == "{}"


@pytest.mark.parametrize(
    "lines, message",
    [
        (["a b", "c", "a b"], "line 3: cannot use the sentence as a key: it repeats line 1 (keys must be unique)"),
        (["a", "", "b"], "line 2: cannot use the sentence as a key: the line is empty"),
        (["a", "1/2 cup"], "line 2: cannot use the sentence as a key: it contains '/', which HDF5 reads as a group"),
        (["nul \x00"], "line 1: cannot use the sentence as a key: it contains a NUL character"),
        (["a b", "."], "line 2: cannot use the sentence as a key: '.' is HDF5's name for the file's root group"),
        (["sentence_to_index"], "line 1: cannot use the sentence as a key: 'sentence_to_index' names the output's"),
    ],
)
def test_each_unusable_sentence_key_gets_its_own_reason(tmp_path, model_dir, capsys, lines, message):
    text = tmp_path / "in.txt"
    text.write_text("".join(f"{line}\n" for line in lines))
    assert _embed(text, tmp_path / "out.hdf5", model_dir, "--use-sentence-keys") == 1
    assert message in _error(capsys)
    assert not (tmp_path / "out.hdf5.parts").exists()


def test_sentence_keys_that_hdf5_can_hold_are_stored(tmp_path, model_dir):
    text, out = tmp_path / "in.txt", tmp_path / "out.hdf5"
    text.write_text(".. !\n. .\nsentence_to_index\n")
    assert _embed(text, out, model_dir, "--use-sentence-keys", "--forget-sentences") == 0
    with h5py.File(out, "r") as f:
        assert sorted(f) == [". .", ".. !", "sentence_to_index"]
