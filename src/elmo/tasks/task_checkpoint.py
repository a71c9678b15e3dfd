"""Task-model checkpoints: ``model.safetensors`` (weights, without the frozen biLM) + ``task.json`` (the rest).

``task.json`` holds the config, the word and label lists, where the biLM lives, training notes, and the sha256
of the weights it was written with, so a crash between the two (each written atomically) is detected on load.
Nothing is pickled; the model is rebuilt from the config and the weights are checked key by key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from elmo.devices import checked_device
from elmo.embedding.embedder import Embedder
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.checked_reads import load_checked_state, read_json, read_safetensors
from elmo.formats.model_ref import ModelRef
from elmo.runtime.atomic_files import write_atomic, write_json_atomic
from elmo.runtime.hashing import sha256_file
from elmo.tasks.builder import build_elmo, build_task_model
from elmo.tasks.elmo_features import ActivationCache
from elmo.tasks.runner import TaskRunner
from elmo.tasks.task_config import TaskConfig
from elmo.tasks.word_index import LabelIndex, WordIndex

FORMAT = "elmo-task/1"
WEIGHTS_FILE = "model.safetensors"
META_FILE = "task.json"
BILM_PREFIX = "elmo.bilm."


def save_task_model(directory: str | os.PathLike, runner: TaskRunner, bilm_dir: str | None, notes: dict) -> Path:
    """Write the runner's model into ``directory`` (weights first, then the JSON that vouches for them)."""
    directory = Path(directory)
    state = {
        k: v.detach().cpu().contiguous() for k, v in runner.model.state_dict().items() if not k.startswith(BILM_PREFIX)
    }
    write_atomic(directory / WEIGHTS_FILE, lambda tmp: save_file(state, tmp, metadata={"format": FORMAT}))
    elmo_info = None
    if runner.elmo_mode is not None:
        mix = runner.model.elmo.scalar_mixes[0]
        elmo_info = {"bilm_dir": bilm_dir, "num_layers": mix.num_layers, "dim": runner.model.elmo_dim}
    meta = {
        "format": FORMAT,
        "config": runner.config.to_dict(),
        "labels": runner.labels.labels,
        "elmo": elmo_info,
        "training": notes,
        "weights_sha256": sha256_file(directory / WEIGHTS_FILE),
        "words": runner.word_index.words,
    }
    write_json_atomic(directory / META_FILE, meta)
    return directory


def load_task_model(
    directory: str | os.PathLike,
    bilm_dir: str | os.PathLike | None = None,
    cached: bool | None = None,
    device: str | torch.device | None = None,
    embed_batch_size: int = 64,
    progress: bool = True,
) -> TaskRunner:
    """Rebuild a saved task model. ``bilm_dir`` overrides the saved biLM location; ``cached`` the ELMo mode."""
    directory = Path(directory)
    device = checked_device(device)
    meta = read_json(directory / META_FILE)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ConfigError(f"{directory / META_FILE}: not a task model (expected \"format\": \"{FORMAT}\")")
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        raise WeightFileError(f"{weights_path}: no such weight file")
    if sha256_file(weights_path) != meta.get("weights_sha256"):
        raise WeightFileError(f"{weights_path}: does not match {META_FILE} (interrupted save?); retrain or restore")
    tensors = read_safetensors(weights_path)
    config = TaskConfig.from_dict(meta["config"], source=str(directory / META_FILE))
    bilm_dir = bilm_dir or _recorded_bilm(directory, meta)
    runner = _rebuild(config, meta, tensors, bilm_dir, cached, device, embed_batch_size, progress)
    load_checked_state(runner.model, tensors, weights_path, skip_prefix=BILM_PREFIX)
    runner.model.to(device).eval()
    return runner


def _recorded_bilm(directory: Path, meta: dict) -> str | None:
    """The biLM ``task.json`` records: a shipped or published name, or a path that must still exist."""
    info = meta.get("elmo")
    location = info.get("bilm_dir") if isinstance(info, dict) else None
    if not location:
        return location
    try:
        return ModelRef.parse(location).record
    except ElmoError:
        raise WeightFileError(f"task model {directory} was trained with the biLM {location}, which no longer "
                              "exists; pass --bilm PATH") from None


def _rebuild(config, meta, tensors, bilm_dir, cached, device, embed_batch_size, progress) -> TaskRunner:
    word_vectors = np.zeros(tuple(tensors["token_input.words.weight"].shape), dtype=np.float32)
    elmo, cache, dim = None, None, 0
    info: dict[str, Any] | None = meta.get("elmo")
    if config.elmo.enabled:
        if info is None:
            raise ConfigError("task.json: the config uses ELMo but no 'elmo' section was saved")
        location = bilm_dir or info.get("bilm_dir")
        if not location:
            raise ConfigError("this task model uses ELMo: give the biLM directory (--bilm)")
        bilm = ModelRef.parse(location).load()
        if bilm.num_layers != info["num_layers"] or bilm.output_dim != info["dim"]:
            raise WeightFileError(
                f"{location}: biLM has {bilm.num_layers} layers of width {bilm.output_dim}, the task model was "
                f"trained on {info['num_layers']} of width {info['dim']}"
            )
        use_cache = config.elmo.cached if cached is None else cached
        elmo = build_elmo(config.elmo, bilm.num_layers, None if use_cache else bilm)
        if use_cache:
            embedder = Embedder(bilm, batch_size=embed_batch_size, precision=config.elmo.precision, device=device,
                                initial_state=config.elmo.initial_state)
            cache = ActivationCache(embedder, progress=progress)
        dim = info["dim"]
    model = build_task_model(config, word_vectors, meta["labels"], elmo, dim)
    return TaskRunner(config, model, WordIndex(meta["words"]), LabelIndex(meta["labels"]), cache, device)
