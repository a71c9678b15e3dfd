"""``replace_directory``: a directory built beside its destination and swapped into place, refused over a
non-empty one unless forced (issue #49)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elmo.errors import ConfigError
from elmo.runtime.atomic_files import check_destination, replace_directory


def _write(files: dict[str, str]):
    def build(tmp: Path) -> None:
        for name, text in files.items():
            (tmp / name).write_text(text)

    return build


def test_a_fresh_or_empty_destination_is_built(tmp_path):
    out = replace_directory(tmp_path / "a" / "new", _write({"x.txt": "1"}))
    assert out == tmp_path / "a" / "new" and (out / "x.txt").read_text() == "1"
    (tmp_path / "empty").mkdir()
    replace_directory(tmp_path / "empty", _write({"y.txt": "2"}))
    assert [p.name for p in (tmp_path / "empty").iterdir()] == ["y.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "empty"]  # no temporary sibling left


def test_a_non_empty_destination_is_refused_unless_forced(tmp_path):
    old = tmp_path / "out"
    old.mkdir()
    (old / "stale.txt").write_text("old")
    with pytest.raises(ConfigError, match=r"out exists and is not empty; pass --force to replace it$"):
        replace_directory(old, _write({"new.txt": "new"}))
    assert [p.name for p in old.iterdir()] == ["stale.txt"]
    replace_directory(old, _write({"new.txt": "new"}), force=True)
    assert [p.name for p in old.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failed_build_leaves_the_old_directory_and_no_temporary(tmp_path):
    old = tmp_path / "out"
    old.mkdir()
    (old / "keep.txt").write_text("old")

    def build(tmp: Path) -> None:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        replace_directory(old, build, force=True)
    assert [p.name for p in old.iterdir()] == ["keep.txt"] and (old / "keep.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_file_is_never_replaced_by_a_directory(tmp_path):
    (tmp_path / "f").write_text("mine")
    for force in (False, True):
        with pytest.raises(ConfigError, match="exists and is not a directory"):
            check_destination(tmp_path / "f", force)
    assert (tmp_path / "f").read_text() == "mine"
