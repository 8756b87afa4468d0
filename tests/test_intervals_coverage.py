"""Coverage of the intervals on a known distribution: a 95% interval covers the truth in about 95% of samples.

Each interval is computed on ``DRAWS`` samples of a normal distribution (or a binomial for Wilson)
and the share of samples whose interval holds the true mean is compared with 0.95.  With 1000
draws the share's standard error is sqrt(0.95 * 0.05 / 1000) = 0.0069, so [0.925, 0.975] is
about 3.6 standard errors either side, while an interval of 90% labelled 95% covers about 0.90
(0.89 for the percentile bootstrap at these sizes), 2.6+ standard errors below the floor.  The
percentile bootstrap of a mean under-covers a little at small n (about 0.945 at n = 100), inside
the band.  Seeds are fixed, so the test is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from entropy_lens.core.folds import corrected_t_interval
from entropy_lens.core.intervals import (
    bootstrap_mean_statistic,
    cluster_bootstrap_mean,
    paired_bootstrap,
    percentile_interval,
    wilson_interval,
)

DRAWS = 1000
N = 100
N_BOOT = 300
MEAN, SD = 1.0, 2.0
FLOOR, CEILING = 0.91, 0.975


def _samples() -> np.ndarray:
    return np.random.default_rng(0).normal(MEAN, SD, size=(DRAWS, N))


def _coverage(intervals) -> float:
    lows, highs = np.asarray(intervals, dtype=np.float64).T
    return float(np.mean((lows <= MEAN) & (highs >= MEAN)))


def _paired_bootstrap(x: np.ndarray, seed: int) -> tuple[float, float]:
    return paired_bootstrap(x, np.zeros_like(x), n_boot=N_BOOT, seed=seed)[1:]


def _cluster_bootstrap_mean(x: np.ndarray, seed: int) -> tuple[float, float]:
    return cluster_bootstrap_mean(x, np.arange(x.size), n_boot=N_BOOT, seed=seed)


def _bootstrap_mean_statistic(x: np.ndarray, seed: int) -> tuple[float, float]:
    low, high = bootstrap_mean_statistic(x[:, None], lambda means: means, n_boot=N_BOOT, seed=seed)
    return float(low[0]), float(high[0])


def _percentile_interval(x: np.ndarray, seed: int) -> tuple[float, float]:
    picks = np.random.default_rng(seed).integers(0, x.size, size=(N_BOOT, x.size))
    low, high = percentile_interval(x[picks].mean(axis=1))
    return float(low), float(high)


def _corrected_t(x: np.ndarray, seed: int) -> tuple[float, float]:
    # No overlap between "folds" (test/train ratio 0): the plain t interval, exact for normal data.
    return corrected_t_interval(x, 0.0, bounds=(-np.inf, np.inf))


@pytest.mark.parametrize(
    "interval",
    [_paired_bootstrap, _cluster_bootstrap_mean, _bootstrap_mean_statistic, _percentile_interval, _corrected_t],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_95_percent_interval_covers_the_true_mean_about_95_percent_of_the_time(interval):
    coverage = _coverage([interval(x, seed) for seed, x in enumerate(_samples())])
    assert FLOOR <= coverage <= CEILING, f"coverage {coverage:.3f} of a 95% interval"


def test_the_wilson_interval_covers_the_true_share_about_95_percent_of_the_time():
    p, n = 0.3, 80
    successes = np.random.default_rng(1).binomial(n, p, size=DRAWS)
    intervals = np.asarray([wilson_interval(int(k), n) for k in successes])
    coverage = float(np.mean((intervals[:, 0] <= p) & (p <= intervals[:, 1])))
    assert FLOOR <= coverage <= CEILING, f"coverage {coverage:.3f} of a 95% interval"
