"""Protein input (SeqVec-style use): ``elmo embed proteins.fasta OUT`` reads FASTA without a flag, keys the vectors by
record id, and gives exactly the per-residue vectors of the same residues written as plain text (whitespace-separated,
or one sequence per line with ``--tokens chars``); bad FASTA stops with one line naming the file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.formats.model_files import save_bilm
from elmo.text.fasta import read_fasta
from elmo.text.sentences import count_sentences, read_sentences, resolve_input_format
from tests.conftest import random_bilm

# headers with descriptions, a sequence wrapped over lines (one with a space and CRLF), blank lines, a comment,
# lower case and the rare letters (X, U, *): residues are kept as written
FASTA = (
    ">sp|P69905|HBA_HUMAN Hemoglobin subunit alpha OS=Homo sapiens\n"
    "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF\n"
    "DLSHGSAQVK GHGKKVADALTNAVAHV\r\n"
    "\n"
    "; a comment line of the original format\n"
    ">short\n"
    "mkX\n"
    ">seq.3 selenoprotein\n"
    "MUCK*\n"
)
IDS = ["sp|P69905|HBA_HUMAN", "short", "seq.3"]
SEQUENCES = [
    "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHFDLSHGSAQVKGHGKKVADALTNAVAHV",
    "mkX",
    "MUCK*",
]


def seqvec_shaped_config() -> BiLMConfig:
    """SeqVec's shape (a char CNN over one-letter tokens, 2 residual LSTM layers with projection), small sizes."""
    return BiLMConfig(
        lstm=LSTMConfig(dim=24, projection_dim=8, n_layers=2, cell_clip=3, proj_clip=3, use_skip_connections=True),
        char_cnn=CharCNNConfig(filters=[(1, 8), (2, 8), (3, 16)], embedding_dim=6, n_highway=2),
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(seqvec_shaped_config(), seed=7), tmp_path_factory.mktemp("seqvec"))


def _embed(model_dir: Path, source: Path, out: Path, *flags: str) -> dict[str, np.ndarray]:
    assert main(["-q", "embed", str(source), str(out), "--all", "--model", str(model_dir), *flags]) == 0
    with h5py.File(out, "r") as f:
        return {k: json.loads(f[k].asstr()[0]) if k == "sentence_to_index" else f[k][()] for k in f}


def test_fasta_and_plain_text_give_the_same_per_residue_vectors(model_dir, tmp_path):
    (tmp_path / "proteins.fasta").write_text(FASTA, encoding="utf-8")
    (tmp_path / "spaced.txt").write_text("".join(" ".join(s) + "\n" for s in SEQUENCES), encoding="utf-8")
    (tmp_path / "sequences.txt").write_text("".join(s + "\n" for s in SEQUENCES), encoding="utf-8")
    fasta = _embed(model_dir, tmp_path / "proteins.fasta", tmp_path / "f.hdf5")  # no flag: the name says FASTA
    spaced = _embed(model_dir, tmp_path / "spaced.txt", tmp_path / "s.hdf5")
    chars = _embed(model_dir, tmp_path / "sequences.txt", tmp_path / "c.hdf5", "--tokens", "chars")
    assert set(fasta) == {*IDS, "sentence_to_index"}
    assert set(spaced) == set(chars) == {"0", "1", "2", "sentence_to_index"}
    for i, (record_id, sequence) in enumerate(zip(IDS, SEQUENCES)):
        assert fasta[record_id].shape == (3, len(sequence), 16)  # (L + 1, residues, 2P)
        np.testing.assert_array_equal(fasta[record_id], spaced[str(i)])
        np.testing.assert_array_equal(fasta[record_id], chars[str(i)])
    # sentence -> key, as for text: the residues (space-joined, as every sentence is) -> the record id
    assert fasta["sentence_to_index"] == {" ".join(s): record_id for s, record_id in zip(SEQUENCES, IDS)}
    assert spaced["sentence_to_index"] == chars["sentence_to_index"]


@pytest.mark.parametrize("name", ["proteins.fasta.gz", "proteins.fa.gz", "proteins.faa", "proteins.FA"])
def test_fasta_names_and_gzip(model_dir, tmp_path, name):
    (tmp_path / "proteins.fasta").write_text(FASTA, encoding="utf-8")
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(FASTA.encode()))
    else:
        path.write_text(FASTA, encoding="utf-8")
    plain = _embed(model_dir, tmp_path / "proteins.fasta", tmp_path / "plain.hdf5")
    got = _embed(model_dir, path, tmp_path / "got.hdf5")
    assert got.keys() == plain.keys()
    for key in IDS:
        np.testing.assert_array_equal(got[key], plain[key])
    assert count_sentences(path, "auto") == len(IDS)  # the progress bar's total: the '>' headers


def test_fasta_of_any_name_with_the_flag_and_text_named_fasta(tmp_path):
    odd = tmp_path / "proteins.seq"
    odd.write_text(FASTA, encoding="utf-8")
    assert [line.key for line in read_sentences(odd, "fasta")] == IDS
    assert [line.tokens for line in read_sentences(odd, "fasta")] == [list(s) for s in SEQUENCES]
    assert [line.line_number for line in read_sentences(odd, "fasta")] == [1, 6, 8]
    assert next(read_sentences(odd, "auto")).key is None  # not a FASTA name, so text
    assert [resolve_input_format(p) for p in ("a.fa", "a.FASTA.gz", "a.faa", "a.conllu.gz", "a.txt", "-")] == [
        "fasta", "fasta", "fasta", "conllu", "text", "text"]
    assert resolve_input_format("a.fa", "text") == "text"


def test_tokens_chars_of_text(tmp_path):
    path = tmp_path / "seqs.txt"
    path.write_text("M K\tV\n\nACGT\n", encoding="utf-8")
    assert [line.tokens for line in read_sentences(path, tokens="chars")] == [["M", "K", "V"], [], list("ACGT")]
    assert [line.tokens for line in read_sentences(path)] == [["M", "K", "V"], [], ["ACGT"]]


def test_bom_crlf_and_stdin_style_reads(tmp_path):
    path = tmp_path / "win.fa"
    path.write_bytes(b"\xef\xbb\xbf>a x\r\nMK\r\nV\r\n>b\r\nW\r\n")
    assert [(r.id, r.sequence, r.line) for r in read_fasta(path)] == [("a", "MKV", 1), ("b", "W", 4)]
    assert count_sentences(path, "auto") == 2


BAD = {
    "empty record": (">a\nMK\n>b\n\n>c\nW\n", "line 3: FASTA record 'b' is empty (no residues after its header): "
                     "remove it or add its sequence"),
    "empty last record": (">a\nMK\n>b\n", "line 3: FASTA record 'b' is empty (no residues after its header): "
                          "remove it or add its sequence"),
    "not FASTA": ("\nMKV LLA\n>a\nMK\n", "line 2: not a FASTA file: the first line that is not blank must be a '>' "
                  "header, found 'MKV LLA'; pass --input-format text for one sentence per line"),
    "duplicate id": (">a x\nMK\n>b\nW\n>a y\nV\n", "line 5: record id 'a' repeats line 1 (ids key the output: make "
                     "them unique)"),
    "no id": (">a\nMK\n> \nW\n", "line 3: a FASTA header without an id: write '>ID' before its residues"),
    "id not an HDF5 name": (">a\nMK\n>seq/1-20\nW\n", "line 3: cannot use the record id 'seq/1-20' as a key: it "
                            "contains '/', which HDF5 reads as a group separator; rename the record"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_fasta_is_one_line_naming_file_and_line(model_dir, tmp_path, capsys, case):
    text, problem = BAD[case]
    path = tmp_path / "bad.fasta"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["-q", "embed", str(path), str(out), "--top", "--model", str(model_dir)]) == 1
    assert capsys.readouterr().err == f"elmo: error: {path}, {problem}\n"
    assert not out.exists()


def test_non_utf8_line_names_file_and_line(model_dir, tmp_path, capsys):
    path = tmp_path / "bad.fa.gz"
    path.write_bytes(gzip.compress(b">a\nMK\n>b\nW\xff\n"))
    assert main(["-q", "embed", str(path), str(tmp_path / "out.hdf5"), "--top", "--model", str(model_dir)]) == 1
    assert capsys.readouterr().err == (f"elmo: error: {path}, line 4: not valid UTF-8 (invalid start byte at byte 1); "
                                       "fix the file or pass --errors replace\n")


def test_tokens_chars_refused_for_conllu(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n", encoding="utf-8")
    with pytest.raises(ValueError, match="--tokens chars splits the lines of a text file"):
        next(read_sentences(path, "auto", tokens="chars"))


def test_resume_knows_how_the_input_was_read(model_dir, tmp_path, capsys):
    source, out = tmp_path / "seqs.txt", tmp_path / "out.hdf5"
    source.write_text("MKV\n", encoding="utf-8")
    _embed(model_dir, source, out)
    args = ["-q", "embed", str(source), str(out), "--all", "--model", str(model_dir), "--resume"]
    assert main([*args, "--input-format", "text"]) == 0  # what auto found: the same job, nothing to do
    assert main([*args, "--tokens", "chars"]) == 1  # other tokens, other vectors: refused
    assert "setting 'tokens' was None when it was written, now 'chars'" in capsys.readouterr().err
