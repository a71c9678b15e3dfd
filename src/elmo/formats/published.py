"""Published models by name (``--model original``): downloaded once into a cache, verified, usable offline.

The registry (``published_models.json``, or the file named by ``ELMO_MODEL_REGISTRY``) maps a name to its family
(bilm-tf, manylangs, ...), language, source and files: the files' URLs and sha256 checksums. Files are stored as
``$ELMO_HOME/models/NAME/{options.json,weights.hdf5}`` or ``$ELMO_HOME/models/NAME/model.zip`` (default ELMO_HOME:
``$XDG_CACHE_HOME/elmo`` or ``~/.cache/elmo``), so the directory, or the archive, loads like any other model.

Trust: a download goes to a temp file and is renamed into place only after its checksum matches the registry.
Where the registry has no checksum, the first download's sha256 is recorded in ``checksums.json`` next to the
files, and every later use is checked against it (a file changed on disk is refused). A cached model never
touches the network; ``ELMO_OFFLINE=1`` forbids downloads altogether.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

from elmo.errors import ElmoError, WeightFileError
from elmo.formats.locations import PRETRAINED_DIR, elmo_home
from elmo.formats.model_formats import load_path, recognise
from elmo.formats.native import NATIVE_WEIGHTS_FILE, save_native
from elmo.runtime.atomic_files import default_permissions
from elmo.runtime.hashing import sha256_file, stream_sha256

log = logging.getLogger(__name__)

REGISTRY_FILE = Path(__file__).with_name("published_models.json")
CHECKSUMS_FILE = "checksums.json"


class ModelDownloadError(ElmoError):
    """A published model cannot be found, fetched or verified."""


def read_registry(path: str | os.PathLike | None = None) -> dict[str, dict]:
    path = Path(path or os.environ.get("ELMO_MODEL_REGISTRY") or REGISTRY_FILE)
    try:
        registry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelDownloadError(f"{path}: cannot read the model registry ({e})") from e
    entries = {name: entry for name, entry in registry.items() if not name.startswith("_")}
    for name, entry in entries.items():
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(files, dict) or not files or not all(isinstance(f, dict) and "url" in f
                                                                for f in files.values()):
            raise ModelDownloadError(f"{path}: model '{name}' has no 'files' with a 'url' each")
    return entries


def model_path(directory: Path, entry: dict) -> Path:
    """What loads: the cache directory, or the archive in it when the model is published as one zip (or as one
    TF-Hub module ``.tar.gz``/``.tgz``)."""
    archives = [name for name in entry["files"] if name.endswith((".zip", ".tar.gz", ".tgz"))]
    return directory / archives[0] if len(archives) == 1 and len(entry["files"]) == 1 else directory


@dataclass(frozen=True)
class PublishedModel:
    """One row of ``elmo models``."""

    name: str
    family: str
    language: str
    size: int | str | None
    """Bytes on disk when cached, else the registry's size (bytes or an estimate such as "~54 MB"), if known."""
    cached: bool
    description: str
    urls: tuple[str, ...]
    source: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def list_models(registry: dict[str, dict] | None = None, home: str | os.PathLike | None = None) -> list[PublishedModel]:
    """The shipped models (no download: ``demo``, ``models/*``), then every published model, with whether its
    files are in the cache (nothing is downloaded or verified)."""
    registry = read_registry() if registry is None else registry
    rows = [PublishedModel(name, "shipped", "English", sum(p.stat().st_size for p in path.iterdir() if p.is_file()),
                           True, f"shipped in {path}", (), "") for name, path in shipped_models().items()]
    for name, entry in registry.items():
        directory = Path(home or elmo_home()) / "models" / name
        paths = [directory / filename for filename in entry["files"]]
        cached = all(p.is_file() for p in paths)
        size = sum(p.stat().st_size for p in paths) if cached else entry.get("size")
        urls = tuple(source["url"] for source in entry["files"].values())
        rows.append(PublishedModel(name, entry.get("family", "bilm-tf"), entry.get("language", "?"), size, cached,
                                   entry.get("description", ""), urls, entry.get("source", "")))
    return rows


def fetch_model(
    name: str,
    home: str | os.PathLike | None = None,
    registry: dict[str, dict] | None = None,
    offline: bool | None = None,
) -> Path:
    """The cache directory of published model ``name``, downloading what is missing; every file is verified. A
    shipped model's name gives its folder in the package (nothing to fetch).

    :meth:`elmo.formats.model_ref.ModelRef.path` gives what loads (this directory, or the ``model.zip`` in it).
    """
    if name in (shipped := shipped_models()):
        return shipped[name]
    registry = read_registry() if registry is None else registry
    if name not in registry:
        raise ModelDownloadError(
            f"{name}: not a published model (`elmo models` lists the {len(registry)} published ones)"
        )
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
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    got = stream_sha256(response, out.write)
            except (urllib.error.URLError, OSError) as e:
                raise ModelDownloadError(_how_to_get(name, directory, files, f"download of {url} failed: {e}")) from e
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
        _record_checksum(path, sha256_file(path))
        return
    got = sha256_file(path)
    if got != expected:
        raise ModelDownloadError(
            f"{path}: sha256 {got} differs from the expected {expected}; delete the file to download it again"
        )


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
        f"download {urls}, or pass a model directory or archive"
    )


DEMO_DIR = PRETRAINED_DIR / "demo"


def shipped_models() -> dict[str, Path]:
    """Name -> directory of the models that need no download (``src/elmo/pretrained/NAME``)."""
    if not PRETRAINED_DIR.is_dir():
        return {}
    found = [p for p in PRETRAINED_DIR.iterdir() if p.is_dir() and recognise(p) is not None]
    return {p.name: p for p in sorted(found, key=lambda p: (p.name != "demo", p.name))}  # demo first


def demo_model_dir() -> Path:
    """The shipped demo model (native format: config.json + fp16 model.safetensors)."""
    if not (DEMO_DIR / NATIVE_WEIGHTS_FILE).is_file():
        raise WeightFileError(f"{DEMO_DIR}: the demo model is not installed with this copy of the package")
    return DEMO_DIR


def pack_half_precision(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Re-save any model directory in the native format with float16 tensors (half the size; loads as float32)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_native(load_path(model_dir), out, dtype=torch.float16)
    return out
