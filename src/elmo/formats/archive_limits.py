"""How much a model archive may make us inflate: the caps every zip member and every ``.tar.gz`` stream is held to.

Archives come from the network and are opened as they are, so an archive of a few megabytes must not be able to
fill the memory or the disk (a zip member of 2 GiB of zeros deflates to 2 MB; a tar stream can hold any number of
junk members before the files we want). Three caps, all stated in docs/formats.md ("Limits"):

* no more than :data:`MAX_EXTRACTED_BYTES` are inflated from one zip member or one tar stream (the largest
  published ELMo archive holds well under 1 GB);
* above :data:`RATIO_FLOOR` bytes, nothing is inflated at more than :data:`MAX_COMPRESSION_RATIO` bytes per
  compressed byte (model weights deflate by about 8%, text by 3-5x; deflate's own maximum is about 1032:1, so a
  bomb is caught within its first megabytes and an archive can never make us inflate more than 100 times its size);
* an archive may list at most :data:`MAX_ARCHIVE_MEMBERS` entries (published ones have fewer than 20).

A zip declares each member's sizes, which :mod:`zipfile` then holds it to, so a member is checked before a byte of
it is read. A tar stream declares nothing ahead: :class:`CappedStream` counts as it inflates and stops at the
first byte over a cap. Large members are streamed to a temporary file, never read whole into memory.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from elmo.errors import WeightFileError
from elmo.formats.checked_reads import MAX_WHOLE_FILE

MAX_EXTRACTED_BYTES = 8 << 30
"""Bytes inflated from one zip member, or from one tar stream in all (8 GiB)."""
MAX_COMPRESSION_RATIO = 100
"""Inflated bytes per compressed byte, checked once more than :data:`RATIO_FLOOR` bytes are inflated."""
RATIO_FLOOR = 1 << 20
"""Below 1 MiB any ratio is accepted (a small JSON file of spaces is harmless)."""
MAX_ARCHIVE_MEMBERS = 10_000
"""Entries of one archive (files and folders)."""
COPY_CHUNK = 1 << 20

ZIP_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError)


def check_member_count(count: int, archive: Path | str) -> None:
    if count > MAX_ARCHIVE_MEMBERS:
        raise WeightFileError(f"{archive}: more than {MAX_ARCHIVE_MEMBERS:,} entries; refusing it (a model archive "
                              "holds a few files; docs/formats.md, Limits)")


def check_zip_member(info: zipfile.ZipInfo, label: str) -> None:
    """The member's declared sizes are within the caps (zipfile never inflates more than the declared size)."""
    if info.file_size > MAX_EXTRACTED_BYTES:
        raise WeightFileError(f"{label}: declares {info.file_size:,} bytes, more than the {MAX_EXTRACTED_BYTES:,} a "
                              "member may hold (docs/formats.md, Limits); refusing to inflate it")
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_COMPRESSION_RATIO * info.compress_size:
        raise WeightFileError(f"{label}: {info.file_size:,} bytes compressed into {info.compress_size:,}, more than "
                              f"{MAX_COMPRESSION_RATIO}:1 (a decompression bomb, or not a model file); refusing to "
                              "inflate it")


def read_zip_member(zip_file: zipfile.ZipFile, name: str, label: str) -> bytes:
    """The bytes of a (small) member, after :func:`check_zip_member`, at most :data:`MAX_WHOLE_FILE`, CRC-checked;
    errors name ``label``."""
    with _zip_errors(label):
        info = zip_file.getinfo(name)
        check_zip_member(info, label)
        if info.file_size > MAX_WHOLE_FILE:
            raise WeightFileError(f"{label}: {info.file_size:,} bytes, more than the {MAX_WHOLE_FILE:,} this reader "
                                  "reads into memory (docs/formats.md, Limits)")
        return zip_file.read(info)


def extract_zip_member(zip_file: zipfile.ZipFile, name: str, label: str, destination: Path) -> Path:
    """Stream a member into the file ``destination`` (after :func:`check_zip_member`, a chunk at a time, the CRC
    checked at the end), so that a large member never sits in memory."""
    with _zip_errors(label):
        info = zip_file.getinfo(name)
        check_zip_member(info, label)
        with zip_file.open(info) as source, open(destination, "wb") as out:
            shutil.copyfileobj(source, out, COPY_CHUNK)
    return destination


@contextmanager
def _zip_errors(label: str) -> Iterator[None]:
    """What the zip module raises while reading a member -> one line naming it."""
    try:
        yield
    except WeightFileError:
        raise
    except NotImplementedError as e:  # e.g. deflate64, which Windows uses for large files
        raise WeightFileError(f"{label}: {e}; re-pack the archive with plain deflate") from e
    except RuntimeError as e:  # encrypted
        raise WeightFileError(f"{label}: cannot be read ({e})") from e
    except ZIP_READ_ERRORS as e:
        raise WeightFileError(f"{label}: damaged archive member ({e})") from e


class _Counting:
    """A raw file that counts the bytes read from it (the compressed side of a stream)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.count = raw, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.count += n or 0
        return n

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()


class CappedStream:
    """The inflated bytes of a compressed file (gzip, bzip2, xz, or none), read forward only, that raise one
    :class:`WeightFileError` line as soon as more than :data:`MAX_EXTRACTED_BYTES` are inflated, or more than
    :data:`MAX_COMPRESSION_RATIO` per compressed byte past :data:`RATIO_FLOOR`. For ``tarfile.open(fileobj=...,
    mode="r|")``, which then reads and skips members through it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as f:
            magic = f.read(6)
        self._raw = _Counting(open(path, "rb"))
        if magic.startswith(b"\x1f\x8b"):
            self._inflated: BinaryIO = gzip.GzipFile(fileobj=self._raw)  # type: ignore[arg-type]
        elif magic.startswith(b"BZh"):
            self._inflated = bz2.BZ2File(self._raw)  # type: ignore[arg-type]
        elif magic.startswith(b"\xfd7zXZ\x00"):
            self._inflated = lzma.LZMAFile(self._raw)  # type: ignore[arg-type]
        else:
            self._inflated = self._raw  # type: ignore[assignment]
        self.inflated = 0

    def __enter__(self) -> CappedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._raw.close()

    def read(self, size: int = -1) -> bytes:
        data = self._inflated.read(size)
        self.inflated += len(data)
        if self.inflated > MAX_EXTRACTED_BYTES:
            raise WeightFileError(f"{self.path}: inflates to more than {MAX_EXTRACTED_BYTES:,} bytes (docs/formats.md, "
                                  "Limits); refusing to read on")
        if self.inflated > RATIO_FLOOR and self.inflated > MAX_COMPRESSION_RATIO * max(self._raw.count, 1):
            raise WeightFileError(f"{self.path}: {self.inflated:,} bytes inflated from {self._raw.count:,}, more than "
                                  f"{MAX_COMPRESSION_RATIO}:1 (a decompression bomb, or junk in the archive); refusing "
                                  "to read on")
        return data
