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


def test_the_percentile_interval_reads_every_finite_draw_and_the_expanded_one_is_wider():
    draws = np.random.default_rng(0).normal(size=2000)
    low, high = intervals.percentile_interval(draws)
    tail = (1 - 0.95) / 2
    assert (float(low), float(high)) == tuple(np.quantile(draws, [tail, 1 - tail]))
    with_nan = np.concatenate([draws, [np.nan] * 50])
    assert tuple(map(float, intervals.percentile_interval(with_nan))) == (float(low), float(high))
    # few units: the expanded interval takes wider tails, as a t interval would; with many it nearly agrees
    few, many = intervals.expanded_percentile_interval(draws, 5), intervals.expanded_percentile_interval(draws, 5000)
    assert few[0] < low and few[1] > high and many == pytest.approx((low, high), abs=0.02)
    assert all(math.isnan(v) for v in intervals.expanded_percentile_interval(draws[:99], 50))  # too few replicates
    assert all(math.isnan(v) for v in intervals.expanded_percentile_interval(draws, 1))


def test_the_block_spearman_resamples_units_and_blocks_and_pairs_its_replicates():
    from entropy_lens.core.block_spearman import block_spearman_draws, spearman_interval

    rng = np.random.default_rng(1)
    truth = np.linspace(0, 1, 12)
    cost = truth + rng.normal(0, 0.3, size=(40, 12))
    score = truth + rng.normal(0, 0.3, size=(40, 12))
    rho, draws = block_spearman_draws(cost, score, n_boot=300, seed=0, paired=True)
    assert rho > 0.8 and draws.shape == (300,) and spearman_interval(rho, draws)[1] > 0
    # paired: two scores read against one cost with one seed are resampled alike (their difference is exact 0)
    assert np.array_equal(draws, block_spearman_draws(cost, score, n_boot=300, seed=0, paired=True)[1])
    # unpaired: the score's own units (another count of questions) are drawn on their own
    rho_q, draws_q = block_spearman_draws(cost, score[:25], n_boot=300, seed=0, paired=False)
    assert rho_q > 0.8 and not np.array_equal(draws_q, draws)
    assert math.isnan(block_spearman_draws(cost[:, :2], score[:, :2], n_boot=10, seed=0, paired=True)[0])
    assert all(math.isnan(v) for v in spearman_interval(np.nan, draws))
    with pytest.raises(ValueError, match="of one shape"):
        block_spearman_draws(cost, score[:25], n_boot=10, seed=0, paired=True)
    with pytest.raises(ValueError, match="over the same blocks"):
        block_spearman_draws(cost, score[:, :5], n_boot=10, seed=0, paired=False)


def test_the_block_spearman_with_blocks_fixed_resamples_the_units_alone():
    from entropy_lens.core.block_spearman import block_spearman_draws, spearman_interval, unit_means

    rng = np.random.default_rng(2)
    cost = np.where(np.arange(20) > 16, 3.0, 0.0) + rng.normal(0, 0.1, size=(60, 20))  # three costly blocks
    score = np.linspace(0, 1, 20) + rng.normal(0, 0.1, size=(60, 20))
    rho, fixed = block_spearman_draws(cost, score, n_boot=300, seed=0, paired=True, blocks_fixed=True)
    _, resampled = block_spearman_draws(cost, score, n_boot=300, seed=0, paired=True)
    assert rho == block_spearman_draws(cost, score, n_boot=10, seed=0, paired=True)[0]  # one statistic either way
    assert spearman_interval(rho, fixed)[1] > 0  # this model's three blocks decide it: the questions' noise alone
    assert np.nanstd(fixed) < np.nanstd(resampled) / 2  # resampling blocks loses them in some draws
    # a block every unit scores +inf (never pruned) ranks on top in every replicate, not NaN
    protected = score.copy()
    protected[:, :2] = np.inf
    assert np.isinf(unit_means(protected)[0, :2]).all() and np.isfinite(unit_means(protected)[0, 2:]).all()
    _, draws = block_spearman_draws(cost, protected, n_boot=50, seed=0, paired=True, blocks_fixed=True)
    assert np.isfinite(draws).all()


def test_the_planted_rate_counts_the_draws_its_decision_shows():
    from entropy_lens.core.planted import planted_rate

    seen: list[int] = []

    def simulate(rng: np.random.Generator, draw: int) -> float:
        seen.append(draw)
        return float(rng.uniform())

    assert planted_rate(simulate, lambda u: u < 0.25, draws=400, seed=0) == pytest.approx(0.25, abs=0.06)
    assert seen[:3] == [0, 1, 2] and len(seen) == 400
    # one generator runs through the draws: the same seed gives the same rate
    assert planted_rate(simulate, lambda u: u < 0.5, draws=50, seed=3) == planted_rate(
        simulate, lambda u: u < 0.5, draws=50, seed=3
    )
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        planted_rate(simulate, bool, draws=0, seed=0)
