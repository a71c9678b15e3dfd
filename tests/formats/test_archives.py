"""Model archives (NLPL zips): bilm-tf archives load bit for bit like the directory, ManyLangs archives are told
apart and handed to their reader, nothing is extracted to disk, and every damaged archive gives one line."""

from __future__ import annotations

import gzip
import json
import tempfile
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import StatefulBiLM, batch_to_ids, load_bilm
from elmo.cli import main as cli_main
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.archives import describe_meta, open_archive, read_meta
from elmo.formats.model_files import read_model_config, read_options
from elmo.formats.model_formats import recognise
from tests.formats.manylangs_files import write_manylangs_model

META = {
    "id": 195,
    "corpus": [{"description": "Russian National Corpus", "language": "rus", "lemmatized": False, "tokens": 989000000}],
    "algorithm": {"name": "ELMo"},
}
VOCAB = ["<S>", "</S>", "<UNK>", "the", "a"]


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path, monkeypatch) -> Path:
    """Every temporary file Python would create goes here, so a test can check that none is left."""
    directory = tmp_path / "tempdir"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    monkeypatch.setenv("TMPDIR", str(directory))
    return directory


def nlpl_files(fixture_dir: Path, folder: str = "", vocab_gz: bool = True) -> dict[str, bytes]:
    """The bilm-tf fixture as an NLPL archive of type (a) holds it."""
    vocab = "\n".join(VOCAB).encode() + b"\n"
    return {
        f"{folder}options.json": (fixture_dir / "options.json").read_bytes(),
        f"{folder}model.hdf5": (fixture_dir / "lm_weights.hdf5").read_bytes(),
        f"{folder}vocab.txt" + (".gz" if vocab_gz else ""): gzip.compress(vocab) if vocab_gz else vocab,
        f"{folder}meta.json": json.dumps(META).encode(),
    }


def pack(path: Path, files: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def fixture_bilm(fixture_dir: Path):
    return load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")


def _layers(bilm, sentences):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences)).layers


@pytest.mark.slow
@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"])
@pytest.mark.parametrize("folder", ["", "195/"], ids=["top-level", "in-a-folder"])
def test_nlpl_archive_gives_the_directory_outputs_bit_for_bit(
    tmp_path, fixture_dir, fixture_sentences, private_tempdir, folder, compression
):
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir, folder), compression)
    from_zip, from_dir = load_bilm(archive), fixture_bilm(fixture_dir)
    for (name, a), (_, b) in zip(from_zip.state_dict().items(), from_dir.state_dict().items()):
        assert torch.equal(a, b), name
    sentences = [s for group in fixture_sentences for s in group[:3]]
    for a, b in zip(_layers(from_zip, sentences), _layers(from_dir, sentences)):
        assert torch.equal(a, b)
    assert not list(private_tempdir.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["195.zip", "tempdir"]  # nothing extracted beside it


def test_cli_embed_on_an_archive_matches_bilm_tf(tmp_path, fixture_dir, fixture_sentences, fixture_expected):
    """The fixture's own protocol (stateful, batches of 3) through `elmo embed --model 195.zip`."""
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir, "model/"))
    text = tmp_path / "sentences.txt"
    text.write_text("".join(" ".join(fixture_sentences[k][i]) + "\n" for i in range(10) for k in range(3)))
    argv = ["embed", str(text), str(tmp_path / "out.hdf5"), "--all", "--initial-state", "carry", "--batch-size", "3"]
    argv += ["--precision", "fp32"]  # exact, also where auto would pick bf16
    assert cli_main([*argv, "--model", str(archive)]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        for i in range(10):
            for k in range(3):
                np.testing.assert_allclose(f[str(3 * i + k)][2], fixture_expected[k][i], atol=1e-6, rtol=0)


@pytest.mark.slow
def test_python_api_stateful_on_an_archive_matches_bilm_tf(tmp_path, fixture_dir, fixture_sentences, fixture_expected):
    bilm = StatefulBiLM(load_bilm(pack(tmp_path / "m.zip", nlpl_files(fixture_dir))))
    with torch.no_grad():
        for i in range(10):
            batch = [fixture_sentences[k][i] for k in range(3)]
            top = bilm(batch_to_ids(batch, add_sentence_boundaries=True)).layers[-1]
            for k, sentence in enumerate(batch):
                np.testing.assert_allclose(top[k, 1 : len(sentence) + 1], fixture_expected[k][i], atol=1e-6, rtol=0)


@pytest.mark.parametrize("vocab_gz", [True, False], ids=["vocab.txt.gz", "vocab.txt"])
def test_meta_and_vocabulary_are_available(tmp_path, fixture_dir, caplog, vocab_gz):
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir, "m/", vocab_gz=vocab_gz))
    with open_archive(archive) as opened:
        assert opened.family == "bilm-tf" and opened.folder == "m/"
        assert opened.meta == META
        assert opened.vocabulary().words == VOCAB
    assert read_meta(archive) == META
    with caplog.at_level("INFO"):
        load_bilm(archive)
    line = "NLPL id 195; corpus: Russian National Corpus, rus, not lemmatized, 989000000 tokens; algorithm: ELMo"
    assert describe_meta(META) == line
    assert f"{archive}: bilm-tf model" in caplog.text and line in caplog.text


def test_extracted_nlpl_directory_loads_too(tmp_path, fixture_dir, caplog):
    """An unzipped NLPL archive: options.json + model.hdf5 (+ meta.json, vocab)."""
    directory = tmp_path / "195"
    directory.mkdir()
    for name, data in nlpl_files(fixture_dir).items():
        (directory / name).write_bytes(data)
    with caplog.at_level("INFO"):
        bilm = load_bilm(directory)
    assert torch.equal(bilm.state_dict()["forward_lstm.layers.0.projection.weight"],
                       fixture_bilm(fixture_dir).state_dict()["forward_lstm.layers.0.projection.weight"])
    assert read_meta(directory) == META and "NLPL id 195" in caplog.text


def test_any_one_hdf5_name_is_the_weights(tmp_path, fixture_dir):
    files = {"options.json": (fixture_dir / "options.json").read_bytes(),
             "lm_weights.hdf5": (fixture_dir / "lm_weights.hdf5").read_bytes()}
    bilm = load_bilm(pack(tmp_path / "one.zip", files))
    assert torch.equal(bilm.state_dict()["token_encoder.char_embedding.weight"],
                       fixture_bilm(fixture_dir).state_dict()["token_encoder.char_embedding.weight"])


def test_convert_an_archive_to_native(tmp_path, fixture_dir):
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir, "195/"))
    assert cli_main(["convert", "--model", str(archive), str(tmp_path / "native"), "--to", "native"]) == 0
    for (name, a), (_, b) in zip(load_bilm(tmp_path / "native").state_dict().items(),
                                 fixture_bilm(fixture_dir).state_dict().items()):
        assert torch.equal(a, b), name


def test_model_config_and_detection(tmp_path, fixture_dir):
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir, "x/"))
    assert recognise(archive).name == "zip"
    assert read_model_config(archive) == read_options(fixture_dir / "options.json")


@pytest.mark.parametrize("n_characters", [261, 262])
def test_a_262_row_character_table_and_either_n_characters_load(tmp_path, fixture_dir, n_characters):
    """bilm-tf and AllenNLP prepend the padding row to whatever char_embed holds; ids stop at 261, so a 262-row
    table's last row is never used, and options.json's n_characters is not what decides."""
    weights = tmp_path / "weights.hdf5"
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as src, h5py.File(weights, "w") as dst:
        names: list[str] = []
        src.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        for name in names:
            if name != "char_embed":
                dst.create_dataset(name, data=src[name][...])
        table = src["char_embed"][...]
        assert table.shape == (261, 4)
        dst.create_dataset("char_embed", data=np.concatenate([table, np.full((1, 4), 7.0, np.float32)]))
    options = json.loads((fixture_dir / "options.json").read_text())
    options["char_cnn"]["n_characters"] = n_characters
    files = {"options.json": json.dumps(options).encode(), "model.hdf5": weights.read_bytes()}
    archive = pack(tmp_path / "m.zip", files)
    sentences = [["Grüße", "aus", "<S>", "ðŸ"], ["x"]]
    for a, b in zip(_layers(load_bilm(archive), sentences), _layers(fixture_bilm(fixture_dir), sentences)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("folder", ["", "de.model/"], ids=["top-level", "in-a-folder"])
def test_the_manylangs_family_is_told_apart_and_loads_like_its_directory(tmp_path, caplog, folder):
    """NLPL archive type (b): the same model as ELMoForManyLangs' directory, through load_bilm and elmo embed."""
    directory = write_manylangs_model(tmp_path / "de.model")
    files = {f"{folder}{path.name}": path.read_bytes() for path in sorted(directory.iterdir())}
    archive = pack(tmp_path / "142.zip", {**files, "meta.json": json.dumps({"id": 142}).encode()})
    with open_archive(archive) as opened:
        assert opened.family == "manylangs" and opened.folder == folder
    with caplog.at_level("INFO"):
        from_zip = load_bilm(archive)
    assert f"{archive}: an ELMoForManyLangs model (char.dic, cnn_50_100_512_4096_sample.json, config.json" \
        in caplog.text
    assert "NLPL archive type (b); loading it with the ManyLangs reader; NLPL id 142" in caplog.text
    from_dir = load_bilm(directory)
    for (name, a), (_, b) in zip(from_zip.state_dict().items(), from_dir.state_dict().items()):
        assert torch.equal(a, b), name
    assert read_model_config(archive) == read_model_config(directory)
    text = tmp_path / "in.txt"
    text.write_text("Grüße aus Köln\n今天 天氣\n")
    for model in (archive, directory):
        assert cli_main(["embed", str(text), str(tmp_path / f"{model.name}.hdf5"), "--all", "--model", str(model)]) == 0
    with h5py.File(tmp_path / "142.zip.hdf5", "r") as a, h5py.File(tmp_path / "de.model.hdf5", "r") as b:
        for key in ("0", "1"):
            np.testing.assert_array_equal(a[key][...], b[key][...])


def test_a_damaged_manylangs_archive_names_archive_and_member(tmp_path):
    directory = write_manylangs_model(tmp_path / "de.model")
    files = {path.name: path.read_bytes() for path in sorted(directory.iterdir())}
    archive = pack(tmp_path / "142.zip", files, zipfile.ZIP_STORED)
    _flip_byte_in_member(archive, "encoder.pkl", 200)
    with pytest.raises(WeightFileError, match=r"142\.zip/encoder\.pkl: damaged archive member \(Bad CRC-32 for file "
                                              r"'encoder\.pkl'"):
        load_bilm(archive)


def _flip_byte_in_member(archive: Path, member: str, at: int) -> None:
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
    data = bytearray(archive.read_bytes())
    header = info.header_offset
    start = header + 30 + int.from_bytes(data[header + 26 : header + 28], "little")
    start += int.from_bytes(data[header + 28 : header + 30], "little")
    data[start + at] ^= 0xFF
    archive.write_bytes(bytes(data))


def _broken(kind: str, tmp_path: Path, fixture_dir: Path) -> Path:
    good = nlpl_files(fixture_dir)
    path = tmp_path / f"{kind}.zip"
    if kind == "not-a-zip":
        path.write_bytes(b"PK\x03\x04 this is not really a zip archive")
    elif kind == "truncated":
        whole = pack(tmp_path / "whole.zip", good).read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    elif kind in ("bad-crc", "bad-deflate"):
        stored = kind == "bad-crc"
        pack(path, good, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
        _flip_byte_in_member(path, "model.hdf5", 5000 if stored else 100)
    elif kind == "neither-family":
        pack(path, {"model.hdf5": good["model.hdf5"], "meta.json": good["meta.json"]})
    elif kind == "too-deep":
        pack(path, {f"a/b/{name}": data for name, data in good.items()})
    elif kind == "several-places":
        pack(path, {**good, **{f"b/{name}": data for name, data in good.items()}})
    elif kind == "bad-json":
        pack(path, {**good, "options.json": b'{"lstm": {\n  "dim": }'})
    elif kind == "bad-options":
        options = json.loads(good["options.json"])
        del options["lstm"]["projection_dim"]
        pack(path, {**good, "options.json": json.dumps(options).encode()})
    elif kind == "wrong-weights":
        options = json.loads(good["options.json"])
        options["lstm"]["dim"] = 32
        pack(path, {**good, "options.json": json.dumps(options).encode()})
    elif kind == "no-weights":
        pack(path, {"options.json": good["options.json"], "vocab.txt": b"a\n"})
    elif kind == "two-weights":
        pack(path, {"options.json": good["options.json"], "a.hdf5": good["model.hdf5"], "b.hdf5": b""})
    elif kind == "not-hdf5":
        pack(path, {"options.json": good["options.json"], "model.hdf5": b"not an HDF5 file"})
    elif kind == "native-model":
        pack(path, {"config.json": b"{}", "model.safetensors": b""})
    return path


BROKEN = {
    "not-a-zip": (WeightFileError, r"not-a-zip\.zip: not a readable zip archive \("),
    "truncated": (WeightFileError, r"truncated\.zip: not a readable zip archive \("),
    "bad-crc": (WeightFileError, r"model\.hdf5 in .*bad-crc\.zip: damaged archive member \(Bad CRC-32"),
    "bad-deflate": (WeightFileError, r"model\.hdf5 in .*bad-deflate\.zip: damaged archive member \("),
    "neither-family": (WeightFileError, r"neither-family\.zip: neither a bilm-tf archive \(options\.json \+ \*\.hdf5"),
    "too-deep": (WeightFileError, r"too-deep\.zip: neither a bilm-tf archive"),
    "several-places": (WeightFileError, r"several-places\.zip: models in several places \(\(top level\), b/\)"),
    "bad-json": (ConfigError, r"options\.json in .*bad-json\.zip: invalid JSON at line 2"),
    "bad-options": (ConfigError, r"options\.json in .*bad-options\.zip: missing required key 'lstm\.projection_dim'"),
    "wrong-weights": (WeightFileError, r"model\.hdf5 in .*wrong-weights\.zip: dataset '.*' has shape"),
    "no-weights": (WeightFileError, r"no-weights\.zip: options\.json but no weights"),
    "two-weights": (WeightFileError, r"two-weights\.zip: several weight files \(a\.hdf5, b\.hdf5\)"),
    "not-hdf5": (WeightFileError, r"model\.hdf5 in .*not-hdf5\.zip: not a readable HDF5 file"),
    "native-model": (WeightFileError, r"native-model\.zip: neither a bilm-tf archive"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_archive_gives_one_line_naming_archive_and_member(
    tmp_path, fixture_dir, private_tempdir, capsys, kind
):
    archive = _broken(kind, tmp_path, fixture_dir)
    error, message = BROKEN[kind]
    with pytest.raises(error, match=message) as raised:
        load_bilm(archive)
    assert "\n" not in str(raised.value)
    assert not list(private_tempdir.iterdir())
    text = tmp_path / "in.txt"
    text.write_text("a b\n")
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", str(archive)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("elmo: error: ")


def test_an_unreadable_meta_json_is_skipped_with_a_warning(tmp_path, fixture_dir, caplog):
    archive = pack(tmp_path / "m.zip", {**nlpl_files(fixture_dir), "meta.json": b"{not json"})
    with caplog.at_level("WARNING"):
        load_bilm(archive)
    assert "meta.json in" in caplog.text and "invalid JSON at line 1" in caplog.text


def test_embedding_file_goes_with_a_directory(tmp_path, fixture_dir):
    with pytest.raises(ConfigError, match=r"m.zip: embedding_file goes with an original model \(options.json \+ "
                       r"weights.hdf5\); this is a model archive \(.zip\)$"):
        load_bilm(pack(tmp_path / "m.zip", nlpl_files(fixture_dir)), embedding_file=tmp_path / "e.hdf5")


def test_a_missing_archive_is_named(tmp_path):
    with pytest.raises(ElmoError, match="nowhere.zip: no such model directory or archive"):
        load_bilm(tmp_path / "nowhere.zip")
