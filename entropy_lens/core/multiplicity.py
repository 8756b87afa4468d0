"""Many comparisons in one claim: p-values from bootstrap draws and Holm's step-down correction.

A claim judged on many rows (the layer-skip comparisons: every ``k``, variant, letter measure and
statistic) decides something by chance on some row unless its rows are corrected together.  Each
row's p-value comes from its own paired bootstrap (:func:`paired_draws`, :func:`paired_set_draws`,
the same draws as :func:`~entropy_lens.core.intervals.paired_bootstrap` and
:func:`~entropy_lens.core.intervals.paired_bootstrap_sets` make under the same seed): two-sided
against 0 with the bootstrap's standard error, read against Student's t over the questions
(:func:`bootstrap_p_value`; a percentile p-value of 1,000 draws cannot go below 0.001, and Holm
over 48 rows needs about that).  Holm's procedure (:func:`holm`) then adjusts them, and
:func:`holm_levels` gives each row the level of its step-down test, so that the row's interval at
that level excludes 0 exactly when Holm rejects it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.intervals import check_level

# Family-wise error rate of a claim's comparisons.
FAMILY_ALPHA = 0.05


def paired_draws(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot]`` bootstrap means of ``a - b`` over paired units (questions resampled together)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"a and b must be equal-length non-empty 1-D arrays, got shapes {a.shape} and {b.shape}")
    diff = a - b
    picks = np.random.default_rng(seed).integers(0, diff.size, size=(check_positive_int(n_boot, "n_boot"), diff.size))
    return diff[picks].mean(axis=1)


def unit_set_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` ``[N]`` per-unit scores and ``b`` ``[N, S]`` the same units' scores under ``S`` sets, as float64.

    Raises:
        ValueError: naming both shapes unless they are ``[N]`` and ``[N, S]`` with ``N, S > 0``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 2 or b.shape[0] != a.size or a.size == 0 or b.shape[1] == 0:
        raise ValueError(f"need a [N] and b [N, S] with N, S > 0, got shapes {a.shape} and {b.shape}")
    return a, b


def paired_set_draws(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot]`` bootstrap draws of ``mean(a) - mean(b)``, ``b`` ``[N, S]`` over sets: units and sets resampled."""
    a, b = unit_set_pair(a, b)
    n_boot = check_positive_int(n_boot, "n_boot")
    rng = np.random.default_rng(seed)
    units = rng.multinomial(a.size, np.full(a.size, 1 / a.size), n_boot) / a.size  # [B, N] weights
    sets = rng.multinomial(b.shape[1], np.full(b.shape[1], 1 / b.shape[1]), n_boot) / b.shape[1]  # [B, S]
    return units @ a - np.einsum("bn,ns,bs->b", units, b, sets)


def bootstrap_se(draws: np.ndarray, units: int) -> float:
    """Standard error of a mean from its bootstrap draws over ``units`` resampled units.

    The bootstrap's spread of a mean is ``sqrt((n - 1) / n)`` of its standard error ``s / sqrt(n)``;
    it is scaled back, so that with :func:`bootstrap_p_value`'s t reference the test has its level.
    NaN with fewer than 2 finite draws or units.
    """
    values = np.asarray(draws, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < 2 or units < 2:
        return math.nan
    return float(values.std(ddof=1) * math.sqrt(units / (units - 1)))


def _check_df(df: float) -> float:
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}; pass the units behind the mean minus 1")
    return float(df)


def _sf(x: float, df: float) -> float:
    """Upper tail of Student's t with ``df`` degrees of freedom (the normal's for ``df = inf``)."""
    return float(special.ndtr(-x) if math.isinf(_check_df(df)) else special.stdtr(df, -x))


def _ppf(q: float, df: float) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (the normal's for ``df = inf``)."""
    return float(special.ndtri(q) if math.isinf(_check_df(df)) else special.stdtrit(df, q))


def bootstrap_p_value(estimate: float, se: float, df: float = math.inf) -> float:
    """Two-sided p-value of ``estimate`` against 0 with bootstrap standard error ``se``.

    ``estimate / se`` is read against Student's t with ``df`` degrees of freedom (the units behind
    the mean minus one): at the small levels Holm tests over many rows, the normal's tails would
    reject about twice as often as they say at 40 questions.  NaN when it cannot be computed: a
    non-finite estimate or a zero or non-finite spread (a degenerate bootstrap decides nothing).
    """
    if not (math.isfinite(estimate) and math.isfinite(se)) or se <= 0:
        return math.nan
    return 2 * _sf(abs(estimate) / se, df)


def _order(p: np.ndarray) -> np.ndarray:
    """Ranks of ``p`` ascending, NaN (no test) last; ties keep their order."""
    return np.argsort(np.where(np.isnan(p), np.inf, p), kind="stable")


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of one family (NaN stays NaN and does not count as a test).

    ``p_holm[(i)] = max_{j <= i} min(1, (m - j + 1) p[(j)])`` over the ``m`` finite p-values sorted
    ascending; a row is rejected at family-wise level ``alpha`` when ``p_holm <= alpha``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or ((p < 0) | (p > 1)).any():
        raise ValueError(f"p_values must be a 1-D array in [0, 1] (NaN for no test), got {p_values!r}")
    m = int(np.isfinite(p).sum())
    out = np.full(p.shape, np.nan)
    order = _order(p)[:m]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled) if m else scaled
    return out


def holm_levels(p_values: np.ndarray, alpha: float = FAMILY_ALPHA) -> np.ndarray:
    """The coverage of each row's step-down test: ``1 - alpha / (m - r + 1)``.

    ``r`` is the row's rank among the ``m`` finite p-values, capped at the rank where Holm stops
    (the first row it does not reject): so a row's interval at this level excludes 0 exactly when
    Holm rejects it.  NaN for rows without a p-value.
    """
    alpha = 1 - check_level(1 - alpha)
    p = np.asarray(p_values, dtype=np.float64)
    m = int(np.isfinite(p).sum())
    out = np.full(p.shape, np.nan)
    if m == 0:
        return out
    order = _order(p)[:m]
    thresholds = alpha / (m - np.arange(m))  # alpha / (m - r + 1), r = 1..m
    failed = np.flatnonzero(p[order] > thresholds)
    stop = int(failed[0]) if failed.size else m - 1
    ranks = np.minimum(np.arange(m), stop)
    out[order] = 1 - alpha / (m - ranks)
    return out


def normal_interval(estimate: float, se: float, level: float, df: float = math.inf) -> tuple[float, float]:
    """``estimate +- t se`` at two-sided ``level``, ``t`` of :func:`bootstrap_p_value`'s reference (NaN where
    the p-value would be NaN): it excludes 0 exactly when that p-value is below ``1 - level``."""
    if not (math.isfinite(estimate) and math.isfinite(se) and math.isfinite(level)) or se <= 0:
        return math.nan, math.nan
    half = _ppf(1 - (1 - check_level(level)) / 2, df) * se
    return estimate - half, estimate + half
