"""Seed statistics of the experiment tables: mean ± std per cell, and per compared pair a Welch t-test, a 95%
bootstrap confidence interval of the difference of means, and a verdict on the paper's claim.

Only the experiment scripts use this (no command does), so it lives beside them, not in the package.

* Welch's t-test: ``scipy.stats.ttest_ind(a, b, equal_var=False)``, two-sided (seeds of two settings are
  independent samples whose spreads may differ).
* The confidence interval: ``scipy.stats.bootstrap`` on the difference ``mean(a) - mean(b)``, each sample resampled
  on its own (``paired=False``), percentile method, :data:`BOOTSTRAP_RESAMPLES` resamples, seeded with
  :data:`BOOTSTRAP_SEED` so that a table is the same every time it is written. With 3-5 seeds per side the interval
  is rough (a percentile bootstrap of so few values is too narrow); the t-test is what the verdict uses.
* The verdict (:func:`verdict`): "reproduced" only where p < :data:`ALPHA` and the difference has the sign the paper
  reports; "opposite" where p < ALPHA and it has the other sign; else "not significant".

Where the runs of two settings are matched by seed (the same seed gives the same task-model initialisation, data
order and dropout masks; only the ELMo features differ, as in the initial-state table), :func:`seed_paired_p` adds
the paired t-test (``scipy.stats.ttest_rel``) on the per-seed differences: the spread that the seed causes in both
settings cancels. The verdicts stay Welch's.

Two classifiers scored on the same test items (the probes' layers, :func:`compare_paired`) are paired samples
instead: McNemar's exact test (``scipy.stats.binomtest`` on the items exactly one of them gets right), and a
bootstrap CI of the accuracy difference that resamples whole clusters (a POS test sentence, whose words are not
independent; a WSD test instance). McNemar counts every item as independent, so for POS words its p is optimistic;
the verdict needs both p < ALPHA and a CI that excludes 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


def mean_std(values: Sequence[float]) -> str:
    """'mean ± std' (sample std, n - 1) with two decimals; one value alone."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b``: the difference of their means, its Welch p-value and bootstrap CI, and the verdict."""

    difference: float
    """mean(a) - mean(b)."""
    p_value: float
    """Two-sided Welch t-test; NaN where it is undefined (fewer than 2 seeds a side, or no spread at all)."""
    ci_low: float
    ci_high: float
    verdict: str

    def cells(self) -> list[str]:
        """The table's cells: Δ, p, 95% CI, verdict."""
        p = p_cell(self.p_value)
        ci = "–" if math.isnan(self.ci_low) else f"[{self.ci_low:+.2f}, {self.ci_high:+.2f}]"
        return [f"{self.difference:+.2f}", p, ci, self.verdict]


COMPARISON_HEADERS = ["Δ", "Welch p", "95% CI of Δ", "claim"]


def p_cell(p_value: float) -> str:
    """A p-value as the tables show it: three decimals, '< 0.001', or '–' where the test is undefined."""
    return "–" if math.isnan(p_value) else f"{p_value:.3f}" if p_value >= 0.001 else "< 0.001"


def compare(a: Sequence[float], b: Sequence[float], paper_sign: int = 1) -> Comparison:
    """Compare the seeds of setting ``a`` with those of ``b``; ``paper_sign`` +1: the paper has a > b, -1: a < b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    difference = float(a.mean() - b.mean())
    p_value, low, high = math.nan, math.nan, math.nan
    if len(a) >= 2 and len(b) >= 2:
        p_value = welch_p_value(a, b)
        low, high = bootstrap_ci(a, b)
    return Comparison(difference, p_value, low, high, verdict(difference, p_value, paper_sign))


def welch_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test; NaN where both sides have no spread (t is undefined)."""
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return math.nan
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def seed_paired_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p of seed-matched runs (``a[i]`` and ``b[i]`` share seed i); NaN where it is undefined
    (fewer than 2 pairs, or the same difference for every seed)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) < 2 or np.ptp(d) == 0:
        return math.nan
    return float(stats.ttest_rel(a, b).pvalue)


def bootstrap_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95% percentile-bootstrap interval of mean(a) - mean(b), each sample resampled on its own (seeded)."""
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        d = float(a.mean() - b.mean())
        return d, d  # every resample gives the same difference
    result = stats.bootstrap(
        (a, b), lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis), paired=False, vectorized=True,
        confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def verdict(difference: float, p_value: float, paper_sign: int = 1) -> str:
    """"reproduced", "opposite" or "not significant" (also when p is undefined)."""
    if math.isnan(p_value) or p_value >= ALPHA or difference == 0:
        return "not significant"
    return "reproduced" if (difference > 0) == (paper_sign > 0) else "opposite"


PAIRED_HEADERS = ["Δ (points)", "McNemar p", "95% CI of Δ", "claim"]


def mcnemar_p(a_correct: np.ndarray, b_correct: np.ndarray) -> float:
    """Two-sided exact McNemar p-value of two classifiers' (items,) correctness on the same items."""
    a_only = int((a_correct & ~b_correct).sum())
    discordant = a_only + int((~a_correct & b_correct).sum())
    return 1.0 if discordant == 0 else float(stats.binomtest(a_only, discordant, 0.5).pvalue)


def cluster_bootstrap_ci(a_correct: np.ndarray, b_correct: np.ndarray, clusters: np.ndarray,
                         chunk: int = 500) -> tuple[float, float]:
    """95% percentile interval of accuracy(a) - accuracy(b) in points, resampling whole clusters (seeded)."""
    _, cluster_of = np.unique(clusters, return_inverse=True)
    difference = np.bincount(cluster_of, weights=a_correct.astype(float) - b_correct.astype(float))  # (clusters,)
    size = np.bincount(cluster_of).astype(float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    samples = []
    for start in range(0, BOOTSTRAP_RESAMPLES, chunk):
        picked = rng.integers(0, len(size), (min(chunk, BOOTSTRAP_RESAMPLES - start), len(size)))
        samples.append(100 * difference[picked].sum(axis=1) / size[picked].sum(axis=1))
    low, high = np.percentile(np.concatenate(samples), [50 * (1 - CONFIDENCE), 100 - 50 * (1 - CONFIDENCE)])
    return float(low), float(high)


def compare_paired(a_correct: np.ndarray, b_correct: np.ndarray, clusters: np.ndarray | None = None,
                   paper_sign: int = 1) -> Comparison:
    """Classifier ``a`` against ``b`` on the same items: accuracy difference in points, McNemar p, cluster-bootstrap
    CI (each item its own cluster when ``clusters`` is None) and the verdict (p < ALPHA and the CI excludes 0)."""
    a_correct, b_correct = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    clusters = np.arange(len(a_correct)) if clusters is None else np.asarray(clusters)
    difference = float(100 * (a_correct.mean() - b_correct.mean()))
    p_value = mcnemar_p(a_correct, b_correct)
    low, high = cluster_bootstrap_ci(a_correct, b_correct, clusters)
    claim = verdict(difference, p_value if low > 0 or high < 0 else math.nan, paper_sign)
    return Comparison(difference, p_value, low, high, claim)
