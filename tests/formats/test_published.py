"""Published-model downloads, served from a local HTTP server on 127.0.0.1 (no other address is ever used)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest
import torch

from elmo.cli import main as cli_main
from elmo.errors import ConfigError
from elmo.formats.model_files import save_bilm
from elmo.formats.model_ref import ModelRef
from elmo.formats.published import ModelDownloadError, fetch_model
from tests.conftest import random_bilm
from tests.formats.manylangs_files import write_manylangs_model


@pytest.fixture
def served(tmp_path: Path):
    """A model's files behind http://127.0.0.1:PORT/, and a registry entry for them."""
    root = save_bilm(random_bilm(), tmp_path / "served")
    handler = partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    files = {name: {"url": f"{base}/{name}", "sha256": None} for name in ("options.json", "weights.hdf5")}
    yield root, {"tiny": {"description": "test", "files": files}}
    server.shutdown()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_once_then_offline(tmp_path, served):
    root, registry = served
    home = tmp_path / "home"
    directory = fetch_model("tiny", home=home, registry=registry)
    assert (directory / "weights.hdf5").read_bytes() == (root / "weights.hdf5").read_bytes()
    recorded = json.loads((directory / "checksums.json").read_text())
    assert recorded["weights.hdf5"] == _sha(root / "weights.hdf5")
    # Cached: no network needed (the URLs now point nowhere).
    for source in registry["tiny"]["files"].values():
        source["url"] = "http://127.0.0.1:9/unreachable"
    assert fetch_model("tiny", home=home, registry=registry, offline=True) == directory
    # A cached file that changed on disk is refused.
    with open(directory / "weights.hdf5", "ab") as f:
        f.write(b"tampered")
    with pytest.raises(ModelDownloadError, match="differs from the expected"):
        fetch_model("tiny", home=home, registry=registry)


def test_wrong_checksum_is_refused_and_leaves_nothing(tmp_path, served):
    _, registry = served
    registry["tiny"]["files"]["weights.hdf5"]["sha256"] = "0" * 64
    home = tmp_path / "home"
    with pytest.raises(ModelDownloadError, match="does not match the registry"):
        fetch_model("tiny", home=home, registry=registry)
    leftovers = [p.name for p in (home / "models" / "tiny").iterdir()]
    assert "weights.hdf5" not in leftovers and not [n for n in leftovers if n.endswith(".download")]


def test_registry_checksum_accepted(tmp_path, served):
    root, registry = served
    for name, source in registry["tiny"]["files"].items():
        source["sha256"] = _sha(root / name)
    directory = fetch_model("tiny", home=tmp_path / "home", registry=registry)
    assert not (directory / "checksums.json").exists()


def test_missing_model_offline_says_how_to_get_it(tmp_path, served):
    _, registry = served
    with pytest.raises(ModelDownloadError, match="download http://127.0.0.1:.*/options.json as .*options.json"):
        fetch_model("tiny", home=tmp_path / "home", registry=registry, offline=True)


def test_cli_embeds_with_a_published_name(tmp_path, served, monkeypatch):
    _, registry = served
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps(registry))
    monkeypatch.setenv("ELMO_MODEL_REGISTRY", str(registry_file))
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    text = tmp_path / "in.txt"
    text.write_text("hello world\n", encoding="utf-8")
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", "tiny"]) == 0
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", "nonesuch"]) == 1


def test_shipped_registry_lists_the_published_models():
    from elmo.formats.published import REGISTRY_FILE, read_registry

    registry = read_registry()
    sources = json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))["_sources"]
    assert {"original", "5.5B", "medium", "small", "pubmed", "portuguese", "nlpl-195", "manylangs-ru"} <= set(registry)
    for name, entry in registry.items():
        assert entry["family"] in ("bilm-tf", "manylangs", "aligned", "tf-hub"), name
        assert entry["language"] and entry["description"] and entry["source"] in sources, name
        assert set(entry["files"]) in ({"options.json", "weights.hdf5"}, {"model.zip"}, {"module.tar.gz"}), name
    manylangs = {name: entry for name, entry in registry.items() if entry["family"] == "manylangs"}
    ids = sorted(int(entry["files"]["model.zip"]["url"].rsplit("/", 1)[1][:-4]) for entry in manylangs.values())
    assert ids == list(range(136, 180))  # the 44 languages, one NLPL archive each


def test_the_docs_models_table_names_every_published_model():
    from elmo.formats.published import read_registry

    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    section = doc.split("\n## Published models\n", 1)[1].split("\n## ", 1)[0]
    for name, entry in read_registry().items():
        if entry["family"] == "manylangs":
            assert f"`{name.split('-', 1)[1]}`" in section, name
        else:
            assert f"`{name}`" in section, name


@pytest.fixture
def served_archives(tmp_path: Path):
    """A bilm-tf model and an ELMoForManyLangs-type model, each one zip behind http://127.0.0.1:PORT/."""
    root = tmp_path / "archives"
    model_dir = save_bilm(random_bilm(), tmp_path / "model")
    with zipfile.ZipFile(root.parent / "bilm.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(model_dir / "options.json", "ru/options.json")
        zf.write(model_dir / "weights.hdf5", "ru/model.hdf5")
        zf.writestr("ru/meta.json", json.dumps({"id": 195}))
    manylangs_dir = write_manylangs_model(tmp_path / "zh.model")
    with zipfile.ZipFile(root.parent / "manylangs.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(manylangs_dir.iterdir()):
            zf.write(path, f"zh.model/{path.name}")
    root.mkdir()
    for name in ("bilm.zip", "manylangs.zip"):
        (root.parent / name).rename(root / name)
    handler = partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    registry = {
        "tiny-nlpl": {"family": "bilm-tf", "language": "Russian", "size": None, "description": "test", "source": "t",
                      "files": {"model.zip": {"url": f"{base}/bilm.zip", "sha256": _sha(root / "bilm.zip")}}},
        "tiny-manylangs": {"family": "manylangs", "language": "Chinese", "size": 1234, "description": "test",
                           "source": "t", "files": {"model.zip": {"url": f"{base}/manylangs.zip", "sha256": None}}},
    }
    yield model_dir, registry, manylangs_dir
    server.shutdown()
    thread.join()


def _use_registry(tmp_path, monkeypatch, registry) -> Path:
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps(registry))
    monkeypatch.setenv("ELMO_MODEL_REGISTRY", str(registry_file))
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "models"


def test_archive_entries_download_verify_and_load(tmp_path, served_archives, monkeypatch):
    from elmo.formats.archives import open_archive
    from elmo.formats.model_files import load_bilm
    from elmo.formats.model_ref import ModelRef

    model_dir, registry, manylangs_dir = served_archives
    cache = _use_registry(tmp_path, monkeypatch, registry)
    for name, directory in (("tiny-nlpl", model_dir), ("tiny-manylangs", manylangs_dir)):
        path = ModelRef.parse(name).path()
        assert path == cache / name / "model.zip"
        for (key, a), (_, b) in zip(load_bilm(path).state_dict().items(), load_bilm(directory).state_dict().items()):
            assert torch.equal(a, b), key
    assert not (cache / "tiny-nlpl" / "checksums.json").exists()  # the registry's sha256 was checked
    recorded = json.loads((cache / "tiny-manylangs" / "checksums.json").read_text())
    assert recorded == {"model.zip": _sha(path)}  # no published checksum: the first download's is recorded
    with open_archive(path) as archive:
        assert archive.family == "manylangs"

    # Cached: no network (the server is gone from the registry), offline mode on.
    for entry in registry.values():
        entry["files"]["model.zip"]["url"] = "http://127.0.0.1:9/unreachable"
    _use_registry(tmp_path, monkeypatch, registry)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    text = tmp_path / "in.txt"
    text.write_text("hello world\n", encoding="utf-8")
    for name in ("tiny-nlpl", "tiny-manylangs"):
        assert cli_main(["embed", str(text), str(tmp_path / f"{name}.hdf5"), "--top", "--model", name]) == 0


def test_a_wrong_archive_checksum_is_refused(tmp_path, served_archives, monkeypatch):
    _, registry, _ = served_archives
    registry["tiny-nlpl"]["files"]["model.zip"]["sha256"] = "0" * 64
    cache = _use_registry(tmp_path, monkeypatch, registry)
    with pytest.raises(ModelDownloadError, match="does not match the registry"):
        fetch_model("tiny-nlpl")
    assert not (cache / "tiny-nlpl" / "model.zip").exists()


def test_models_command_lists_family_language_size_and_cache(tmp_path, served_archives, monkeypatch, capsys):
    from elmo.formats.model_ref import ModelRef

    _, registry, _ = served_archives
    _use_registry(tmp_path, monkeypatch, registry)
    assert cli_main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "family", "language", "size", "cached"]
    shipped = [line.split() for line in lines[1:] if line.split()[1] == "shipped"]
    assert shipped[0][0] == "demo" and all(row[-1] == "yes" for row in shipped)  # listed first, never downloaded
    lines = lines[len(shipped):]
    assert lines[1].split() == ["tiny-nlpl", "bilm-tf", "Russian", "?", "no"]
    assert lines[2].split() == ["tiny-manylangs", "manylangs", "Chinese", "1.2", "kB", "no"]  # the registry's size

    size = ModelRef.parse("tiny-nlpl").path().stat().st_size
    assert cli_main(["models", "--json", "--family", "bilm-tf"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["name"] == "tiny-nlpl" and row["cached"] is True and row["size"] == size
    assert row["urls"] == [registry["tiny-nlpl"]["files"]["model.zip"]["url"]]


def test_an_unknown_name_points_to_the_models_command(tmp_path, served_archives, monkeypatch):
    _, registry, _ = served_archives
    _use_registry(tmp_path, monkeypatch, registry)
    with pytest.raises(ModelDownloadError, match=r"^nonesuch: not a published model \(`elmo models` lists the 2 "):
        fetch_model("nonesuch")
    with pytest.raises(ConfigError, match=r"^nonesuch: no such model: neither a model directory or archive, "
                       r"a shipped model \(demo, corpus\) nor one of the 2 published models \(`elmo models`"):
        ModelRef.parse("nonesuch")


def test_shipped_models_resolve_by_name_without_the_network(tmp_path, monkeypatch):
    import elmo.formats.published as published

    save_bilm(random_bilm(), tmp_path / "pretrained" / "corpus", native=True)
    (tmp_path / "pretrained" / "demo").symlink_to(published.DEMO_DIR)
    (tmp_path / "pretrained" / "warm").mkdir()  # not a model: not listed
    monkeypatch.setattr(published, "PRETRAINED_DIR", tmp_path / "pretrained")
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert ModelRef.parse("corpus").path() == tmp_path / "pretrained" / "corpus"
    assert ModelRef.parse("demo").path() == tmp_path / "pretrained" / "demo"
    assert published.fetch_model("demo") == tmp_path / "pretrained" / "demo"  # a shipped name needs no fetching
    assert list(published.shipped_models()) == ["demo", "corpus"]
    rows = published.list_models()
    assert [(r.name, r.family, r.cached) for r in rows[:2]] == [("demo", "shipped", True), ("corpus", "shipped", True)]
