"""Models shipped inside the package, so that ELMo works offline on a fresh machine.

``demo``: a small biLM (``configs/cpu.json`` architecture) trained on public-domain novels; see ``demo/README.md``
for the recipe and its held-out perplexity. Load it with ``load_bilm(demo_model_dir())``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from elmo.errors import WeightFileError
from elmo.model_files import NATIVE_WEIGHTS_FILE, load_bilm, save_native

DEMO_DIR = Path(__file__).resolve().parent / "demo"


def demo_model_dir() -> Path:
    """The shipped demo model (native format: config.json + fp16 model.safetensors)."""
    if not (DEMO_DIR / NATIVE_WEIGHTS_FILE).is_file():
        raise WeightFileError(f"{DEMO_DIR}: the demo model is not installed with this copy of the package")
    return DEMO_DIR


def pack_half_precision(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Re-save any model directory in the native format with float16 tensors (half the size; loads as float32)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_native(load_bilm(model_dir), out, dtype=torch.float16)
    return out
