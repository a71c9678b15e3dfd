"""Precision: ``auto`` picks bf16 only where the hardware multiplies it (decided from the reported features), says
so in one log line, and every setting that takes a precision reads the same values and the old spellings."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from elmo.embedding.embedder import Embedder
from elmo.errors import ConfigError, InputFileError
from elmo.precision import Precision, bf16_verdict, cpu_features, parse_precision, resolve_precision
from elmo.presets import PRESET_DIR, preset_names
from elmo.tasks.elmo_features import ActivationCache
from elmo.tasks.task_config import TaskConfig
from elmo.training.presets import load_preset
from elmo.training.train_config import TrainConfig, split_preset
from tests.conftest import random_bilm

ZEN3 = {"sse4_2", "avx", "avx2", "fma"}  # AVX2 only: the machine the issue measured bf16 35x slower on
ZEN4 = ZEN3 | {"avx512f", "avx512bw", "avx512_bf16"}
SAPPHIRE_RAPIDS = ZEN3 | {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}
SKYLAKE_X = ZEN3 | {"avx512f", "avx512bw"}  # AVX-512 without bf16 units: oneDNN calls it bf16-capable, it is slow


@pytest.mark.parametrize("features, fast, unit", [
    (ZEN3, False, None), (SKYLAKE_X, False, None), (ZEN4, True, "AVX512-BF16"), (SAPPHIRE_RAPIDS, True, "AMX-BF16"),
    (set(), False, None),
])
def test_cpu_verdict_follows_the_bf16_units(features, fast, unit):
    verdict, why = bf16_verdict("cpu", features)
    assert verdict is fast
    assert (unit in why) if unit else why == "the CPU has no AVX512-BF16 or AMX-BF16 units"


@pytest.mark.parametrize("capability, fast", [((9, 0), True), ((8, 0), True), ((7, 5), False), (None, False)])
def test_cuda_verdict_needs_compute_capability_8(capability, fast):
    verdict, why = bf16_verdict("cuda", cuda_capability=capability)
    assert verdict is fast and "compute capability" in why


def test_other_devices_are_not_assumed_fast():
    assert bf16_verdict("mps", SAPPHIRE_RAPIDS)[0] is False


def test_this_cpu_reports_its_bf16_units_as_linux_does(monkeypatch):
    """The live reading (torch's cpuinfo; /proc/cpuinfo on a torch without it) agrees with the kernel's flags on the
    units that decide."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    flags = set(next((line.partition(":")[2] for line in text.splitlines() if line.startswith("flags")), "").split())
    if not flags:
        pytest.skip("/proc/cpuinfo has no flags line (not x86)")
    from_torch = cpu_features()
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)
    for features in (from_torch, cpu_features()):
        for name in ("avx2", "avx512_bf16", "amx_bf16"):
            assert (name in features) is (name in flags), name


def test_auto_resolves_per_device_and_logs_one_line(caplog, monkeypatch):
    for features, expected in ((ZEN3, Precision.FP32), (SAPPHIRE_RAPIDS, Precision.BF16)):
        monkeypatch.setattr("elmo.precision.cpu_features", lambda f=features: frozenset(f))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="elmo.precision"):
            assert resolve_precision("auto", "cpu") is expected
        assert len(caplog.records) == 1
        line = caplog.records[0].getMessage()
        assert line.startswith(f"precision auto: {expected.value} on cpu (the CPU has")
        assert ("would be slow" in line) is (expected is Precision.FP32)


def test_explicit_bf16_without_units_runs_with_a_warning(caplog, monkeypatch):
    monkeypatch.setattr("elmo.precision.cpu_features", lambda: frozenset(ZEN3))
    with caplog.at_level(logging.INFO, logger="elmo.precision"):
        assert resolve_precision("bf16", "cpu") is Precision.BF16
        assert resolve_precision(Precision.FP32, "cpu") is Precision.FP32
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert "slower than fp32" in caplog.records[0].getMessage()


def test_embedder_defaults_to_fp32_and_resolves_auto_on_request(monkeypatch):
    monkeypatch.setattr("elmo.precision.cpu_features", lambda: frozenset(ZEN4))  # a CPU with bf16 units
    default = Embedder(random_bilm(), device="cpu")
    assert default.options.precision is Precision.FP32 and default.precision is Precision.FP32  # faithful
    assert next(default.model.parameters()).dtype == torch.float32
    assert next(Embedder(random_bilm(), device="cpu", precision="auto").model.parameters()).dtype == torch.bfloat16
    monkeypatch.setattr("elmo.precision.cpu_features", lambda: frozenset(ZEN3))
    embedder = Embedder(random_bilm(), device="cpu", precision="auto")
    assert embedder.options.precision is Precision.AUTO and embedder.precision is Precision.FP32


def test_auto_has_no_dtype_and_bad_values_name_the_setting():
    with pytest.raises(ValueError, match="resolve_precision"):
        Precision.AUTO.dtype
    with pytest.raises(ConfigError, match="elmo.precision must be one of auto, fp32, bf16; got .fp16."):
        parse_precision("fp16", "elmo.precision")


def test_training_defaults_to_auto_and_every_preset_says_so():
    assert TrainConfig().precision is Precision.AUTO
    for name in preset_names():
        assert json.loads((PRESET_DIR / f"{name}.json").read_text())["precision"] == "auto", name
        assert load_preset(name)[1].precision is Precision.AUTO


@pytest.mark.parametrize("old, new", [(True, Precision.BF16), (False, Precision.FP32)])
def test_the_old_bf16_key_still_reads(old, new):
    data = {k: v for k, v in json.loads((PRESET_DIR / "tiny.json").read_text()).items() if k != "precision"}
    assert split_preset({**data, "bf16": old}, "old.json")[1].precision is new


def test_task_config_precision_reaches_the_embedder_and_the_cache_keeps_one(tmp_path, monkeypatch):
    monkeypatch.setattr("elmo.precision.cpu_features", lambda: frozenset(ZEN3))
    assert TaskConfig("ner").elmo.precision is Precision.AUTO
    config = TaskConfig.from_dict({"task": "ner", "elmo": {"precision": "bf16"}})
    assert config.elmo.precision is Precision.BF16
    assert json.loads(json.dumps(config.to_dict()))["elmo"]["precision"] == "bf16"
    bilm = random_bilm()
    ActivationCache(Embedder(bilm, precision="fp32"), tmp_path / "cache.h5").close()
    with pytest.raises(InputFileError, match="holds fp32 activations, this run computes bf16"):
        ActivationCache(Embedder(bilm, precision=config.elmo.precision), tmp_path / "cache.h5")
