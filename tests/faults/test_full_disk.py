"""A write that fails midway: a clear error, earlier work intact, resumable. First with a per-file size limit
(``RLIMIT_FSIZE``), then on a real full disk, a small filesystem the tests mount and fill (ENOSPC), for every
writer: HDF5 parts and their merge, Parquet shards, training checkpoints, vocabularies, task models."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import resource
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from elmo.formats.checkpoints import checkpoint_dirs, latest_checkpoint
from tests.faults.conftest import assert_one_line_error, elmo, start_elmo, train_args
from tests.faults.test_kill_and_resume import _embed_args, _hdf5_contents, _long_input
from tests.tasks.conftest import write_conll

pytestmark = pytest.mark.slow

TASK_CONFIGS = Path(__file__).resolve().parents[2] / "src" / "elmo" / "presets" / "tasks"

STEPS = ["--max-steps", "60", "--checkpoint-every", "5", "--log-every", "5"]


def test_training_stops_cleanly_when_a_checkpoint_cannot_be_written(corpus, tmp_path):
    reference = tmp_path / "reference"
    elmo(*train_args(corpus, reference, *STEPS), check=True)
    run = tmp_path / "run"
    proc = start_elmo(*train_args(corpus, run, *STEPS))
    deadline = time.time() + 120
    while latest_checkpoint(run) is None:
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.005)
    limit = 4096  # bytes per file: smaller than model.safetensors, so the next checkpoint cannot be written
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
    assert proc.wait(timeout=120) == 1
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr
    error = [line for line in stderr.splitlines() if line.startswith("elmo: error:")]
    assert len(error) == 1 and "cannot write the checkpoint of step" in error[0] and "File too large" in error[0]
    kept = checkpoint_dirs(run)
    assert kept and f"{kept[-1]} is intact" in error[0]
    load_file(kept[-1] / "model.safetensors")  # the previous checkpoint loads
    elmo(*train_args(corpus, run, *STEPS, "--resume"), check=True)
    expected = load_file(latest_checkpoint(reference) / "model.safetensors")
    got = load_file(latest_checkpoint(run) / "model.safetensors")
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def _limit_file_size(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_embedding_stops_cleanly_when_the_output_cannot_be_written(tiny_model, tmp_path):
    text = _long_input(tmp_path)
    reference, out = tmp_path / "reference.hdf5", tmp_path / "out.hdf5"
    elmo(*_embed_args(tiny_model, text, reference), check=True)
    earlier = tmp_path / "earlier.txt"
    earlier.write_text("an earlier output\n")
    elmo(*_embed_args(tiny_model, earlier, out), check=True)
    earlier_contents = _hdf5_contents(out)
    limit = 1 << 20  # every part fits, the merged output (about 5 MB) does not
    assert reference.stat().st_size > 2 * limit
    result = elmo(*_embed_args(tiny_model, text, out, "--force"), preexec_fn=_limit_file_size(limit))
    assert_one_line_error(result, str(out), "File too large", "--resume")
    assert _hdf5_contents(out).keys() == earlier_contents.keys()  # the earlier output is untouched
    np.testing.assert_array_equal(_hdf5_contents(out)["0"], earlier_contents["0"])
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".out.hdf5")], "no temporary file is left"
    elmo(*_embed_args(tiny_model, text, out, "--resume"), check=True)
    expected, got = _hdf5_contents(reference), _hdf5_contents(out)
    assert sorted(got) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    assert not Path(f"{out}.parts").exists()


# A real full disk: a small filesystem mounted for the test (tmpfs, else an ext4 loop device), filled to the byte
# with one file (fallocate), so writes fail with ENOSPC where the disk is full, not where a limit says.

class SmallDisk:
    """A small filesystem at ``path``; :meth:`fill` takes its free space but ``leave`` bytes, :meth:`free` gives
    it back."""

    SIZE = 64 << 20

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "disk"
        self.path.mkdir()
        self.filler = self.path / ".filler"
        self.mounted = False
        self.image: Path | None = None

    def mount(self) -> None:
        tried = []
        for how in (self._mount_tmpfs, self._mount_loop_device):
            try:
                how()
                self.mounted = True
                return
            except (OSError, subprocess.CalledProcessError) as e:
                tried.append(f"{how.__doc__}: {_why(e)}")
        pytest.skip("cannot mount a small filesystem to fill (" + "; ".join(tried) + ")")

    def _mount_tmpfs(self) -> None:
        """tmpfs"""
        _run("mount", "-t", "tmpfs", "-o", f"size={self.SIZE}", "tmpfs", str(self.path))

    def _mount_loop_device(self) -> None:
        """ext4 loop device"""
        self.image = self.root / "disk.img"
        with open(self.image, "wb") as f:
            f.truncate(self.SIZE)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", str(self.image))
        _run("mount", "-o", "loop", str(self.image), str(self.path))

    def unmount(self) -> None:
        if self.mounted:
            _run("umount", "-l", str(self.path))
        if self.image is not None:
            self.image.unlink(missing_ok=True)

    def fill(self, leave: int = 0) -> None:
        """Take the free space but ``leave`` bytes (block-rounded): fill it all, then give ``leave`` back."""
        self.free()
        stat = os.statvfs(self.path)
        size = stat.f_bfree * stat.f_frsize
        with open(self.filler, "wb", buffering=0) as f:
            while size > 0:  # ext4 needs blocks of its own for a big file's extents: less, until it fits
                try:
                    os.posix_fallocate(f.fileno(), 0, size)
                    break
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    size -= max(size // 100, 1 << 16)
            f.seek(0, os.SEEK_END)
            with contextlib.suppress(OSError):  # the last blocks, one at a time, until the disk says it is full
                while True:
                    f.write(bytes(4096))
            os.ftruncate(f.fileno(), max(0, f.seek(0, os.SEEK_END) - leave))

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def temporary_files(self) -> list[Path]:
        """What a failed write may have left: hidden temporary files and directories, or ``*.tmp`` names."""
        return [p for p in self.path.rglob("*") if p != self.filler and (".tmp" in p.name or p.name.endswith(".old"))]


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def _why(error: Exception) -> str:
    if isinstance(error, subprocess.CalledProcessError):
        return (error.stderr or error.stdout or str(error)).strip().splitlines()[-1]
    return str(error)


@pytest.fixture
def small_disk(tmp_path):
    disk = SmallDisk(tmp_path)
    disk.mount()
    try:
        yield disk
    finally:
        disk.unmount()


def _short_input(tmp_path: Path) -> Path:
    rng = random.Random(7)
    words = "the a cat dog sat ran on under mat tree big small , . and then it was".split()
    path = tmp_path / "input.txt"
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(600))
                    + "\n", encoding="utf-8")
    return path


def test_embedding_on_a_real_full_disk_stops_cleanly_at_a_part_and_at_the_merge(tiny_model, tmp_path, small_disk):
    text = _short_input(tmp_path)
    reference = tmp_path / "reference.hdf5"
    elmo(*_embed_args(tiny_model, text, reference), check=True)
    size = reference.stat().st_size
    out = small_disk.path / "out.hdf5"
    earlier = tmp_path / "earlier.txt"
    earlier.write_text("an earlier output\n")
    elmo(*_embed_args(tiny_model, earlier, out), check=True)
    before = _hdf5_contents(out)

    def earlier_output_intact() -> None:
        now = _hdf5_contents(out)
        assert now.keys() == before.keys() and all(np.array_equal(now[k], before[k]) for k in before)

    # the disk fills while a part is written (HDF5 used to crash here: exit 139, a thousand lines on stderr)
    small_disk.fill(leave=size // 3)
    result = elmo(*_embed_args(tiny_model, text, out, "--force"))
    assert result.returncode == 1
    assert_one_line_error(result, f"{out}.parts/part-", "No space left on device", "--resume")
    assert not small_disk.temporary_files()
    earlier_output_intact()
    parts = sorted(Path(f"{out}.parts").glob("part-*.hdf5"))
    assert parts, "some parts were finished before the disk was full"

    # room for the remaining parts, not for the merged output
    chunks = -(-len(text.read_text().splitlines()) // 16)
    remaining = max(p.stat().st_size for p in parts) * (chunks - len(parts)) * 1.1
    small_disk.fill(leave=int(remaining + size // 2))
    result = elmo(*_embed_args(tiny_model, text, out, "--resume"))
    assert result.returncode == 1
    line = assert_one_line_error(result, f"{out}: cannot write (No space left on device)", "--resume")
    assert ".parts/part-" not in line.split(";")[0]
    assert not small_disk.temporary_files()
    earlier_output_intact()
    assert len(list(Path(f"{out}.parts").glob("part-*.hdf5"))) == chunks

    small_disk.free()
    elmo(*_embed_args(tiny_model, text, out, "--resume"), check=True)
    expected, got = _hdf5_contents(reference), _hdf5_contents(out)
    assert sorted(got) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    assert not Path(f"{out}.parts").exists() and not small_disk.temporary_files()


def test_parquet_shards_on_a_real_full_disk_stop_cleanly_and_resume(tiny_model, tmp_path, small_disk):
    pq = pytest.importorskip("pyarrow.parquet")
    text = _short_input(tmp_path)
    reference = tmp_path / "reference"
    elmo(*_embed_args(tiny_model, text, reference, "--format", "parquet"), check=True)
    size = sum(p.stat().st_size for p in reference.iterdir())
    out = small_disk.path / "shards"
    small_disk.fill(leave=size // 3)
    result = elmo(*_embed_args(tiny_model, text, out, "--format", "parquet"))
    assert result.returncode == 1
    assert_one_line_error(result, str(out), "No space left on device", "--resume")
    assert not small_disk.temporary_files()
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["shards"] and not manifest["complete"]  # the finished shards are listed
    small_disk.free()
    elmo(*_embed_args(tiny_model, text, out, "--format", "parquet", "--resume"), check=True)
    expected, got = pq.read_table(reference).sort_by("line"), pq.read_table(out).sort_by("line")
    assert expected.equals(got)
    assert not small_disk.temporary_files()


def test_training_on_a_real_full_disk_stops_at_a_checkpoint_and_resumes(corpus, tmp_path, small_disk):
    steps = ["--max-steps", "15", "--checkpoint-every", "5", "--log-every", "5"]
    reference = tmp_path / "reference"
    elmo(*train_args(corpus, reference, *steps), check=True)
    run = small_disk.path / "run"
    proc = start_elmo(*train_args(corpus, run, *steps))
    deadline = time.time() + 120
    while latest_checkpoint(run) is None:
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.005)
    small_disk.fill()
    assert proc.wait(timeout=120) == 1
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("elmo: ")]
    assert len(errors) == 1 and "cannot write the checkpoint of step" in errors[0], stderr
    assert "No space left on device" in errors[0]
    kept = checkpoint_dirs(run)
    assert kept and f"{kept[-1]} is intact" in errors[0]
    assert not small_disk.temporary_files()  # the half-written .tmp-step-N directory is gone
    load_file(kept[-1] / "model.safetensors")
    small_disk.free()
    elmo(*train_args(corpus, run, *steps, "--resume"), check=True)
    expected = load_file(latest_checkpoint(reference) / "model.safetensors")
    got = load_file(latest_checkpoint(run) / "model.safetensors")
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_a_vocabulary_on_a_real_full_disk_leaves_the_earlier_one(corpus, tmp_path, small_disk):
    out = small_disk.path / "vocab.txt"
    out.write_text("<S>\n</S>\n<UNK>\nan\nearlier\nvocabulary\n")
    earlier = out.read_bytes()
    small_disk.fill()
    result = elmo("-q", "vocab", str(corpus["train"]), "-o", str(out), "--force")
    assert result.returncode == 1
    assert_one_line_error(result, f"{out}: cannot write (No space left on device)")
    assert out.read_bytes() == earlier and not small_disk.temporary_files()
    small_disk.free()
    elmo("-q", "vocab", str(corpus["train"]), "-o", str(out), "--max-size", "15", "--force", check=True)
    assert out.read_text() == corpus["vocab"].read_text()  # the fixture's vocabulary: the same corpus and size


def test_a_task_model_on_a_real_full_disk_leaves_the_earlier_one(tmp_path, small_disk):
    data = write_conll(tmp_path / "ner.txt")
    out = small_disk.path / "task"
    args = ["-q", "task", "train", "ner", "--config", str(TASK_CONFIGS / "ner-tiny.json"), "--train", str(data),
            "--dev", str(data), "--output", str(out), "--no-elmo", "--epochs", "1"]
    out.mkdir()
    (out / "result.json").write_text('{"an": "earlier task model"}\n')
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    small_disk.fill()
    result = elmo(*args, "--force")
    assert result.returncode == 1
    assert_one_line_error(result, f"{out}: cannot write (No space left on device)", f"{out} is as it was")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier
    assert not small_disk.temporary_files() and sorted(p.name for p in small_disk.path.iterdir()) == [
        ".filler", "task"]
    small_disk.free()
    elmo(*args, "--force", check=True)
    assert {"model.safetensors", "task.json", "result.json"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("to", ["hdf5", "native"])
def test_a_converted_model_on_a_real_full_disk_leaves_the_earlier_one(tiny_model, tmp_path, small_disk, to):
    """The weights of `elmo convert` (HDF5 through h5py, or safetensors) go through the same kept-error file."""
    out = small_disk.path / "model"
    out.mkdir()
    (out / "options.json").write_text('{"an": "earlier model"}\n')
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    small_disk.fill(leave=4096)
    result = elmo("-q", "convert", "--model", str(tiny_model), str(out), "--to", to, "--force")
    assert result.returncode == 1
    assert_one_line_error(result, f"{out}: cannot write (No space left on device)", f"{out} is as it was")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier and not small_disk.temporary_files()
    small_disk.free()
    elmo("-q", "convert", "--model", str(tiny_model), str(out), "--to", to, "--force", check=True)
