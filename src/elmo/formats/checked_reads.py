"""Reading what a user hands us, with one-line errors that name the file: JSON configs, safetensors weights, and
the one check every loaded state dict goes through before it reaches a module (names, shapes, dtypes, finiteness).
Nothing here unpickles.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from elmo.errors import ConfigError, WeightFileError


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8-sig") as f:  # -sig: a byte-order mark (Windows editors) is dropped
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e


def read_safetensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"{path}: no such weight file")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightFileError(f"{path}: not a readable safetensors file ({e})") from e


def load_checked_state(
    module: torch.nn.Module, tensors: dict[str, torch.Tensor], source: Path | str, skip_prefix: str | None = None,
    assign: bool = False,
) -> None:
    """Copy ``tensors`` into ``module`` after checking names, shapes, dtypes and finiteness; errors name the key.

    ``skip_prefix``: the module's parameters under this prefix are not in the file (a task model saved without
    its frozen biLM) and stay as they are. ``assign``: the tensors become the parameters (no copy: a module built
    on the meta device, filled without ever holding two copies of its weights).
    """
    state = {k: v for k, v in module.state_dict().items() if skip_prefix is None or not k.startswith(skip_prefix)}
    missing = sorted(set(state) - set(tensors))
    unexpected = sorted(set(tensors) - set(state))
    if missing:
        raise WeightFileError(f"{source}: missing tensor '{missing[0]}' ({len(missing)} missing in all)")
    if unexpected:
        raise WeightFileError(f"{source}: unexpected tensor '{unexpected[0]}' ({len(unexpected)} unexpected in all)")
    for name, value in tensors.items():
        want = state[name]
        if tuple(value.shape) != tuple(want.shape):
            raise WeightFileError(
                f"{source}: tensor '{name}' has shape {tuple(value.shape)}, the config expects {tuple(want.shape)}"
            )
        if not value.is_floating_point() and want.is_floating_point():
            raise WeightFileError(f"{source}: tensor '{name}' has dtype {value.dtype}, expected a float dtype")
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise WeightFileError(f"{source}: tensor '{name}' contains NaN or Inf values")
    module.load_state_dict({k: v.to(state[k].dtype) for k, v in tensors.items()}, strict=skip_prefix is None,
                           assign=assign)
