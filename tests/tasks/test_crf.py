"""The CRF against brute-force enumeration of every tag sequence (independent of the forward algorithm)."""

from __future__ import annotations

import itertools

import pytest
import torch

from elmo.tasks.crf import ConditionalRandomField, bio_allowed_transitions


def _score(crf: ConditionalRandomField, emissions: torch.Tensor, tags: tuple[int, ...]) -> torch.Tensor:
    """Direct formula for one unpadded sentence: start + emissions + transitions + end."""
    transitions, start, end = crf._scores()
    total = start[tags[0]] + end[tags[-1]]
    for t, tag in enumerate(tags):
        total = total + emissions[t, tag]
        if t > 0:
            total = total + transitions[tags[t - 1], tag]
    return total


def _random_crf(num_tags: int, allowed=None) -> ConditionalRandomField:
    crf = ConditionalRandomField(num_tags, allowed)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf


@pytest.fixture
def batch():
    """Three sentences of lengths 4, 1 and 3, padded to 4, over 3 tags."""
    emissions = torch.randn(3, 4, 3)
    lengths = [4, 1, 3]
    mask = torch.arange(4).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return emissions, mask, lengths


def test_log_partition_equals_brute_force(batch):
    emissions, mask, lengths = batch
    crf = _random_crf(3)
    log_z = crf.log_partition(emissions, mask)
    for b, n in enumerate(lengths):
        scores = torch.stack([_score(crf, emissions[b], tags) for tags in itertools.product(range(3), repeat=n)])
        torch.testing.assert_close(log_z[b], torch.logsumexp(scores, 0))


def test_sequence_score_and_nll_match_formula(batch):
    emissions, mask, lengths = batch
    crf = _random_crf(3)
    tags = torch.randint(0, 3, (3, 4))
    nll = crf(emissions, tags, mask)
    for b, n in enumerate(lengths):
        gold = tuple(tags[b, :n].tolist())
        all_scores = torch.stack([_score(crf, emissions[b], t) for t in itertools.product(range(3), repeat=n)])
        torch.testing.assert_close(nll[b], torch.logsumexp(all_scores, 0) - _score(crf, emissions[b], gold))


def test_viterbi_equals_brute_force_argmax(batch):
    emissions, mask, lengths = batch
    crf = _random_crf(3)
    decoded = crf.viterbi_decode(emissions, mask)
    for b, n in enumerate(lengths):
        best = max(itertools.product(range(3), repeat=n), key=lambda t: _score(crf, emissions[b], t).item())
        assert decoded[b] == list(best)


def test_constraints_hold_in_decoding_and_in_the_partition():
    tags = ["B-PER", "I-PER", "O"]
    crf = _random_crf(3, bio_allowed_transitions(tags))
    emissions = torch.randn(1, 4, 3)
    emissions[0, :, 1] += 10  # I-PER everywhere would win without constraints
    mask = torch.ones(1, 4, dtype=torch.bool)
    path = crf.viterbi_decode(emissions, mask)[0]
    assert path[0] != 1 and all(not (a == 2 and b == 1) for a, b in zip(path, path[1:]))
    valid = [t for t in itertools.product(range(3), repeat=4) if t[0] != 1 and (2, 1) not in zip(t, t[1:])]
    scores = torch.stack([_score(crf, emissions[0], t) for t in valid])
    torch.testing.assert_close(crf.log_partition(emissions, mask)[0], torch.logsumexp(scores, 0))


def test_gradients_are_finite_with_constraints():
    crf = _random_crf(3, bio_allowed_transitions(["B-PER", "I-PER", "O"]))
    emissions = torch.randn(2, 3, 3, requires_grad=True)
    loss = crf(emissions, torch.tensor([[0, 1, 2], [2, 2, 0]]), torch.ones(2, 3, dtype=torch.bool)).sum()
    loss.backward()
    assert torch.isfinite(emissions.grad).all() and torch.isfinite(crf.transitions.grad).all()
