"""Models shipped inside the package, so that ELMo works offline on a fresh machine.

``demo``: a small biLM (``configs/cpu.json`` architecture) trained on public-domain novels; see ``demo/README.md``
for the recipe and its held-out perplexity. Load it with ``load_bilm(demo_model_dir())``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from elmo.atomic_files import write_text_atomic
from elmo.errors import WeightFileError
from elmo.model_files import NATIVE_CONFIG_FILE, NATIVE_FORMAT, NATIVE_WEIGHTS_FILE, load_bilm

DEMO_DIR = Path(__file__).resolve().parent / "demo"


def demo_model_dir() -> Path:
    """The shipped demo model (native format: config.json + fp16 model.safetensors)."""
    if not (DEMO_DIR / NATIVE_WEIGHTS_FILE).is_file():
        raise WeightFileError(f"{DEMO_DIR}: the demo model is not installed with this copy of the package")
    return DEMO_DIR


def pack_half_precision(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Re-save any model directory in the native format with float16 tensors (half the size; loads as float32)."""
    bilm = load_bilm(model_dir)
    assert bilm.config is not None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in bilm.state_dict().items()}
    save_file(state, out / NATIVE_WEIGHTS_FILE, metadata={"format": NATIVE_FORMAT})
    config = {"format": NATIVE_FORMAT, "options": bilm.config.to_options(), "token_vocab_size": None}
    write_text_atomic(out / NATIVE_CONFIG_FILE, json.dumps(config, indent=2) + "\n")
    return out
