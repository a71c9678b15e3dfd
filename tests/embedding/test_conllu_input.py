"""``elmo embed --input-format conllu``: a CoNLL-U file gives the vectors of its FORMs as a text file, keyed by
sentence number (or by sentence), and a malformed line stops the job with the file and line."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.embedding.embedder import Embedder
from elmo.embedding.file_job import embed_file
from elmo.errors import InputFileError
from elmo.formats.model_files import load_bilm, save_bilm
from tests.conftest import random_bilm

CONLLU = """\
# sent_id = a/1
1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:x\t_

# sent_id = a/2
1\tüber\tüber\tADP\tIN\t_\t2\tcase\t_\t_
2\t東京\t東京\tPROPN\tNNP\t_\t0\troot\t_\t_
"""
FORMS = "do n't go\nüber 東京\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("model"))


def _read(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k].asstr()[0] if k == "sentence_to_index" else f[k][()] for k in f}


def test_conllu_gives_the_vectors_of_its_forms(model_dir, tmp_path):
    (tmp_path / "in.conllu").write_text(CONLLU, encoding="utf-8")
    (tmp_path / "in.txt").write_text(FORMS, encoding="utf-8")
    embedder = Embedder(load_bilm(model_dir))
    assert embed_file(embedder, tmp_path / "in.conllu", tmp_path / "c.hdf5", input_format="conllu") == 2
    embed_file(embedder, tmp_path / "in.txt", tmp_path / "t.hdf5")
    conllu, text = _read(tmp_path / "c.hdf5"), _read(tmp_path / "t.hdf5")
    assert conllu.keys() == text.keys() == {"0", "1", "sentence_to_index"}
    assert conllu["0"].shape == (3, 3, 16)  # the range 1-2 and the empty node 3.1 are not tokens
    for key in ("0", "1", "sentence_to_index"):
        np.testing.assert_array_equal(conllu[key], text[key])


def test_cli_sentence_keys(model_dir, tmp_path):
    (tmp_path / "in.conllu").write_text(CONLLU, encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["-q", "embed", str(tmp_path / "in.conllu"), str(out), "--top", "--model", str(model_dir),
                 "--input-format", "conllu", "--use-sentence-keys"]) == 0
    got = _read(out)
    assert set(got) == {"do n't go", "über 東京", "sentence_to_index"}
    assert got["über 東京"].shape == (2, 16)


def test_malformed_conllu_names_file_and_line(model_dir, tmp_path, capsys):
    path = tmp_path / "bad.conllu"
    path.write_text(CONLLU.replace("2\t東京\t東京", "3\t東京\t東京"), encoding="utf-8")
    assert main(["-q", "embed", str(path), str(tmp_path / "out.hdf5"), "--top", "--model", str(model_dir),
                 "--input-format", "conllu"]) == 1
    assert capsys.readouterr().err == f"elmo: error: {path}, line 10: word ID 3 out of order: expected 2\n"
    assert not (tmp_path / "out.hdf5").exists()


def test_repeated_sentence_key_names_the_sentence_line(model_dir, tmp_path):
    path = tmp_path / "twice.conllu"
    path.write_text("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n# c\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"twice.conllu, line 4: cannot use the sentence as a key: it repeats "
                                             r"line 1"):
        embed_file(Embedder(load_bilm(model_dir)), path, tmp_path / "o.hdf5", input_format="conllu",
                                                  use_sentence_keys=True)
