"""Shared test fixtures: paths into ../shared (read-only reference data) and small random models."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from hypothesis import settings

from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.modules.bilm import build_bilm
from elmo.runtime.compile_switch import set_compile

# Property tests draw the same examples every run (a red CI must mean a regression, not an unlucky draw);
# HYPOTHESIS_PROFILE=explore draws new, and more, examples to hunt for bugs.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURE = SHARED / "reference" / "bilm-tf-fixture"


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
    np.random.seed(0)


@pytest.fixture(autouse=True)
def _compile_off():
    """A trainer turns compiling on for its whole process; tests share one process, so each starts with it off."""
    yield
    set_compile(False)


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    assert FIXTURE.is_dir(), f"reference fixture not found at {FIXTURE} (../shared must sit beside the repo)"
    return FIXTURE


@pytest.fixture(scope="session")
def fixture_sentences(fixture_dir: Path) -> list[list[list[str]]]:
    """Three lists of ten tokenised sentences."""
    with open(fixture_dir / "lm_embeddings_sentences.json") as f:
        return [[s.strip().split() for s in group] for group in json.load(f)]


@pytest.fixture(scope="session")
def fixture_expected(fixture_dir: Path) -> list[list[np.ndarray]]:
    """expected[k][i]: top layer of sentence i of list k, (n_tokens, 2P) = [forward; backward]."""
    expected = []
    for k in range(3):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
            expected.append([np.concatenate([f[str(i)][0], f[str(i)][1]], axis=-1) for i in range(10)])
    return expected


LM_WORDS = "the a cat dog sat ran on under mat tree big small , . and then it was".split()


def write_lm_corpus(root: Path) -> dict[str, Path]:
    """A small random-sentence training corpus, held-out file and vocabulary (15 words: some are <UNK>)."""
    from elmo.training.vocab_counts import count_words, vocabulary_from_counts

    rng = random.Random(0)
    for name, n in (("train.txt", 300), ("valid.txt", 20)):
        lines = [" ".join(rng.choice(LM_WORDS) for _ in range(rng.randint(2, 12))) for _ in range(n)]
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocabulary_from_counts(count_words([root / "train.txt"]), max_size=15).save(root / "vocab.txt")
    return {"train": root / "train.txt", "valid": root / "valid.txt", "vocab": root / "vocab.txt"}


def tiny_config(residual: bool = True, projection: bool = True, n_highway: int = 1, n_layers: int = 2) -> BiLMConfig:
    return BiLMConfig(
        lstm=LSTMConfig(
            dim=12, projection_dim=8 if projection else 12, n_layers=n_layers, cell_clip=3, proj_clip=3,
            use_skip_connections=residual,
        ),
        char_cnn=CharCNNConfig(filters=[(1, 4), (2, 6), (3, 8)], embedding_dim=5, n_highway=n_highway),
    )


def random_bilm(config: BiLMConfig | None = None, seed: int = 0):
    """A biLM with random (not default-initialised) weights, so every parameter matters in comparisons."""
    bilm = build_bilm(config or tiny_config())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in bilm.named_parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
        bilm.token_encoder.char_embedding.weight[0] = 0
    return bilm.eval()
