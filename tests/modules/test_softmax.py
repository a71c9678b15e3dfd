"""Softmax heads: the sampled loss with every word sampled is the full loss; the sampler is TF's log-uniform."""

from __future__ import annotations

import math

import torch

from elmo.modules.softmax import LogUniformSampler, Softmax, _first_occurrences


def test_sampled_equals_full_when_every_word_is_sampled():
    softmax = Softmax(vocab_size=50, dim=6)
    hidden, targets = torch.randn(12, 6), torch.randint(0, 50, (12,))
    sampler = LogUniformSampler(50, num_sampled=50)
    ids, tries = sampler.sample(torch.Generator().manual_seed(0))
    loss = softmax.sampled_loss(hidden, targets, ids, sampler.expected_count(ids, tries),
                                sampler.expected_count(targets, tries))
    torch.testing.assert_close(loss, softmax.full_loss(hidden, targets), rtol=1e-6, atol=1e-6)


def test_sampled_loss_matches_a_hand_computation():
    softmax = Softmax(vocab_size=10, dim=3)
    hidden, targets = torch.randn(2, 3), torch.tensor([4, 7])
    ids, expected = torch.tensor([0, 4, 9]), torch.tensor([0.9, 0.5, 0.1])
    target_expected = torch.tensor([0.5, 0.2])
    loss = softmax.sampled_loss(hidden, targets, ids, expected, target_expected)
    logits = hidden @ softmax.weight.T + softmax.bias  # (2, 10)
    want = []
    for n in range(2):
        true = logits[n, targets[n]] - math.log(target_expected[n])
        others = [logits[n, k] - math.log(q) for k, q in zip(ids.tolist(), expected.tolist()) if k != targets[n]]
        want.append(torch.logsumexp(torch.stack([true, *others]), 0) - true)  # the accidental hit (4) is removed
    torch.testing.assert_close(loss, torch.stack(want).mean())


def test_sampler_draws_distinct_ids_with_tf_expected_counts():
    sampler = LogUniformSampler(1000, num_sampled=100)
    ids, tries = sampler.sample(torch.Generator().manual_seed(1))
    assert ids.numel() == 100 == ids.unique().numel() and tries >= 100
    p = (math.log(3) - math.log(2)) / math.log(1001)  # P(id 1)
    got = sampler.expected_count(torch.tensor([1]), tries)
    assert abs(got.item() - (1 - (1 - p) ** tries)) < 1e-6


def test_first_occurrences_marks_each_ids_first_index():
    ids = torch.randint(0, 50, (300,), generator=torch.Generator().manual_seed(3))
    seen, want = set(), []
    for i in ids.tolist():
        want.append(i not in seen)
        seen.add(i)
    assert _first_occurrences(ids, 50).tolist() == want


def test_sampler_follows_the_log_uniform_distribution():
    sampler = LogUniformSampler(100, num_sampled=1)
    draws = sampler._draw(200_000, torch.Generator().manual_seed(2))
    freq = torch.bincount(draws, minlength=100).double() / draws.numel()
    want = sampler.probability(torch.arange(100))
    assert (freq[:5] - want[:5]).abs().max() < 3e-3
    assert abs(want.sum().item() - 1) < 1e-9
