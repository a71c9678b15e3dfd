"""Which device to run on: every command's ``--device`` and the Python API's ``device=`` pass through
:func:`checked_device`, so a device this machine lacks is one clear error up front, not a traceback from deep in
torch. torch is imported when a device is checked, so that the settings (which name this module) import without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elmo.settings import SettingError

if TYPE_CHECKING:
    import torch


def checked_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a :class:`torch.device` that exists on this machine; None: CUDA when available, else CPU."""
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise SettingError("device", f"{device}: not a device name (cpu, cuda, cuda:N or mps)") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SettingError("device", f"{device}: this machine has no CUDA device (torch.cuda.is_available() is "
                               "False); use cpu")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise SettingError("device", f"{device}: this machine has {count} CUDA device(s), cuda:0 to "
                               f"cuda:{count - 1}")
        return dev
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise SettingError("device", f"{device}: this machine has no MPS device "
                               "(torch.backends.mps.is_available() is False); use cpu")
        return dev
    raise SettingError("device", f"{device}: {dev.type} devices are not supported (cpu, cuda, cuda:N or mps)")
