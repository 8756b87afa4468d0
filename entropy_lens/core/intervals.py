"""Confidence intervals over the right unit: questions, prompts, folds.

Pure NumPy/SciPy functions shared by the analyses and the MMLU / layer-skip tables.
Every interval is two-sided at ``level`` (default 95%) and is computed over the
independent unit of the data: a Wilson interval over questions for an accuracy, a
paired bootstrap over questions for a difference of accuracies on the same questions,
and a cluster bootstrap over prompts for a correlation whose rows (token, layer) are
nested in prompts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from entropy_lens.core.checks import check_positive_int

DEFAULT_LEVEL = 0.95
DEFAULT_N_BOOT = 1000


def check_level(level: float) -> float:
    """``level`` as a float, or ``ValueError`` unless it lies in ``(0, 1)``."""
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    return float(level)


def wilson_interval(successes: int, n: int, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n``.

    Returns:
        ``(low, high)`` in ``[0, 1]``; ``(nan, nan)`` when ``n == 0``.
    """
    level = check_level(level)
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got successes={successes!r}, n={n!r}")
    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    """:func:`percentile_interval` of ``[B]`` draws, as floats."""
    low, high = percentile_interval(draws, level)
    return float(low), float(high)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """Mean of ``a - b`` over units measured under both conditions, with a percentile interval.

    The units (questions) are resampled with replacement and the same draw is used for
    both conditions, so the interval keeps the pairing.

    Args:
        a: ``[N]`` per-unit scores under condition A (e.g. 0/1 correct, or a mean over
            random layer sets).
        b: ``[N]`` scores of the same units under condition B.
        n_boot: Bootstrap replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(mean_difference, low, high)``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"a and b must be equal-length non-empty 1-D arrays, got shapes {a.shape} and {b.shape}")
    diff = a - b
    level, n_boot = check_level(level), check_positive_int(n_boot, "n_boot")
    picks = np.random.default_rng(seed).integers(0, diff.size, size=(n_boot, diff.size))
    return (float(diff.mean()), *_percentiles(diff[picks].mean(axis=1), level))


def paired_bootstrap_sets(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """Mean of ``a`` minus the mean of ``b`` over units and a population of sets, resampling both.

    For a baseline that is a sample of sets (random layer sets) measured on the same units
    (questions): each replicate draws the units with replacement (the same draw for ``a`` and
    ``b``, keeping the pairing) and, independently, the sets with replacement, so the interval
    covers both the questions and the sets drawn.

    Args:
        a: ``[N]`` per-unit scores under condition A.
        b: ``[N, S]`` per-unit scores under each of ``S`` sets.
        n_boot: Bootstrap replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(mean(a) - mean(b), low, high)``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 2 or b.shape[0] != a.size or a.size == 0 or b.shape[1] == 0:
        raise ValueError(f"need a [N] and b [N, S] with N, S > 0, got shapes {a.shape} and {b.shape}")
    level, n_boot = check_level(level), check_positive_int(n_boot, "n_boot")
    rng = np.random.default_rng(seed)
    units = rng.multinomial(a.size, np.full(a.size, 1 / a.size), n_boot) / a.size  # [B, N] weights
    sets = rng.multinomial(b.shape[1], np.full(b.shape[1], 1 / b.shape[1]), n_boot) / b.shape[1]  # [B, S]
    draws = units @ a - np.einsum("bn,ns,bs->b", units, b, sets)
    return (float(a.mean() - b.mean()), *_percentiles(draws, level))


def cluster_sums(weights: Sequence[np.ndarray], clusters: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray | None:
    """Bootstrap replicates of per-row sums, drawing whole clusters with replacement.

    Each replicate draws as many clusters as there are (multinomial counts) and sums every
    ``weights[j]`` over the rows of the drawn clusters, each counted as often as drawn:
    exact, and ``O(n_boot x n_clusters)`` however many rows a cluster holds.

    Args:
        weights: ``J`` arrays of ``[n]`` per-row values to sum.
        clusters: ``[n]`` cluster label of each row.
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.

    Returns:
        ``[J, n_boot]`` sums, or ``None`` with fewer than two clusters.
    """
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1]
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    if n_clusters < 2:
        return None
    per_cluster = np.stack([np.bincount(codes, np.asarray(w, dtype=np.float64), minlength=n_clusters) for w in weights])
    counts = np.random.default_rng(seed).multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=n_boot)
    return (counts @ per_cluster.T).T


def cluster_bootstrap_correlation(
    x: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> tuple[float, float]:
    """Percentile interval of the Pearson correlation of ``x`` and ``y`` resampling whole clusters.

    Rows nested in a cluster (the token x layer rows of one prompt) are not independent,
    so clusters, not rows, are drawn with replacement (:func:`cluster_sums`).  Pass ranks
    to bootstrap a Spearman correlation (ranks then stay those of the full sample).

    Args:
        x: ``[n]`` values.
        y: ``[n]`` values.
        clusters: ``[n]`` cluster label of each row.
        n_boot: Bootstrap replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two clusters.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or np.shape(clusters) != x.shape:
        raise ValueError(f"x, y and clusters must be 1-D of one length, got {x.shape}, {y.shape}, {np.shape(clusters)}")
    level, n_boot = check_level(level), check_positive_int(n_boot, "n_boot")
    x, y = x - x.mean(), y - y.mean()  # centring keeps the sums well conditioned
    sums = cluster_sums((np.ones_like(x), x, y, x * x, y * y, x * y), clusters, n_boot=n_boot, seed=seed)
    if sums is None:
        return math.nan, math.nan
    n, sx, sy, sxx, syy, sxy = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (sxy - sx * sy / n) / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n))
    return _percentiles(r[np.isfinite(r)], level)


def cluster_bootstrap_mean(
    values: np.ndarray,
    clusters: np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` resampling whole clusters (:func:`cluster_sums`).

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two clusters.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or np.shape(clusters) != values.shape:
        raise ValueError(f"values and clusters must be 1-D of one length, got {values.shape}, {np.shape(clusters)}")
    level, n_boot = check_level(level), check_positive_int(n_boot, "n_boot")
    sums = cluster_sums((np.ones_like(values), values), clusters, n_boot=n_boot, seed=seed)
    if sums is None:
        return math.nan, math.nan
    return _percentiles(sums[1] / sums[0], level)


def bootstrap_mean_statistic(
    rows: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of ``statistic`` of the mean row, resampling rows with replacement.

    Each row is one independent unit (e.g. the mean profile of one source); a replicate
    draws as many rows as there are and takes their mean.

    Args:
        rows: ``[N, L]`` values per unit.
        statistic: Maps ``[B, L]`` mean rows to ``[B, J]`` statistics (NaN allowed).
        n_boot: Bootstrap replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(low, high)``, each ``[J]``; NaN with fewer than two rows or where every replicate is NaN.
    """
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"rows must be a 2-D [units, values] array, got shape {rows.shape}")
    level, n_boot = check_level(level), check_positive_int(n_boot, "n_boot")
    n_stats = statistic(rows[:1]).shape[-1]
    if rows.shape[0] < 2:
        return np.full(n_stats, math.nan), np.full(n_stats, math.nan)
    counts = np.random.default_rng(seed).multinomial(rows.shape[0], np.full(rows.shape[0], 1 / rows.shape[0]), n_boot)
    return percentile_interval(statistic(counts @ rows / rows.shape[0]), level)  # [B, J] draws


def bootstrap_group_means(
    groups: Sequence[np.ndarray], *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0
) -> list[np.ndarray]:
    """Bootstrap replicates of each group's mean row, each group resampled on its own.

    For groups measured independently (the blank samples of different models are generated
    independently): replicate ``b`` of group ``i`` is the mean of ``N_i`` rows drawn with
    replacement from that group alone.

    Args:
        groups: ``[N_i, L_i]`` rows (independent units) of each group.
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng` (one stream, groups in order).

    Returns:
        ``[n_boot, L_i]`` replicate means per group.
    """
    n_boot = check_positive_int(n_boot, "n_boot")
    rng = np.random.default_rng(seed)
    out = []
    for rows in groups:
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] == 0:
            raise ValueError(f"each group must be a non-empty 2-D [units, values] array, got shape {rows.shape}")
        counts = rng.multinomial(rows.shape[0], np.full(rows.shape[0], 1 / rows.shape[0]), n_boot)
        out.append(counts @ rows / rows.shape[0])
    return out


def percentile_interval(draws: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of ``[B, ...]`` bootstrap draws along the first axis (NaN draws ignored).

    The one percentile interval of the package: every bootstrap's interval is this one or
    :func:`expanded_percentile_interval`.

    Returns:
        ``(low, high)``, each of the draws' shape without the first axis (0-d for ``[B]`` draws).
    """
    tail = (1 - check_level(level)) / 2
    return _tail_quantiles(draws, tail)


# Fewest finite replicates an expanded percentile interval reads (fewer: NaN).
MIN_REPLICATES = 100


def expanded_percentile_interval(draws: np.ndarray, n_units: int, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Expanded percentile interval of the finite bootstrap ``draws`` over ``n_units`` resampled units.

    The plain percentile interval under-covers with few units (its spread is that of a
    ``(n - 1) / n`` variance and of normal, not t, quantiles); the expanded one (Hesterberg 2015,
    "What teachers should know about the bootstrap") takes the percentiles at the tail
    ``Phi(-sqrt(n / (n - 1)) t_{n-1}(1 - tail))``, as wide as a t interval would be.  NaN with
    fewer than :data:`MIN_REPLICATES` finite draws or fewer than two units.
    """
    draws = np.asarray(draws, dtype=np.float64)
    draws = draws[np.isfinite(draws)]
    if draws.size < MIN_REPLICATES or n_units < 2:
        return math.nan, math.nan
    t = stats.t.ppf(1 - (1 - level) / 2, n_units - 1)
    tail = float(stats.norm.cdf(-math.sqrt(n_units / (n_units - 1)) * t))
    low, high = _tail_quantiles(draws, tail)
    return float(low), float(high)


def _tail_quantiles(draws: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``tail`` and ``1 - tail`` quantiles of the draws along the first axis, NaN draws ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives NaN
        low, high = np.nanquantile(np.asarray(draws, dtype=np.float64), [tail, 1 - tail], axis=0)
    return low, high
