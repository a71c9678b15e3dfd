"""Model archives: a zip that holds a model's files (the NLPL repository's downloads), read in place.

The family is told by the files the archive holds, at its top or inside one folder:

* bilm-tf (NLPL type a; also any zipped original model): ``options.json``, the weights (``model.hdf5`` or
  ``weights.hdf5``, else the one ``*.hdf5``), optional ``vocab.txt`` / ``vocab.txt.gz`` and ``meta.json``;
* ELMoForManyLangs (NLPL type b, ids 136-179): ``config.json`` with ``char.dic`` / ``word.dic`` /
  ``encoder.pkl`` / ``token_embedder.pkl``, read by :mod:`elmo.formats.manylangs` through ``zipfile.Path``.

Only the members the family needs are read, each within the caps of :mod:`elmo.formats.archive_limits` (its
declared size and compression ratio are checked before a byte of it is inflated). The small ones (JSON, the
dictionaries) are read into memory; the weights member is streamed, a chunk at a time, into a temporary file that h5py
(or ``torch.load``) opens and that is removed when the model has loaded, whatever happens: h5py reading a deflated
member in place seeks backwards, and every backward seek restarts the decompression (a 374 MB deflated member:
93-106 s instead of 6-9 s; docs/formats.md has the measurement, benchmarks/archive_load.py the script), and holding
the member in memory would cost its size again on top of the model.
"""

from __future__ import annotations

import gzip
import logging
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from elmo.config import BiLMConfig
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.archive_limits import ZIP_READ_ERRORS, check_member_count, extract_zip_member, read_zip_member
from elmo.formats.manylangs import load_manylangs, read_manylangs_config
from elmo.formats.original import OPTIONS_FILE, load_original, pick_weights
from elmo.modules.bilm import BiLM
from elmo.runtime.text_files import parse_json
from elmo.text.vocab import Vocabulary

log = logging.getLogger(__name__)

BILM_TF = "bilm-tf"
MANYLANGS = "manylangs"

OPTIONS_MEMBER = OPTIONS_FILE
VOCAB_MEMBERS = ("vocab.txt", "vocab.txt.gz")
META_MEMBER = "meta.json"
MANYLANGS_CONFIG = "config.json"
MANYLANGS_MARKERS = ("char.dic", "word.dic", "encoder.pkl", "token_embedder.pkl")
"""Beside config.json, any of these marks an ELMoForManyLangs model (our native config.json comes with
model.safetensors instead)."""
T = TypeVar("T")


def is_archive(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file to read as a model archive (a zip, or a file named ``*.zip``)."""
    path = Path(path)
    return path.is_file() and (path.suffix.lower() == ".zip" or zipfile.is_zipfile(path))


@dataclass
class ModelArchive:
    """An open model archive: which family, where its files are, and its optional vocabulary and metadata.

    Use as a context manager (``with open_archive(path) as archive: ...``); it closes the zip file.
    """

    path: Path
    zip_file: zipfile.ZipFile
    family: str
    folder: str
    """The members' common folder inside the archive, '' (top level) or 'name/'."""
    members: list[str] = field(default_factory=list)
    """The model's file names (relative to ``folder``)."""

    def __enter__(self) -> ModelArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.zip_file.close()

    def label(self, member: str, folder: str | None = None) -> str:
        """How messages name a member: ``options.json in path/to/model.zip``."""
        return f"{self.folder if folder is None else folder}{member} in {self.path}"

    def read(self, member: str, folder: str | None = None) -> bytes:
        """The bytes of ``member`` of the model's folder (or of ``folder``), within the caps, CRC-checked."""
        name = (self.folder if folder is None else folder) + member
        try:
            self.zip_file.getinfo(name)
        except KeyError as e:
            raise WeightFileError(f"{self.path}: no member {name}") from e
        return read_zip_member(self.zip_file, name, self.label(member, folder))

    def read_json(self, member: str, folder: str | None = None) -> Any:
        return parse_json(self.read(member, folder), self.label(member, folder), ConfigError)

    @property
    def weights(self) -> str:
        return pick_weights(self.members, str(self.path) + (f" ({self.folder})" if self.folder else ""))

    @property
    def vocab_member(self) -> str | None:
        return next((name for name in VOCAB_MEMBERS if name in self.members), None)

    @property
    def meta(self) -> dict[str, Any] | None:
        """meta.json (the NLPL repository's description of the model: corpus, language, ...), if present, beside
        the model's files or at the top of the archive.

        It is informative only: an unreadable one is logged and skipped, never fatal.
        """
        names = set(self.zip_file.namelist())
        folder = next((f for f in (self.folder, "") if f + META_MEMBER in names), None)
        if folder is None:
            return None
        try:
            meta = self.read_json(META_MEMBER, folder)
        except ElmoError as e:
            log.warning("%s; ignoring it", e)
            return None
        return meta if isinstance(meta, dict) else None

    def vocabulary(self) -> Vocabulary | None:
        """The word list shipped with the model (vocab.txt or vocab.txt.gz), read as :class:`Vocabulary` does."""
        member = self.vocab_member
        if member is None:
            return None
        data = self.read(member)
        try:
            text = (gzip.decompress(data) if member.endswith(".gz") else data).decode("utf-8-sig")
        except (OSError, EOFError, zlib.error) as e:
            raise WeightFileError(f"{self.label(member)}: not a readable gzip file ({e})") from e
        except UnicodeDecodeError as e:
            raise WeightFileError(f"{self.label(member)}: not UTF-8 text ({e.reason} at byte {e.start})") from e
        return Vocabulary([w for line in text.splitlines() if (w := line.strip()) != "!!!MAXTERMID"])

    def read_config(self) -> BiLMConfig:
        """The architecture (from options.json, or the ManyLangs configs and dictionaries); no weights are read."""
        if self.family == MANYLANGS:
            return self._damage_named(read_manylangs_config)
        options = self.read_json(OPTIONS_MEMBER)
        return BiLMConfig.from_options(options, source=self.label(OPTIONS_MEMBER))

    def load(self) -> BiLM:
        """The biLM, on the CPU, in eval mode."""
        if self.family == MANYLANGS:
            return self._load_manylangs()
        config = self.read_config()
        weights = self.weights
        log.info("%s: bilm-tf model (%s)%s", self.path, ", ".join(sorted(self.members)), _meta_suffix(self.meta))
        with tempfile.TemporaryDirectory(prefix="elmo-zip-") as tmp:  # removed when the model has loaded
            data = extract_zip_member(self.zip_file, self.folder + weights, self.label(weights), Path(tmp) / weights)
            return load_original(config, data, options_label=self.label(OPTIONS_MEMBER),
                                 weights_label=self.label(weights))

    def _load_manylangs(self) -> BiLM:
        log.info(
            "%s: an ELMoForManyLangs model (%s), NLPL archive type (b); loading it with the ManyLangs reader%s",
            self.path, ", ".join(sorted(self.members)), _meta_suffix(self.meta),
        )
        return self._damage_named(load_manylangs)

    def _damage_named(self, read: Callable[[zipfile.Path], T]) -> T:
        """``read`` on the model's folder; a damaged member (the zip module names it) becomes one line."""
        try:
            return read(zipfile.Path(self.zip_file, self.folder))
        except ZIP_READ_ERRORS as e:
            if isinstance(e, ElmoError):
                raise
            raise WeightFileError(f"{self.path}: damaged archive member ({e})") from e


def open_archive(path: str | os.PathLike) -> ModelArchive:
    """Open a model archive and tell its family; one-line errors name the archive (and member) at fault."""
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"{path}: no such model archive")
    try:
        zip_file = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise WeightFileError(f"{path}: not a readable zip archive ({e})") from e
    try:
        check_member_count(len(zip_file.infolist()), path)
        family, folder, members = _find_model(path, zip_file.namelist())
    except BaseException:
        zip_file.close()
        raise
    return ModelArchive(path, zip_file, family, folder, members)


def _find_model(path: Path, names: list[str]) -> tuple[str, str, list[str]]:
    """(family, folder, file names in it): the model's files at the top of the archive or in one folder."""
    folders: dict[str, list[str]] = {}
    for name in names:
        if name.endswith("/") or name.startswith("__MACOSX/"):
            continue
        folder, _, base = name.rpartition("/")
        if folder.count("/") == 0:  # the top level or one folder deep
            folders.setdefault(folder + "/" if folder else "", []).append(base)
    found = {}
    for folder, files in folders.items():
        if OPTIONS_MEMBER in files:
            found[folder] = BILM_TF
        elif MANYLANGS_CONFIG in files and any(marker in files for marker in MANYLANGS_MARKERS):
            found[folder] = MANYLANGS
    if not found:
        raise WeightFileError(
            f"{path}: neither a bilm-tf archive (options.json + *.hdf5) nor an ELMoForManyLangs one (config.json, "
            f"char.dic, word.dic, encoder.pkl, token_embedder.pkl), at the top or in one folder"
        )
    if len(found) > 1:
        listed = ", ".join(folder or "(top level)" for folder in sorted(found))
        raise WeightFileError(f"{path}: models in several places ({listed}); pack one model per archive")
    [(folder, family)] = found.items()
    return family, folder, sorted(folders[folder])


def _meta_suffix(meta: dict[str, Any] | None) -> str:
    summary = describe_meta(meta)
    return f"; {summary}" if summary else ""


def describe_meta(meta: dict[str, Any] | None) -> str | None:
    """One line from an NLPL ``meta.json``: repository id, corpus, language, lemmatized or not, size."""
    if not isinstance(meta, dict):
        return None
    parts = []
    if "id" in meta:
        parts.append(f"NLPL id {meta['id']}")
    corpora = meta.get("corpus")
    for corpus in corpora if isinstance(corpora, list) else [corpora] if isinstance(corpora, dict) else []:
        if not isinstance(corpus, dict):
            continue
        bits = [str(corpus[k]) for k in ("description", "language") if corpus.get(k)]
        if "lemmatized" in corpus:
            bits.append("lemmatized" if corpus["lemmatized"] else "not lemmatized")
        if corpus.get("tokens"):
            bits.append(f"{corpus['tokens']} tokens")
        if bits:
            parts.append("corpus: " + ", ".join(bits))
    algorithm = meta.get("algorithm")
    if isinstance(algorithm, dict) and algorithm.get("name"):
        parts.append(f"algorithm: {algorithm['name']}")
    return "; ".join(parts) or None


def read_meta(path: str | os.PathLike) -> dict[str, Any] | None:
    """The model's ``meta.json`` (NLPL archives and directories extracted from them), or None."""
    path = Path(path)
    if path.is_dir():
        meta_file = path / META_MEMBER
        if not meta_file.is_file():
            return None
        try:
            meta = parse_json(meta_file.read_bytes(), str(meta_file), ConfigError)
        except (OSError, ElmoError) as e:
            log.warning("%s; ignoring it", e if isinstance(e, ElmoError) else f"{meta_file}: unreadable ({e})")
            return None
        return meta if isinstance(meta, dict) else None
    with open_archive(path) as archive:
        return archive.meta


def load_archive(path: str | os.PathLike) -> BiLM:
    """Load the model a zip archive holds (either family), reading it in place."""
    with open_archive(path) as archive:
        return archive.load()
