"""A write that fails midway (file-size limit, as on a full disk): a clear error, earlier work intact."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from elmo.formats.checkpoints import checkpoint_dirs, latest_checkpoint
from tests.faults.conftest import assert_one_line_error, elmo, start_elmo, train_args
from tests.faults.test_kill_and_resume import _embed_args, _hdf5_contents, _long_input

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
    result = elmo(*_embed_args(tiny_model, text, out), preexec_fn=_limit_file_size(limit))
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
