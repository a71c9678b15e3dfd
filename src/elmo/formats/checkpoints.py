"""Training checkpoints as data: safetensors for tensors, JSON for the rest, plain-tensor dicts for optimizer/RNG.

    RUN_DIR/checkpoints/step-00001250/
        model.safetensors      language model state dict (biLM + softmax)
        optimizer.pt           optimizer.state_dict() (tensors, numbers, lists), read with weights_only=True
        rank-0.pt ...          per process: RNG states and the LSTM states of its rows
        trainer.json           step, tokens, data position, metric history

A checkpoint is written into a hidden temporary directory and renamed into place, so a killed run leaves either a
complete checkpoint or none; only the newest ``keep`` are kept. Each file is serialised in memory and written with
a plain write and an fsync, so a full disk is an ``OSError`` with its errno (not a library's internal error), and
the half-written temporary directory is removed at once.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as save_safetensors

from elmo.errors import WeightFileError
from elmo.formats.checked_reads import read_safetensors
from elmo.runtime.atomic_files import first_line

CHECKPOINTS_DIR = "checkpoints"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def checkpoint_dirs(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    dirs = checkpoint_dirs(run_dir)
    return dirs[-1] if dirs else None


def temporary_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR / f".tmp-step-{step:08d}"


def remove_stale_temporaries(run_dir: str | Path) -> None:
    """Half-written checkpoints of a killed run."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if root.is_dir():
        for p in root.glob(".tmp-step-*"):
            shutil.rmtree(p, ignore_errors=True)


def _torch_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _write_file(tmp: Path, name: str, data: bytes) -> None:
    """Write one file of the temporary checkpoint ``tmp`` and sync it; on a failed write ``tmp`` is removed (the
    earlier checkpoints are untouched) and the ``OSError`` raised."""
    try:
        with open(tmp / name, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_rank_state(tmp: Path, rank: int, state: dict[str, Any]) -> None:
    _write_file(tmp, f"rank-{rank}.pt", _torch_bytes(state))


def _safetensors_bytes(state: dict[str, torch.Tensor]) -> bytes:
    return save_safetensors({k: v.detach().cpu().contiguous() for k, v in state.items()})


def write_shared_state(
    tmp: Path, model_state: dict[str, torch.Tensor], optimizer_state: dict[str, Any], trainer: dict[str, Any]
) -> None:
    _write_file(tmp, "model.safetensors", _safetensors_bytes(model_state))
    _write_file(tmp, "optimizer.pt", _torch_bytes(optimizer_state))
    _write_file(tmp, "trainer.json", (json.dumps(trainer) + "\n").encode("utf-8"))


def publish(tmp: Path, run_dir: str | Path, step: int, keep: int) -> Path:
    """Rename a fully written temporary checkpoint into place and drop all but the newest ``keep``."""
    final = Path(run_dir) / CHECKPOINTS_DIR / f"step-{step:08d}"
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    for old in checkpoint_dirs(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def read_model_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The weights of a checkpoint."""
    return read_safetensors(checkpoint / "model.safetensors")


def read_trainer_state(checkpoint: Path) -> dict[str, Any]:
    path = checkpoint / "trainer.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise WeightFileError(f"{path}: not a readable checkpoint ({e})") from e


def read_torch_state(path: Path) -> Any:
    """Optimizer/RNG/LSTM state: plain tensors and containers only (never unpickles objects)."""
    if not path.is_file():
        raise WeightFileError(f"{path}: missing from the checkpoint")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure here means an unusable file
        raise WeightFileError(f"{path}: not a readable checkpoint file ({first_line(e)})") from e
