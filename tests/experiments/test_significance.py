"""The experiment tables' statistics (experiments/_significance.py) against numbers worked out by hand."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import numpy as np  # noqa: E402
from _significance import compare, compare_paired, mcnemar_p, mean_std, seed_paired_p, verdict  # noqa: E402


def test_welch_t_test_matches_the_formula():
    # a = 1, 2, 3 and b = 4, 5, 6: means 2 and 5, variances 1 and 1; t = -3 / sqrt(1/3 + 1/3) = -3.674;
    # Welch df = (2/3)^2 / ((1/3)^2 / 2 * 2) = 4; two-sided p for |t| = 3.674 with 4 df (t-table) = 0.02131
    result = compare([1, 2, 3], [4, 5, 6])
    assert result.difference == -3.0
    assert result.p_value == pytest.approx(0.021312, abs=1e-6)


def test_bootstrap_interval_is_the_exact_percentile_of_the_resampling_distribution():
    # resampling a and b separately, mean(a*) - mean(b*) = (Y - 9) / 3 with Y + 6 the sum of 6 draws uniform on
    # {0, 1, 2}: its counts are the coefficients of (1 + x + x^2)^6 = 1, 6, 21, 50, ... out of 729, so
    # P(sum <= 1) = 0.96% and P(sum <= 2) = 3.84%: the 2.5% point is sum 2 (Y = -4, Δ = -13/3), the 97.5% point
    # by symmetry Y = +4 (Δ = -5/3)
    result = compare([1, 2, 3], [4, 5, 6])
    assert result.ci_low == pytest.approx(-13 / 3)
    assert result.ci_high == pytest.approx(-5 / 3)
    # two values against a constant: mean(a*) is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4
    small = compare([0, 1], [0, 0])
    assert (small.ci_low, small.ci_high) == (0.0, 1.0)
    assert small.p_value == pytest.approx(0.5)  # t = 0.5 / sqrt(0.5 / 2) = 1 with 1 df: p = 0.5
    assert compare([1, 2, 3], [4, 5, 6]) == compare([1, 2, 3], [4, 5, 6])  # seeded: the same table every time


def test_verdicts_follow_the_papers_direction():
    assert compare([4, 5, 6], [1, 2, 3]).verdict == "reproduced"
    assert compare([1, 2, 3], [4, 5, 6]).verdict == "opposite"
    assert compare([1, 2, 3], [4, 5, 6], paper_sign=-1).verdict == "reproduced"
    # the Table 1 NER seeds of docs/benchmarks/tasks.md: +1.68 F1, p = 0.071: not significant at 3 seeds
    ner = compare([87.50, 85.88, 85.84], [85.38, 84.65, 84.14])
    assert ner.difference == pytest.approx(1.6833, abs=1e-4) and ner.p_value == pytest.approx(0.0714, abs=1e-4)
    assert ner.verdict == "not significant"
    assert verdict(2.0, 0.049) == "reproduced" and verdict(2.0, 0.05) == "not significant"


def test_too_few_seeds_or_no_spread_give_no_p_value():
    one = compare([3.0], [1.0])
    assert math.isnan(one.p_value) and math.isnan(one.ci_low) and one.verdict == "not significant"
    assert one.cells() == ["+2.00", "–", "–", "not significant"]
    flat = compare([3, 3, 3], [1, 1, 1])
    assert math.isnan(flat.p_value) and (flat.ci_low, flat.ci_high) == (2.0, 2.0)
    assert compare([4, 5, 6], [1, 2, 3]).cells() == ["+3.00", "0.021", "[+1.67, +4.33]", "reproduced"]
    assert mean_std([1.0, 2.0, 3.0]) == "2.00 ± 1.00" and mean_std([1.0]) == "1.00"


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_items():
    # a alone right on 8 items, b alone on 2, both right on 90: P(X <= 2 | n = 10, 1/2) = (1 + 10 + 45) / 1024,
    # two-sided: 112 / 1024 = 0.109375
    a = np.array([True] * 8 + [False] * 2 + [True] * 90)
    b = np.array([False] * 8 + [True] * 2 + [True] * 90)
    assert mcnemar_p(a, b) == pytest.approx(112 / 1024)
    assert mcnemar_p(a, a) == 1.0  # no discordant item


def test_paired_comparison_resamples_whole_clusters():
    # 40 sentences of 5 words: a is right on every word, b on every word of the first 30 sentences only
    a = np.ones(200, dtype=bool)
    b = np.repeat(np.arange(40) < 30, 5)
    result = compare_paired(a, b, np.repeat(np.arange(40), 5))
    assert result.difference == pytest.approx(25.0)
    assert result.p_value == pytest.approx(2 * 0.5 ** 50)  # 50 discordant words, all a's
    # the CI is that of the share of wrong sentences (10 of 40) in points: the binomial spread, about +-13.4
    assert 10 < result.ci_low < 25 < result.ci_high < 40
    assert result.verdict == "reproduced"
    assert compare_paired(a, b, np.repeat(np.arange(40), 5), paper_sign=-1).verdict == "opposite"


def test_paired_t_test_on_seed_matched_runs_matches_the_formula():
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt(3)) = sqrt(12) with 2 df, where the t-distribution has a
    # closed form: two-sided p = 1 - t / sqrt(t^2 + 2) = 1 - sqrt(12 / 14) = 0.074180
    assert seed_paired_p([1, 2, 4], [0, 0, 1]) == pytest.approx(1 - math.sqrt(12 / 14), abs=1e-9)
    # Welch on the same numbers ignores the pairing: the seeds' spread hides the difference
    assert compare([1, 2, 4], [0, 0, 1]).p_value > 0.074180
    assert math.isnan(seed_paired_p([1, 2, 3], [0, 1, 2]))  # the same difference each time: t undefined
    assert math.isnan(seed_paired_p([1], [0]))
