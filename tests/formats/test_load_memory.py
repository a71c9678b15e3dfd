"""Loading a model costs its weights, not the files' sizes: for every family, the peak memory of ``load_bilm`` stays
under 1.2x the biLM's weights over a process that has loaded a tiny model of the same family once (the first use of
the code, about the same whatever the model's size, is the fixed allowance). The model is built on the meta device
and each parameter is made from the file once: no second copy of the model, no file held in memory (an archive's
weights are streamed to a temporary file). bilm-tf training directories: test_bilm_tf_checkpoint.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm, tiny_config
from tests.formats.manylangs_files import write_manylangs_model
from tests.formats.tf_bundle_files import write_hub_module

pytestmark = pytest.mark.slow

BIG = BiLMConfig(  # 76 MB of float32 weights; the largest tensor (an LSTM kernel, (512, 8192)) 16.8 MB
    lstm=LSTMConfig(dim=2048, projection_dim=256, n_layers=2, cell_clip=3, proj_clip=3, use_skip_connections=True),
    char_cnn=CharCNNConfig(filters=[(1, 32), (2, 32), (3, 64), (4, 128)], embedding_dim=16, n_highway=1),
)

SCRIPT = textwrap.dedent("""
    import sys
    from elmo.formats.model_files import load_bilm

    load_bilm(sys.argv[2])  # the first use of the code (torch's and ours), on a tiny model of the same family

    def status_kb(field):  # VmHWM: this process's own peak
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    before = status_kb("VmRSS")
    bilm = load_bilm(sys.argv[1])
    peak = status_kb("VmHWM")
    print(before * 1024, peak * 1024, sum(p.numel() * p.element_size() for p in bilm.parameters()))
""")


def _zip(directory: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(directory.iterdir()):
            archive.write(file, "195/" + ("model.hdf5" if file.name == "weights.hdf5" else file.name))
    return path


def _write(family: str, config: BiLMConfig, root: Path) -> Path:
    if family == "manylangs":
        big = config is BIG
        return write_manylangs_model(root, dim=2048 if big else 48, projection_dim=256 if big else 16)
    bilm = random_bilm(config)
    if family == "hub":
        return write_hub_module(root, bilm)
    save_bilm(bilm, root / "model", native=family == "native")
    return _zip(root / "model", root / "model.zip") if family == "nlpl-zip" else root / "model"


def peak_growth(big: Path, tiny: Path) -> tuple[int, int, int]:
    """(RSS before, peak RSS, weights) of loading ``big`` in a fresh process that has loaded ``tiny`` first."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(big), str(tiny)], capture_output=True, text=True,
                            cwd=root, env={"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin",
                                           "OMP_NUM_THREADS": "1"}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    before, peak, weights = map(int, result.stdout.split()[-3:])
    return before, peak, weights


@pytest.mark.parametrize("family", ["native", "hdf5", "nlpl-zip", "manylangs", "hub"])
def test_loading_costs_the_weights_not_the_files(tmp_path, family):
    big, tiny = _write(family, BIG, tmp_path / "big"), _write(family, tiny_config(), tmp_path / "tiny")
    before, peak, weights = peak_growth(big, tiny)
    print(f"{family}: weights {weights / 1e6:.1f} MB, peak RSS growth {(peak - before) / 1e6:.1f} MB "
          f"({(peak - before) / weights:.2f}x)")
    assert weights > 70e6
    assert peak - before < 1.2 * weights, ((peak - before) / 1e6, weights / 1e6)
