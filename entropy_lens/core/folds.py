"""Statistics over the fold scores of repeated cross-validation: the corrected resampled t.

Folds of repeated k-fold cross-validation share training data, so their scores are not independent; Nadeau and
Bengio (2003) correct the variance of their mean to ``(1/F + n_test/n_train) * s^2``. Pure NumPy/SciPy: the
interval of a mean fold score (or of a paired difference of two classifiers' scores on the same folds) and a
one-sided paired p-value.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

DEFAULT_LEVEL = 0.95
PAIRED_TESTS = ("wilcoxon", "ttest", "corrected_ttest")
DEFAULT_TEST = "corrected_ttest"
AUC_BOUNDS = (0.0, 1.0)
DIFFERENCE_BOUNDS = (-1.0, 1.0)
# The corrected resampled t over F = folds x repeats fold scores has F - 1 degrees of freedom; with 2 folds and 1
# repeat, two equal AUCs give a zero-width interval that would decide a verdict. The floor every kNN run keeps.
MIN_FOLDS, MIN_FOLD_AUCS = 3, 6


def check_fold_counts(folds: int, repeats: int, *, names: tuple[str, str] = ("folds", "repeats")) -> None:
    """``ValueError`` unless ``folds >= MIN_FOLDS`` and ``folds x repeats >= MIN_FOLD_AUCS``, naming the settings
    as ``names`` (the config's keys where the config is read)."""
    if folds < MIN_FOLDS or folds * repeats < MIN_FOLD_AUCS:
        raise ValueError(
            f"{names[0]} ({folds}) x {names[1]} ({repeats}) = {folds * repeats} fold AUCs "
            f"cannot give an interval: the corrected resampled-t needs folds >= {MIN_FOLDS} and folds x repeats >= "
            f"{MIN_FOLD_AUCS}; raise them (e.g. folds: 3, repeats: 2)"
        )


def corrected_t_interval(
    scores: np.ndarray,
    test_train_ratio: float,
    level: float = DEFAULT_LEVEL,
    *,
    bounds: tuple[float, float] = AUC_BOUNDS,
) -> tuple[float, float]:
    """Interval of the mean of repeated-CV fold scores, corrected for shared training data.

    Nadeau & Bengio (2003): folds of repeated k-fold CV overlap, so the variance of the
    mean is ``(1/F + n_test/n_train) * s^2`` rather than ``s^2 / F``; the interval is
    ``mean +- t_{(1+level)/2, F-1} * sqrt(that)``, clipped to ``bounds``.

    Args:
        scores: ``[F]`` fold scores (AUCs, or paired differences of AUCs), ``F >= 2``.
        test_train_ratio: ``n_test / n_train`` of one split (``1 / (n_splits - 1)``).
        level: Coverage in ``(0, 1)``.
        bounds: The range the scores can take: ``[0, 1]`` for AUCs, ``[-1, 1]`` for
            differences of AUCs.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two scores.
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.size < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf((1 + level) / 2, values.size - 1) * math.sqrt(
        values.var(ddof=1) * (1.0 / values.size + test_train_ratio)
    )
    mean = float(values.mean())
    return max(mean - half, bounds[0]), min(mean + half, bounds[1])


def paired_p_value(a: np.ndarray, b: np.ndarray, test: str = DEFAULT_TEST, *, test_train_ratio: float = 0.0) -> float:
    """One-sided p-value that fold scores ``a`` exceed ``b`` (paired by fold).

    Args:
        a: ``[F]`` scores (kNN AUC per fold).
        b: ``[F]`` scores (dummy AUC on the same folds).
        test: ``wilcoxon`` (signed-rank), ``ttest`` (paired t) or ``corrected_ttest``
            (Nadeau-Bengio: variance times ``1/F + test_train_ratio``).
        test_train_ratio: ``n_test / n_train`` for ``corrected_ttest``.

    Returns:
        p in ``[0, 1]``; 1.0 when every difference is zero; 0.0 (1.0) when every
        difference is the same positive (negative) number.
    """
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if np.allclose(diff, 0.0):
        return 1.0
    if np.allclose(diff, diff.mean()):  # constant non-zero difference: t is infinite
        return 0.0 if diff.mean() > 0 else 1.0
    if test == "wilcoxon":
        return float(stats.wilcoxon(diff, alternative="greater").pvalue)
    if test == "ttest":
        return float(stats.ttest_1samp(diff, 0.0, alternative="greater").pvalue)
    if test == "corrected_ttest":
        var = diff.var(ddof=1) * (1.0 / diff.size + test_train_ratio)
        return float(stats.t.sf(diff.mean() / math.sqrt(var), df=diff.size - 1))
    raise ValueError(f"test must be one of {PAIRED_TESTS}, got {test!r}")
