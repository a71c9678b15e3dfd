"""The softmax of a language model on disk: ``softmax.hdf5`` beside an exported biLM (``elmo export``).

The file holds ``softmax/W`` (V, P) and ``softmax/b`` (V), float32; row i is word i of the model's ``vocab.txt``. As
in the original, the softmax is not part of ``weights.hdf5``: the biLM loads without it, and perplexity,
lexical substitutes and fine-tuning with the same vocabulary read it.
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import torch

from elmo.errors import WeightFileError
from elmo.formats.hdf5 import write_hdf5_atomic
from elmo.modules.softmax import Softmax

SOFTMAX_FILE = "softmax.hdf5"


def read_softmax(path: Path, dim: int) -> Softmax:
    """softmax/W (V, P) and softmax/b (V) from an export's HDF5 file."""
    if not path.is_file():
        raise WeightFileError(
            f"{path.parent}: no softmax file ({path.name}), which perplexity and substitutes need; published models "
            f"ship without one: use the demo, a training run or its `elmo export` (`elmo finetune --model "
            f"{path.parent} ...` trains a softmax)"
        )
    try:
        with h5py.File(path, "r") as f:
            weight = torch.from_numpy(f["softmax/W"][...]).float()
            bias = torch.from_numpy(f["softmax/b"][...]).float()
    except (OSError, KeyError) as e:
        raise WeightFileError(f"{path}: not a softmax file with softmax/W and softmax/b ({e})") from e
    if weight.dim() != 2 or weight.shape[1] != dim or bias.shape != (weight.shape[0],):
        raise WeightFileError(
            f"{path}: softmax/W {tuple(weight.shape)} and softmax/b {tuple(bias.shape)} do not fit projection dim {dim}"
        )
    softmax = Softmax(weight.shape[0], dim)
    with torch.no_grad():
        softmax.weight.copy_(weight)
        softmax.bias.copy_(bias)
    return softmax


def write_softmax(path: str | os.PathLike, softmax: Softmax) -> None:
    """``softmax``'s weight and bias as softmax/W and softmax/b (float32), atomically."""
    write_hdf5_atomic(
        path,
        {"softmax/W": softmax.weight.detach().cpu().float().numpy(),
         "softmax/b": softmax.bias.detach().cpu().float().numpy()},
    )
