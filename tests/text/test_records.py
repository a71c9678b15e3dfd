"""JSONL and Parquet input of `elmo embed` (elmo.text.records): records give the vectors their sentences give as plain
text, keyed by --id-field, and every bad record is one line naming the file and line or row."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.errors import InputFileError
from elmo.text.records import count_records, read_jsonl, read_parquet_records
from elmo.text.sentences import read_sentences, resolve_input_format

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SENTENCES = ["the cat sat on the mat .", "a bank by the river", "light", "", "the river bank"]


def _embed(input_path, out, *flags) -> int:
    return main(["-q", "embed", str(input_path), str(out), "--model", "demo", "--precision", "fp32", *flags])


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    return lines[-1]


@pytest.fixture
def plain(tmp_path) -> dict[str, np.ndarray]:
    """The same sentences embedded from a text file, one per line: what every record format must give."""
    path = tmp_path / "plain.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert _embed(path, tmp_path / "plain.hdf5", "--all") == 0
    with h5py.File(tmp_path / "plain.hdf5") as f:
        return {str(i): f[str(i)][()] for i in range(len(SENTENCES))}


@pytest.mark.slow
def test_jsonl_records_give_the_plain_texts_vectors_keyed_by_id(tmp_path, plain):
    path = tmp_path / "in.jsonl"
    records = [{"id": f"doc-{i}", "text": s, "other": [1, 2]} for i, s in enumerate(SENTENCES)]
    records[2]["text"] = SENTENCES[2].split()  # a list of tokens is taken as it is
    path.write_text("\n".join(json.dumps(r) for r in records[:2]) + "\n\n" +  # a blank line between records
                    "\n".join(json.dumps(r) for r in records[2:]) + "\n", encoding="utf-8")
    assert _embed(path, tmp_path / "out.hdf5", "--all", "--id-field", "id") == 0
    with h5py.File(tmp_path / "out.hdf5") as f:
        assert sorted(k for k in f if k != "sentence_to_index") == sorted(f"doc-{i}" for i in range(len(SENTENCES)))
        for i in range(len(SENTENCES)):
            assert np.array_equal(f[f"doc-{i}"][()], plain[str(i)])
    assert _embed(path, tmp_path / "by-index.hdf5", "--all") == 0  # no id field: records keyed 0, 1, ...
    with h5py.File(tmp_path / "by-index.hdf5") as f:
        assert all(np.array_equal(f[str(i)][()], plain[str(i)]) for i in range(len(SENTENCES)))


def test_parquet_records_in_and_out_keep_their_ids(tmp_path, plain):
    path = tmp_path / "in.parquet"
    table = pa.table({"doc": [f"d{i}" for i in range(len(SENTENCES))], "body": SENTENCES})
    pq.write_table(table, path, row_group_size=2)  # several row groups, read one batch at a time
    assert count_records(path, "parquet") == len(SENTENCES)
    assert _embed(path, tmp_path / "out", "--all", "--format", "parquet", "--text-field", "body", "--id-field",
                  "doc", "--chunk-size", "2") == 0
    rows = pq.read_table(tmp_path / "out").to_pylist()
    assert pq.read_table(tmp_path / "out").column_names == ["line", "doc", "embedding"]
    assert sorted(row["line"] for row in rows) == list(range(len(SENTENCES)))  # every record exactly once
    for row in rows:
        assert row["doc"] == f"d{row['line']}"  # the id field keeps its name
        got = np.array(row["embedding"], dtype=np.float32).reshape(plain[str(row["line"])].shape)
        # chunks of 2 batch other sentences together than the one chunk of the plain run: the GEMMs' blocking moves
        # the last bits (stateless: the vectors are the same up to rounding)
        np.testing.assert_allclose(got, plain[str(row["line"])], atol=1e-6, rtol=0)


def test_formats_are_found_by_name_and_counted(tmp_path):
    assert [resolve_input_format(n) for n in ("a.jsonl", "a.ndjson.gz", "a.parquet", "a.json")] == \
        ["jsonl", "jsonl", "parquet", "text"]
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "a b"}\n\n{"text": "c"}\n', encoding="utf-8")
    assert count_records(path, "jsonl") == 2
    assert [line.tokens for line in read_sentences(path, "auto")] == [["a", "b"], ["c"]]
    assert [line.tokens for line in read_sentences(path, "auto", tokens="chars")] == [["a", "b"], ["c"]]


@pytest.mark.slow
@pytest.mark.parametrize(("content", "message"), [
    ('{"text": "a", "id": 0}\nnot json\n', "bad.jsonl:2: not a JSON object (Expecting value at column 1)"),
    ('["a", "b"]\n', "bad.jsonl:1: not a JSON object (a JSON list)"),
    ('{"txt": "a"}\n', "bad.jsonl:1: no field 'text'; name the text's field with --text-field"),
    ('{"text": 3}\n', "bad.jsonl:1: field 'text' is 3, expected a string or a list of strings"),
    ('{"text": "a", "id": 1}\n{"text": "b", "id": "1"}\n',
     "bad.jsonl:2: id '1' is also the id at line 1; ids key the output, so each must be unique"),
    ('{"text": "a"}\n', "bad.jsonl:1: id field 'id' is missing; every record needs a string or number id"),
])
def test_a_bad_jsonl_record_is_one_line_naming_file_and_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    assert _embed(path, tmp_path / "out.hdf5", "--top", "--id-field", "id") == 1
    assert _error(capsys) == f"elmo: error: {tmp_path}/{message}"
    assert not (tmp_path / "out.hdf5").exists()


@pytest.mark.slow
def test_a_parquet_file_without_the_column_or_not_parquet_is_one_line(tmp_path, capsys):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"doc": ["d1"], "body": ["a b"]}), path)
    assert _embed(path, tmp_path / "out.hdf5", "--top") == 1
    assert _error(capsys) == (f"elmo: error: {path}: no column 'text' (its columns: doc, body); name the column "
                              "with --text-field")
    with pytest.raises(InputFileError, match="in.parquet: no column 'id'"):
        list(read_parquet_records(path, "body", "id"))
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"^.*fake.parquet: not a Parquet file \("):
        list(read_parquet_records(fake))
    assert count_records(fake, "parquet") is None  # no progress total; the read names the problem


def test_a_null_text_in_parquet_names_its_row(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a b", None]}), path)
    with pytest.raises(InputFileError, match=r"in.parquet: row 1: field 'text' is null"):
        list(read_parquet_records(path))
    assert [r.tokens for r in read_jsonl(_jsonl(tmp_path, [{"text": "x y"}]))] == [["x", "y"]]


@pytest.mark.slow
def test_a_changed_text_field_refuses_to_resume(tmp_path, capsys):
    path = _jsonl(tmp_path, [{"text": "a b", "title": "c"}, {"text": "d", "title": "e f"}])
    assert _embed(path, tmp_path / "out", "--pool", "mean", "--format", "parquet") == 0
    assert _embed(path, tmp_path / "out", "--pool", "mean", "--format", "parquet", "--resume",
                  "--text-field", "title") == 1
    assert "text_field" in _error(capsys)


def _jsonl(tmp_path, records) -> object:
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.slow
def test_an_id_field_named_like_an_output_column_is_refused(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text('{"line": "a", "text": "the cat"}\n', encoding="utf-8")
    assert _embed(path, tmp_path / "out", "--pool", "mean", "--format", "parquet", "--id-field", "line") == 2
    assert _error(capsys) == ("elmo: error: --id-field line: Parquet output has a column 'line' of its own; rename "
                              "the field in the input")
    assert not (tmp_path / "out" / "_manifest.json").exists()
