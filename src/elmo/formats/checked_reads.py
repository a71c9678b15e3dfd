"""Reading what a user hands us, with one-line errors that name the file: JSON configs, safetensors weights, and
the one check every loaded state dict goes through before it reaches a module (names, shapes, dtypes, finiteness).
Nothing here unpickles.

A model's weights go into a biLM built on the meta device (shapes only, nothing allocated): :func:`fill_by_module`
makes each module's parameters from the arrays read for it, as soon as they are all there, so the peak of a load is
the weights plus the arrays of one module, never two copies of the model; :func:`load_safetensors_weights` checks
a safetensors header (every tensor's name, dtype, shape and byte range against the model and the file's size)
before it reads a byte of tensor data.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from elmo.errors import ConfigError, WeightFileError
from elmo.runtime.memory import release_freed_memory
from elmo.runtime.text_files import parse_json

FINITE_CHUNK = 1 << 16
"""Values checked for NaN/Inf at a time: torch's check allocates a few temporaries of the values' size (64K values:
under 1 MB), a whole-tensor check would cost up to twice the tensor."""
MAX_WHOLE_FILE = 256 << 20
"""The largest file read whole into memory: JSON configs, dictionaries, vocabularies, a hub module's graph, a
checkpoint's index (never the weights, which are read tensor by tensor; no published one is near 256 MiB)."""


def read_whole(path: str | os.PathLike, error: type[Exception] = WeightFileError) -> bytes:
    """A (small) file's bytes; one over :data:`MAX_WHOLE_FILE` is one ``error`` line instead."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_WHOLE_FILE:
        raise error(f"{path}: {size:,} bytes, more than the {MAX_WHOLE_FILE:,} this reader reads into memory "
                    "(docs/formats.md, Limits)")
    return path.read_bytes()


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        data = read_whole(path, ConfigError)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror or e})") from e
    return parse_json(data, str(path), ConfigError)  # a Windows editor's BOM is dropped


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
    check_declared(state, {name: (tuple(value.shape), value.dtype) for name, value in tensors.items()}, source)
    for name, value in tensors.items():
        if value.is_floating_point() and not all_finite(value):
            raise WeightFileError(f"{source}: tensor '{name}' contains NaN or Inf values")
    module.load_state_dict({k: v.to(state[k].dtype) for k, v in tensors.items()}, strict=skip_prefix is None,
                           assign=assign)


def check_declared(state: Mapping[str, torch.Tensor], declared: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
                   source: Path | str) -> None:
    """What a file holds or declares (name -> shape, dtype) against a module's state: the same names, the same
    shapes, a float dtype for every float parameter; one line naming the first that is not."""
    missing = sorted(set(state) - set(declared))
    unexpected = sorted(set(declared) - set(state))
    if missing:
        raise WeightFileError(f"{source}: missing tensor '{missing[0]}' ({len(missing)} missing in all)")
    if unexpected:
        raise WeightFileError(f"{source}: unexpected tensor '{unexpected[0]}' ({len(unexpected)} unexpected in all)")
    for name, (shape, dtype) in declared.items():
        want = state[name]
        if shape != tuple(want.shape):
            raise WeightFileError(f"{source}: tensor '{name}' has shape {shape}, the config expects "
                                  f"{tuple(want.shape)}")
        if not dtype.is_floating_point and want.is_floating_point():
            raise WeightFileError(f"{source}: tensor '{name}' has dtype {dtype}, expected a float dtype")


def all_finite(values: torch.Tensor | np.ndarray) -> bool:
    """No NaN or Inf, checked a chunk at a time (a tensor of any size costs one chunk's flags)."""
    flat = values.reshape(-1)
    if isinstance(flat, np.ndarray):
        return all(np.isfinite(flat[i : i + FINITE_CHUNK]).all() for i in range(0, flat.size, FINITE_CHUNK))
    return all(bool(torch.isfinite(flat[i : i + FINITE_CHUNK]).all()) for i in range(0, flat.numel(), FINITE_CHUNK))


def fill_by_module(
    model: torch.nn.Module, arrays_of_entries: Iterable[Mapping[str, np.ndarray | torch.Tensor]], source: str
) -> None:
    """Make ``model``'s parameters from the arrays (parameter name -> value), module by module, as soon as all of one
    module's are read: each module goes through :func:`load_checked_state`, and on the meta device the arrays
    become its parameters (a module built normally is copied into). The entries should come grouped by module, so
    that each one's arrays are freed before the next module's are read; every parameter must be filled."""
    modules = dict(model.named_modules())
    pending: dict[str, dict[str, torch.Tensor]] = {}

    def fill(name: str, tensors: dict[str, torch.Tensor]) -> None:
        module = modules[name]
        meta = any(t.is_meta for t in module.state_dict().values())
        load_checked_state(module, tensors, f"{source} ({name})" if name else source, assign=meta)

    for arrays in arrays_of_entries:
        for param, value in arrays.items():
            module, _, leaf = param.rpartition(".")
            if module not in modules:
                raise WeightFileError(f"{source}: unexpected tensor '{param}'")
            tensor = torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value
            pending.setdefault(module, {})[leaf] = tensor
        for module in [m for m, got in pending.items() if set(got) == set(modules[m].state_dict())]:
            fill(module, pending.pop(module))
            release_freed_memory()  # the module's raw bytes and transposes (runtime/memory.py)
    for module, got in pending.items():  # a module filled only partly: load_checked_state names the gap
        fill(module, got)
    unfilled = [name for name, t in model.state_dict().items() if t.is_meta]
    if unfilled:
        raise WeightFileError(f"{source}: no tensor fills the model's parameter '{unfilled[0]}' ({len(unfilled)} "
                              "unfilled in all)")


# ------------------------------------------------------------------ safetensors, header first

SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                      "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                      "U8": torch.uint8, "BOOL": torch.bool}
MAX_SAFETENSORS_HEADER = 100 << 20
"""The safetensors library's own limit on the JSON header."""


def safetensors_header(path: Path) -> dict[str, tuple[torch.dtype, tuple[int, ...], int, int]]:
    """name -> (dtype, shape, start, end) in the file, of a safetensors file, every entry checked against the file's
    size: a byte range that does not hold dtype x shape, or lies past the end, is one line. No tensor is read."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or length > min(size - 8, MAX_SAFETENSORS_HEADER):
                raise WeightFileError(f"{path}: not a readable safetensors file (its header would be {length:,} "
                                      f"bytes, the file has {size:,})")
            header = json.loads(f.read(length).decode("utf-8"))
    except OSError as e:
        raise WeightFileError(f"{path}: cannot read ({e.strerror or e})") from e
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, or JSON past Python's limits
        raise WeightFileError(f"{path}: not a readable safetensors file (its header is not JSON: {e})") from e
    if not isinstance(header, dict):
        raise WeightFileError(f"{path}: not a readable safetensors file (its header is not a JSON object)")
    data_start, data_size = 8 + length, size - 8 - length
    entries = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = SAFETENSORS_DTYPES[info["dtype"]]
            shape = tuple(info["shape"])
            start, end = info["data_offsets"]
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in (*shape, start, end)):
                raise TypeError("negative or non-integer size")
        except (KeyError, TypeError, ValueError) as e:
            raise WeightFileError(f"{path}: tensor '{name}' has a malformed header entry ({e!r})") from None
        need = math.prod(shape) * dtype.itemsize
        if end - start != need or end > data_size:
            raise WeightFileError(f"{path}: tensor '{name}' ({info['dtype']} {shape}, {need:,} bytes) is declared at "
                                  f"bytes {start:,}..{end:,} of {data_size:,} (damaged or truncated file)")
        entries[name] = (dtype, shape, data_start + start, data_start + end)
    return entries


def load_safetensors_weights(model: torch.nn.Module, path: str | os.PathLike) -> None:
    """Fill ``model`` (built on the meta device) from a safetensors file: the header is checked against the model's
    state (names, shapes, float dtypes) and the file's size first, then each module's tensors are read (into memory
    of their own, not a mapping of the file) and become its parameters."""
    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"{path}: no such weight file")
    entries = safetensors_header(path)
    check_declared(model.state_dict(), {name: (shape, dtype) for name, (dtype, shape, _, _) in entries.items()}, path)

    def tensors():
        with open(path, "rb") as f:
            for name in sorted(entries, key=lambda n: n.rsplit(".", 1)[0]):  # module by module
                dtype, shape, start, end = entries[name]
                raw = torch.empty(end - start, dtype=torch.uint8)
                f.seek(start)
                if f.readinto(memoryview(raw.numpy())) != end - start:
                    raise WeightFileError(f"{path}: tensor '{name}' is cut short (truncated file)")
                yield {name: raw.view(dtype).reshape(shape)}

    try:
        fill_by_module(model, tensors(), str(path))
    except OSError as e:
        raise WeightFileError(f"{path}: cannot read ({e.strerror or e})") from e
