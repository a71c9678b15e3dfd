"""Reduced-precision CPU inference rounds the rows of its shape-varying products up to a few sizes (oneDNN keeps a
kernel per shape: without the rounding a bf16 service's memory grew by ~850 MB over 400 batches of random sizes)."""

import numpy as np
import pytest
import torch

import elmo.modules.char_cnn as char_cnn
import elmo.modules.lstm as lstm
from elmo.embedding.embedder import Embedder
from elmo.modules.bilm import build_bilm
from elmo.modules.shape_buckets import bucket_rows, buckets_shapes
from elmo.training.presets import load_preset


def test_bucket_rows_rounds_up_to_eight_sizes_per_doubling():
    assert [bucket_rows(n) for n in (1, 7, 16, 17, 31, 33, 100, 1000, 4096, 4097)] == \
        [1, 7, 16, 18, 32, 36, 104, 1024, 4096, 4608]
    sizes = [bucket_rows(n) for n in range(1, 4097)]
    assert all(n <= b <= n * 1.125 for n, b in zip(range(1, 4097), sizes))  # at most 12.5% more rows
    assert len(set(sizes)) == 80  # instead of 4096 shapes


def test_only_reduced_precision_cpu_inference_buckets():
    cpu = torch.device("cpu")
    with torch.inference_mode():
        assert buckets_shapes(torch.bfloat16, cpu)
        assert not buckets_shapes(torch.float32, cpu)
        assert not buckets_shapes(torch.bfloat16, torch.device("meta"))
    assert not buckets_shapes(torch.bfloat16, cpu)  # autograd: training shapes are fixed


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_bucketed_and_exact_shapes_give_the_same_vectors(monkeypatch, precision):
    torch.manual_seed(0)
    embedder = Embedder(build_bilm(load_preset("tiny")[0]), device="cpu", precision=precision)
    sentences = [f"sentence {i} with some words , unusual ones like {'x' * i}".split() for i in range(23)]
    bucketed = embedder.embed_batch(sentences)  # 23 sentences, distinct words and window rows not on a bucket
    monkeypatch.setattr(char_cnn, "buckets_shapes", lambda *a: False)
    monkeypatch.setattr(lstm, "buckets_shapes", lambda *a: False)
    exact = embedder.embed_batch(sentences)
    for a, b in zip(bucketed, exact):
        np.testing.assert_array_equal(a, b)
