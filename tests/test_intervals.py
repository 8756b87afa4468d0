"""Intervals over the right unit: Wilson, paired bootstrap, cluster bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from entropy_lens.core import intervals


def test_wilson_matches_the_closed_form():
    lo, hi = intervals.wilson_interval(7, 20)
    z, p, n = 1.959964, 0.35, 20
    centre, half = (
        (p + z * z / (2 * n)) / (1 + z * z / n),
        z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n),
    )
    assert lo == pytest.approx(centre - half, abs=1e-6) and hi == pytest.approx(centre + half, abs=1e-6)
    assert intervals.wilson_interval(0, 10)[0] == 0.0 and all(math.isnan(v) for v in intervals.wilson_interval(0, 0))
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        intervals.wilson_interval(5, 3)
    with pytest.raises(ValueError, match="level must lie in"):
        intervals.wilson_interval(1, 3, level=95)


def test_paired_bootstrap_keeps_the_pairing():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=200) * 5  # a large per-question effect both conditions share
    a, b = shared + 0.3 + rng.normal(size=200) * 0.1, shared
    mean, lo, hi = intervals.paired_bootstrap(a, b, n_boot=500)
    assert mean == pytest.approx(0.3, abs=0.02) and 0.25 < lo < mean < hi < 0.35  # unpaired: about +-1
    with pytest.raises(ValueError, match="equal-length non-empty"):
        intervals.paired_bootstrap(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="n_boot must be a positive integer"):
        intervals.paired_bootstrap(a, b, n_boot=0)


def test_cluster_bootstrap_mean_agrees_with_resampling_clusters_by_hand():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 30, size=25)
    clusters = np.repeat(np.arange(25), sizes)
    values = np.repeat(rng.normal(size=25), sizes) + rng.normal(size=clusters.size) * 0.1
    lo, hi = intervals.cluster_bootstrap_mean(values, clusters, n_boot=4000, seed=2)
    by_hand = []
    for _ in range(2000):
        drawn = rng.integers(0, 25, size=25)
        rows = np.concatenate([np.flatnonzero(clusters == c) for c in drawn])
        by_hand.append(values[rows].mean())
    assert lo == pytest.approx(np.quantile(by_hand, 0.025), abs=0.08)
    assert hi == pytest.approx(np.quantile(by_hand, 0.975), abs=0.08)
    assert all(math.isnan(v) for v in intervals.cluster_bootstrap_mean(values, np.zeros(values.size)))


def test_cluster_sums_are_exact_multiplicities():
    sums = intervals.cluster_sums(
        (np.ones(4), np.array([1.0, 2.0, 3.0, 4.0])), np.array([0, 0, 1, 1]), n_boot=50, seed=0
    )
    assert sums.shape == (2, 50)
    assert set(zip(sums[0], sums[1], strict=True)) <= {(4.0, 6.0), (4.0, 10.0), (4.0, 14.0)}  # {0,0}, {0,1}, {1,1}
