"""Published models by name (``--model original``): downloaded once into a cache, verified, usable offline.

The registry (``published_models.json``, or the file named by ``ELMO_MODEL_REGISTRY``) maps a name to its files'
URLs and sha256 checksums. Files are stored as ``$ELMO_HOME/models/NAME/{options.json,weights.hdf5}`` (default
ELMO_HOME: ``$XDG_CACHE_HOME/elmo`` or ``~/.cache/elmo``), so the directory loads like any model directory.

Trust: a download goes to a temp file and is renamed into place only after its checksum matches the registry.
Where the registry has no checksum, the first download's sha256 is recorded in ``checksums.json`` next to the
files, and every later use is checked against it (a file changed on disk is refused). A cached model never
touches the network; ``ELMO_OFFLINE=1`` forbids downloads altogether.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import torch

from elmo.errors import ElmoError, WeightFileError
from elmo.formats.model_files import load_bilm
from elmo.formats.native import NATIVE_WEIGHTS_FILE, save_native
from elmo.runtime.atomic_files import default_permissions

log = logging.getLogger(__name__)

REGISTRY_FILE = Path(__file__).with_name("published_models.json")
CHECKSUMS_FILE = "checksums.json"
BLOCK = 1 << 20


class ModelDownloadError(ElmoError):
    """A published model cannot be found, fetched or verified."""


def elmo_home() -> Path:
    if "ELMO_HOME" in os.environ:
        return Path(os.environ["ELMO_HOME"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "elmo"


def read_registry(path: str | os.PathLike | None = None) -> dict[str, dict]:
    path = Path(path or os.environ.get("ELMO_MODEL_REGISTRY") or REGISTRY_FILE)
    try:
        registry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelDownloadError(f"{path}: cannot read the model registry ({e})") from e
    return {name: entry for name, entry in registry.items() if not name.startswith("_")}


def fetch_model(
    name: str,
    home: str | os.PathLike | None = None,
    registry: dict[str, dict] | None = None,
    offline: bool | None = None,
) -> Path:
    """The cache directory of published model ``name``, downloading what is missing; every file is verified."""
    registry = read_registry() if registry is None else registry
    if name not in registry:
        known = ", ".join(sorted(registry))
        raise ModelDownloadError(f"--model {name}: neither a model directory nor a published model ({known})")
    offline = os.environ.get("ELMO_OFFLINE", "") not in ("", "0") if offline is None else offline
    directory = Path(home or elmo_home()) / "models" / name
    files = registry[name]["files"]
    for filename, source in files.items():
        target = directory / filename
        if not target.is_file():
            if offline:
                raise ModelDownloadError(_how_to_get(name, directory, files, "offline mode (ELMO_OFFLINE) is on"))
            _download(source["url"], target, source.get("sha256"), name, directory, files)
        _verify(target, source.get("sha256"))
    return directory


def _download(url: str, target: Path, sha256: str | None, name: str, directory: Path, files: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    log.info("downloading %s to %s", url, target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".download", dir=directory)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    while block := response.read(BLOCK):
                        digest.update(block)
                        out.write(block)
            except (urllib.error.URLError, OSError) as e:
                raise ModelDownloadError(_how_to_get(name, directory, files, f"download of {url} failed: {e}")) from e
        got = digest.hexdigest()
        if sha256 is not None and got != sha256:
            raise ModelDownloadError(f"{url}: sha256 {got} does not match the registry's {sha256}; nothing was saved")
        default_permissions(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sha256 is None:
        _record_checksum(target, got)


def _verify(path: Path, sha256: str | None) -> None:
    expected = sha256 or _recorded_checksums(path.parent).get(path.name)
    if expected is None:  # cached before checksums were recorded: trust it now, check it from now on
        _record_checksum(path, _sha256(path))
        return
    got = _sha256(path)
    if got != expected:
        raise ModelDownloadError(
            f"{path}: sha256 {got} differs from the expected {expected}; delete the file to download it again"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _recorded_checksums(directory: Path) -> dict[str, str]:
    path = directory / CHECKSUMS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _record_checksum(path: Path, sha256: str) -> None:
    from elmo.runtime.atomic_files import write_text_atomic

    checksums = _recorded_checksums(path.parent) | {path.name: sha256}
    write_text_atomic(path.parent / CHECKSUMS_FILE, json.dumps(checksums, indent=2, sort_keys=True) + "\n")


def _how_to_get(name: str, directory: Path, files: dict, reason: str) -> str:
    urls = " and ".join(f"{source['url']} as {directory / filename}" for filename, source in files.items())
    return (
        f"model '{name}' is not in the cache and cannot be downloaded ({reason}); "
        f"download {urls}, or pass a model directory"
    )


def resolve_model(model: str) -> Path:
    """``--model`` value -> a model directory: an existing directory as is, else a published model's cache dir."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    return fetch_model(model)


DEMO_DIR = Path(__file__).resolve().parents[1] / "pretrained" / "demo"
"""The small biLM shipped inside the package (the ``cpu`` preset's architecture, trained on public-domain novels;
see its README.md), so that ELMo works offline on a fresh machine."""


def demo_model_dir() -> Path:
    """The shipped demo model (native format: config.json + fp16 model.safetensors)."""
    if not (DEMO_DIR / NATIVE_WEIGHTS_FILE).is_file():
        raise WeightFileError(f"{DEMO_DIR}: the demo model is not installed with this copy of the package")
    return DEMO_DIR


def pack_half_precision(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Re-save any model directory in the native format with float16 tensors (half the size; loads as float32)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_native(load_bilm(model_dir), out, dtype=torch.float16)
    return out
