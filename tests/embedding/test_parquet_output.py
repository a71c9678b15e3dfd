"""`elmo embed --format parquet`: shards equal to the HDF5 output, a manifest that lets a killed or damaged run resume,
and the one-line refusals (changed settings, bad input, a directory of something else)."""

from __future__ import annotations

import json
import sys

import h5py
import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from elmo.cli import main  # noqa: E402
from elmo.embedding import chunks  # noqa: E402
from elmo.embedding.embedder import Embedder  # noqa: E402
from elmo.embedding.file_job import embed_file  # noqa: E402
from elmo.embedding.parquet_output import MANIFEST  # noqa: E402
from elmo.errors import ElmoError, MissingExtraError  # noqa: E402
from elmo.formats.model_files import load_bilm  # noqa: E402
from elmo.formats.published import demo_model_dir  # noqa: E402

LINES = ["the cat sat on the mat .", "", "a bank by the river", "light", "the river bank", "cats and dogs ."]


def _embed(text, out, *flags):
    return main(["-q", "embed", str(text), str(out), "--model", "demo", "--chunk-size", "2", *flags])


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _rows(directory) -> tuple[list[int], list[str], list[np.ndarray]]:
    """Every row of the shards, in line order: (lines, keys, vectors as arrays)."""
    table = pq.read_table(directory).sort_by("line")  # reads part-*.parquet; _manifest.json is skipped
    vectors = [np.array(v, dtype=np.float32) for v in table.column("embedding").to_pylist()]
    return table.column("line").to_pylist(), table.column("key").to_pylist(), vectors


def _manifest(directory) -> dict:
    return json.loads((directory / MANIFEST).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("flags", [
    ["--pool", "mean"],
    ["--pool", "max", "--all"],
    ["--top"],
    ["--all"],
    ["--pool", "first-last", "--layer", "1", "--dtype", "float16"],
])
def test_shards_equal_the_hdf5_output_line_for_line(text, tmp_path, flags):
    assert _embed(text, tmp_path / "o.hdf5", *flags) == 0
    assert _embed(text, tmp_path / "out", "--format", "parquet", *flags) == 0
    lines, keys, vectors = _rows(tmp_path / "out")
    assert lines == list(range(len(LINES))) and keys == [str(i) for i in range(len(LINES))]  # each line once
    with h5py.File(tmp_path / "o.hdf5", "r") as f:
        for key, vector in zip(keys, vectors):
            want = f[key][()]
            if want.size == 0:  # an empty line's tokens: [] (or [[], [], []]), whose 2P numpy cannot see
                assert vector.size == 0 and vector.shape == want.shape[:vector.ndim]
                continue
            assert vector.shape == want.shape, key  # nesting keeps the HDF5 axes: (2P,), (L + 1, 2P), (n, 2P), ...
            np.testing.assert_allclose(vector, want.astype(np.float32), rtol=0, atol=1e-6)
    shards = sorted(p.name for p in (tmp_path / "out").glob("part-*.parquet"))
    assert shards == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]  # one per --chunk-size lines
    manifest = _manifest(tmp_path / "out")
    assert manifest["complete"] is True and manifest["lines"] == len(LINES)
    assert [(s["file"], s["first_line"], s["rows"]) for s in manifest["shards"]] == [
        (name, 2 * i, 2) for i, name in enumerate(shards)]
    with h5py.File(tmp_path / "o.hdf5", "r") as f:  # the same settings as the HDF5 output records, and the format
        hdf5_settings = json.loads(f.attrs["embed_settings"])
    assert manifest["embed_settings"] == {k: v for k, v in hdf5_settings.items() if k != "parts_format"} | {
        "output_format": "parquet"}
    assert manifest["provenance"]["model"] == "demo"


@pytest.mark.slow
def test_column_types_are_documented_nesting(text, tmp_path):
    assert _embed(text, tmp_path / "p", "--format", "parquet", "--pool", "mean", "--dtype", "float16") == 0
    assert _embed(text, tmp_path / "t", "--format", "parquet", "--all") == 0
    pooled = pq.read_schema(tmp_path / "p" / "part-00000.parquet")
    tokens = pq.read_schema(tmp_path / "t" / "part-00000.parquet")
    assert pooled.field("line").type == pa.int64() and pooled.field("key").type == pa.string()
    assert pooled.field("embedding").type == pa.list_(pa.float16(), 256)  # (2P,)
    assert tokens.field("embedding").type == pa.list_(pa.list_(pa.list_(pa.float32(), 256)), 3)  # (L + 1, n, 2P)


@pytest.mark.slow
def test_python_api_writes_the_same_shards(text, tmp_path):
    embedder = Embedder(load_bilm(demo_model_dir()), precision="fp32", device="cpu")
    assert embed_file(embedder, text, tmp_path / "api", output_format="parquet", pool="mean", layer="top") == 6
    assert _embed(text, tmp_path / "cli", "--format", "parquet", "--pool", "mean", "--top") == 0
    api, cli = _rows(tmp_path / "api"), _rows(tmp_path / "cli")
    assert api[:2] == cli[:2]
    np.testing.assert_allclose(np.stack(api[2]), np.stack(cli[2]), rtol=0, atol=1e-6)  # other chunks, batches


@pytest.mark.slow
def test_a_run_killed_after_its_first_shard_resumes_to_the_same_output(text, tmp_path, monkeypatch, capsys):
    assert _embed(text, tmp_path / "whole", "--format", "parquet", "--top") == 0
    real, calls = chunks.embed_unordered, []

    def dies_on_the_second_chunk(embedder, sentences, progress=None):
        calls.append(len(sentences))
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a kill would, between two shards
        return real(embedder, sentences, progress)

    monkeypatch.setattr(chunks, "embed_unordered", dies_on_the_second_chunk)
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--top") == 130  # "elmo: interrupted"
    manifest = _manifest(tmp_path / "out")
    assert manifest["complete"] is False and [s["file"] for s in manifest["shards"]] == ["part-00000.parquet"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MANIFEST, "part-00000.parquet"]  # no temp file

    calls.clear()
    monkeypatch.setattr(chunks, "embed_unordered", lambda e, s, p=None: calls.append(len(s)) or real(e, s, p))
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--top", "--resume") == 0
    assert calls == [2, 2]  # only the two missing chunks
    whole, resumed = _rows(tmp_path / "whole"), _rows(tmp_path / "out")
    assert resumed[:2] == whole[:2]
    for a, b in zip(resumed[2], whole[2]):
        np.testing.assert_array_equal(a, b)
    assert _manifest(tmp_path / "out")["complete"] is True

    calls.clear()  # complete: nothing to do
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--top", "--resume") == 0
    assert calls == []


def test_resume_redoes_damaged_and_unlisted_shards(text, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert _embed(text, out, "--format", "parquet", "--pool", "mean") == 0
    before = _rows(out)
    shard1 = out / "part-00001.parquet"
    shard1.write_bytes(shard1.read_bytes()[:40])  # half-written
    (out / "part-00002.parquet").unlink()
    (out / "part-00007.parquet").write_bytes(b"from a run the manifest never listed")
    (out / ".part-00003.parquet.x.tmp").write_bytes(b"a temp file left by a kill")
    real, calls = chunks.embed_unordered, []
    monkeypatch.setattr(chunks, "embed_unordered", lambda e, s, p=None: calls.append(len(s)) or real(e, s, p))

    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--resume") == 0
    assert calls == [2, 2]  # chunks 1 and 2 again, not chunk 0
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "part-00000.parquet", "part-00001.parquet",
                                                     "part-00002.parquet"]
    after = _rows(out)
    assert after[:2] == before[:2]
    np.testing.assert_array_equal(np.stack(after[2]), np.stack(before[2]))


@pytest.mark.parametrize("change, message", [
    (["--pool", "max"], "elmo: error: --resume: {out}: setting 'pool' was 'mean' in the interrupted run, now 'max'; "
                        "rerun with the same settings, or without --resume to replace it"),
    (["--pool", "mean", "--chunk-size", "3"], "setting 'chunk_size' was 2 in the interrupted run, now 3"),
    (["--pool", "mean", "--dtype", "float16"], "setting 'dtype' was 'float32' in the interrupted run, now 'float16'"),
])
def test_resume_refuses_a_changed_setting_in_one_line(text, tmp_path, monkeypatch, capsys, change, message):
    out = tmp_path / "out"
    monkeypatch.setattr(chunks, "embed_unordered", _dies_on_the_second_chunk(chunks.embed_unordered))
    assert _embed(text, out, "--format", "parquet", "--pool", "mean") == 130
    capsys.readouterr()
    before = sorted(p.name for p in out.iterdir())
    assert main(["-q", "embed", str(text), str(out), "--model", "demo", "--chunk-size", "2", "--format", "parquet",
                 "--resume", *change]) == 1
    assert message.format(out=out) in _error(capsys)
    assert sorted(p.name for p in out.iterdir()) == before  # nothing touched


def test_resume_refuses_a_changed_input_and_a_complete_run_with_other_settings(text, tmp_path, capsys):
    out = tmp_path / "out"
    assert _embed(text, out, "--format", "parquet", "--pool", "mean") == 0
    assert _embed(text, out, "--format", "parquet", "--pool", "max", "--resume") == 1
    assert "setting 'pool' was 'mean' in the complete run, now 'max'" in _error(capsys)
    text.write_text("one more line\n" + text.read_text(), encoding="utf-8")
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--resume") == 1
    assert "setting 'input_bytes' was" in _error(capsys)


def _dies_on_the_second_chunk(real):
    calls = []

    def embed(embedder, sentences, progress=None):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(embedder, sentences, progress)

    return embed


@pytest.mark.slow
def test_a_rerun_replaces_the_earlier_shards_only_with_force(text, tmp_path, capsys):
    out = tmp_path / "out"
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--chunk-size", "1") == 0
    assert len(list(out.glob("part-*.parquet"))) == 6
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--chunk-size", "4") == 1
    assert _error(capsys) == f"elmo: error: {out} exists and is not empty; pass --force to replace it"
    assert len(list(out.glob("part-*.parquet"))) == 6
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--chunk-size", "4", "--force") == 0
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "part-00000.parquet", "part-00001.parquet"]
    assert _rows(out)[0] == list(range(len(LINES)))  # never two runs mixed


def test_bad_input_is_one_line_and_leaves_no_shards(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nsecond line\nnot \xff utf-8\n")
    out = tmp_path / "out"
    assert _embed(bad, out, "--format", "parquet", "--pool", "mean") == 1
    line = _error(capsys)
    assert line.startswith("elmo: error: ") and "line 3" in line and "--errors replace" in line
    assert list(out.iterdir()) == []  # the finished first shard went too: it could never be resumed


@pytest.mark.parametrize("prepare, flags, message", [
    (lambda out: out.mkdir() or (out / "notes.txt").write_text("mine"), [],
     "exists and is not empty; pass --force to replace it"),
    (lambda out: out.write_text("a file"), [], "exists and is not a directory"),
    (lambda out: out.mkdir() or (out / "_manifest.json").write_text("{}"), [],
     "exists and is not empty; pass --force"),  # another tool's manifest is not ours to replace unasked
    (lambda out: None, ["--matrix"], "--matrix is a layout of HDF5 output"),
])
def test_unusable_outputs_are_one_line_before_any_work(text, tmp_path, capsys, prepare, flags, message):
    out = tmp_path / "out"
    prepare(out)
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", *flags) in (1, 2)
    assert message in _error(capsys)
    assert not list(out.glob("part-*")) if out.is_dir() else True


def test_force_writes_into_a_directory_of_other_files(text, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--force") == 0
    assert (out / "notes.txt").read_text() == "mine" and _manifest(out)["complete"] is True


def test_without_pyarrow_it_is_one_line_naming_the_extra(text, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert _embed(text, tmp_path / "out", "--format", "parquet", "--pool", "mean") == 1
    assert _error(capsys) == 'elmo: error: elmo embed --format parquet needs pyarrow: pip install "elmo-bilm[parquet]"'
    embedder = Embedder(load_bilm(demo_model_dir()), precision="fp32", device="cpu")
    with pytest.raises(MissingExtraError):
        embed_file(embedder, text, tmp_path / "api", output_format="parquet", pool="mean")
    assert isinstance(MissingExtraError("x"), ElmoError)


def test_keys_are_the_hdf5_keys_record_ids_and_sentences(text, tmp_path):
    fasta = tmp_path / "p.fasta"
    fasta.write_text(">sp|P1 first\nMKV\nLA\n>P2\nGG\n", encoding="utf-8")
    assert _embed(fasta, tmp_path / "f", "--format", "parquet", "--pool", "mean") == 0
    assert _rows(tmp_path / "f")[:2] == ([0, 1], ["sp|P1", "P2"])
    kept = [line for line in LINES if line]
    text.write_text("\n".join(kept) + "\n", encoding="utf-8")
    assert _embed(text, tmp_path / "s", "--format", "parquet", "--pool", "mean", "--use-sentence-keys") == 0
    assert _rows(tmp_path / "s")[1] == kept


def test_row_groups_bound_the_memory_of_a_chunk(text, tmp_path, monkeypatch):
    from elmo.embedding import parquet_output

    monkeypatch.setattr(parquet_output, "ROW_GROUP_BYTES", 1)  # a row group per (non-empty) row
    assert _embed(text, tmp_path / "small", "--format", "parquet", "--all", "--chunk-size", "6") == 0
    monkeypatch.undo()
    assert _embed(text, tmp_path / "whole", "--format", "parquet", "--all", "--chunk-size", "6") == 0
    assert pq.ParquetFile(tmp_path / "small" / "part-00000.parquet").metadata.num_row_groups > 1
    assert pq.ParquetFile(tmp_path / "whole" / "part-00000.parquet").metadata.num_row_groups == 1
    assert pq.read_table(tmp_path / "whole").column("line").to_pylist() == list(range(len(LINES)))  # in line order
    small, whole = _rows(tmp_path / "small"), _rows(tmp_path / "whole")
    assert small[:2] == whole[:2]
    for a, b in zip(small[2], whole[2]):
        np.testing.assert_array_equal(a, b)


def test_a_complete_run_resumes_with_another_chunk_size_unless_a_shard_must_be_redone(text, tmp_path, capsys):
    out = tmp_path / "out"
    assert _embed(text, out, "--format", "parquet", "--pool", "mean") == 0
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--resume", "--chunk-size", "3") == 0
    (out / "part-00001.parquet").unlink()  # chunk 1 of size 2 cannot be redone as chunks of 3
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--resume", "--chunk-size", "3") == 1
    assert "setting 'chunk_size' was 2 in the run whose damaged shards are to be redone, now 3" in _error(capsys)
    assert _embed(text, out, "--format", "parquet", "--pool", "mean", "--resume") == 0
    assert _rows(out)[0] == list(range(len(LINES)))
