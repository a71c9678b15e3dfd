"""Published-model downloads, served from a local HTTP server on 127.0.0.1 (no other address is ever used)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from functools import partial
from pathlib import Path

import pytest

from elmo.cli import main as cli_main
from elmo.formats.model_files import save_bilm
from elmo.formats.published import ModelDownloadError, fetch_model
from tests.conftest import random_bilm


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
    from elmo.formats.published import read_registry

    registry = read_registry()
    assert {"original", "5.5B", "medium", "small"} <= set(registry)
    for entry in registry.values():
        assert set(entry["files"]) == {"options.json", "weights.hdf5"}
