"""Numeric precision, one type for embedding, training and task models: ``auto``, float32 (exact) or bfloat16.

Embedding casts the weights once, up front (float32 LSTM memory cells and outputs): autocast would re-cast the
(P, 4C) recurrent weight at every time step, which costs more than it saves on a CPU. Training autocasts its matrix
products and keeps float32 weights, LSTM cells and softmax sums. bfloat16 pays only where the hardware multiplies
it natively (CUDA GPUs of compute capability 8.0+, CPUs with AVX512-BF16 or AMX): there it halves the bytes every
GEMM reads; elsewhere bf16 GEMMs are emulated and run many times slower than float32 (docs/benchmarks/training.md).
So ``auto`` picks bf16 only where :func:`bf16_verdict` says the device has the units, and :func:`resolve_precision`
logs which it chose and why. Embedding defaults to fp32 (the same vectors on every machine), training and the task
models' activation cache to ``auto``.

torch is imported where a function needs it, not here: the settings import this module, and they import without
torch (the spaCy entry point builds its config from them).
"""

from __future__ import annotations

import copy
import enum
import logging
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from elmo.errors import ConfigError

if TYPE_CHECKING:
    import torch

Model = TypeVar("Model", bound="torch.nn.Module")

log = logging.getLogger(__name__)

BF16_CPU_UNITS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}
"""CPU feature flags (as /proc/cpuinfo and ``torch.cpu.get_capabilities()`` spell them) that multiply bfloat16."""


class Precision(str, enum.Enum):
    """Spelled as in presets, manifests and on the command line: ``"auto"``, ``"fp32"``, ``"bf16"``."""

    AUTO = "auto"
    FP32 = "fp32"
    BF16 = "bf16"

    def __str__(self) -> str:
        return self.value

    @property
    def dtype(self) -> torch.dtype:
        import torch

        if self is Precision.AUTO:
            raise ValueError("precision auto has no dtype until resolve_precision() picks one for a device")
        return torch.bfloat16 if self is Precision.BF16 else torch.float32


def precision_of(value: str | Precision) -> Precision:
    """``value`` as a :class:`Precision`; ValueError with the problem otherwise (the check of the precision
    setting, :data:`elmo.shared_settings.PRECISION`)."""
    try:
        return Precision(value)
    except ValueError:
        raise ValueError(f"must be one of {', '.join(p.value for p in Precision)}; got {value!r}") from None


def parse_precision(value: str | Precision, name: str = "precision") -> Precision:
    """``value`` as a :class:`Precision`; ``name`` says which setting held it in the error."""
    try:
        return precision_of(value)
    except ValueError as e:
        raise ConfigError(f"{name} {e}") from None


def bf16_verdict(
    device_type: str, cpu_features: Collection[str] = (), cuda_capability: tuple[int, int] | None = None
) -> tuple[bool, str]:
    """(whether bf16 matrix products run fast, why) from what the hardware reports; pure, so it can be tested.

    ``cpu_features``: the CPU's feature flags (:func:`cpu_features`); ``cuda_capability``: (major, minor).
    """
    if device_type == "cuda":
        if cuda_capability is not None and cuda_capability >= (8, 0):
            return True, f"CUDA compute capability {cuda_capability[0]}.{cuda_capability[1]} has bf16 tensor cores"
        shown = "unknown" if cuda_capability is None else f"{cuda_capability[0]}.{cuda_capability[1]}"
        return False, f"CUDA compute capability {shown} has no bf16 tensor cores (8.0+ has)"
    if device_type == "cpu":
        units = [name for flag, name in BF16_CPU_UNITS.items() if flag in cpu_features]
        if units:
            return True, f"the CPU has {' and '.join(units)}"
        return False, "the CPU has no AVX512-BF16 or AMX-BF16 units"
    return False, f"bf16 speed on {device_type} devices is not known"


def cpu_features() -> frozenset[str]:
    """This CPU's feature flags: ``torch.cpu.get_capabilities()`` where torch has it, else Linux's /proc/cpuinfo."""
    import torch

    capabilities = getattr(torch.cpu, "get_capabilities", None)
    if capabilities is not None:
        return frozenset(name for name, present in capabilities().items() if present is True)
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return frozenset()  # unknown: treated as having no bf16 units
    flags = next((line.partition(":")[2] for line in lines if line.startswith("flags")), "")
    return frozenset(flags.split())


def bf16_support(device: torch.device | str) -> tuple[bool, str]:
    """:func:`bf16_verdict` for ``device`` on this machine."""
    import torch

    device = torch.device(device)
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return bf16_verdict(device.type, cpu_features() if device.type == "cpu" else (), capability)


def resolve_precision(precision: str | Precision, device: torch.device | str) -> Precision:
    """fp32 or bf16 for ``device``: ``auto`` becomes bf16 where it is fast, else fp32; logs one line saying which
    and why (a warning for an explicit bf16 where it is slow: it still runs)."""
    precision = parse_precision(precision)
    fast, why = bf16_support(device) if precision is not Precision.FP32 else (False, "")
    if precision is Precision.AUTO:
        precision = Precision.BF16 if fast else Precision.FP32
        log.info("precision auto: %s on %s (%s%s)", precision, device, why,
                 "" if fast else ", so bf16 matrix products would be slow")
    elif precision is Precision.BF16 and not fast:
        log.warning("precision bf16 on %s, as requested, but %s: bf16 matrix products run several times slower "
                    "than fp32 there (precision fp32 or auto would be faster)", device, why)
    else:
        log.info("precision %s on %s, as requested", precision, device)
    return precision


def for_precision(bilm: Model, precision: Precision) -> Model:
    """``bilm`` itself for fp32; a bfloat16 copy for bf16 (the caller's model is left untouched). ``precision`` is
    resolved (:func:`resolve_precision`), not auto."""
    if precision is Precision.FP32:
        return bilm
    return copy.deepcopy(bilm).to(precision.dtype)
