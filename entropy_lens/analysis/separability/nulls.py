"""Planted nulls of the separability rows: data on which "beyond its null" is false, read by the rows' own code.

Two nulls stand beside a kNN AUC: the stratified dummy on the same folds
(:meth:`~entropy_lens.analysis.separability.knn.AucResult.beyond`, every row of the kNN table) and a baseline
on the same folds (:mod:`entropy_lens.analysis.separability.baselines`).  Each rate here sends ``draws``
synthetic data sets where the claim is false through the same code path and counts the draws whose paired
excess ``shown`` (the verdicts' one decision, handed in: :func:`entropy_lens.core.planted.planted_rate`)
calls beyond the null:

* :func:`knn_planted_rate`: labels drawn independently of the profiles, so the profile
  carries nothing a stratified guess does not;
* :func:`baseline_planted_rate`: the profile and the baseline are two independent
  draws of the same class-dependent features, so the profile carries nothing beyond the
  baseline (both separate the labels equally).

Data: Gaussian features (``N x DIM``), two balanced classes, plain stratified folds of the
settings given (default: 5 folds, 3 repeats, ``k = 29`` capped as the table's).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entropy_lens.analysis.separability.baselines import paired_row
from entropy_lens.analysis.separability.folds import plan_folds
from entropy_lens.analysis.separability.knn import knn_auc, score_folds
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.planted import Excess, Shown, planted_rate

DIM = 8
# The planted signal of the baseline null: a class shift of half a standard deviation per feature,
# so both feature sets separate the classes clearly but not perfectly (AUC about 0.8).
BASELINE_SHIFT = 0.5
PLANTED_SETTINGS = KnnSettings(n_splits=5, n_repeats=3)


def knn_planted_rate(
    n_samples: int,
    draws: int = 100,
    seed: int = 0,
    settings: KnnSettings | None = None,
    *,
    shown: Shown,
    shift: float = 0.0,
) -> float:
    """Share of draws where kNN is shown beyond the stratified dummy on labels independent of the features.

    Args:
        n_samples: Samples per draw (two balanced classes), ``>= 8``.
        draws: Synthetic data sets.
        seed: Seed of :func:`numpy.random.default_rng` (the folds use ``settings.seed``).
        settings: kNN settings (default :data:`PLANTED_SETTINGS`).
        shown: ``(beyond, beyond_low, beyond_high) -> bool``: the decision on the paired excess over the dummy.
        shift: Class shift of the features in standard deviations; ``0`` is the null, a
            positive value plants a signal (the rate is then the power).

    Returns:
        The share in ``[0, 1]``.
    """
    settings = _check(n_samples, settings)

    def simulate(rng: np.random.Generator, _: int) -> Excess:
        X, y = _draw(rng, n_samples, shift)
        return _excess(knn_auc(X, y, settings).summary())

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def baseline_planted_rate(
    n_samples: int,
    draws: int = 100,
    seed: int = 0,
    settings: KnnSettings | None = None,
    *,
    shown: Shown,
    shift: float = 0.0,
) -> float:
    """Share of draws where the profile is shown beyond a baseline that carries the same signal.

    The profile's features carry ``BASELINE_SHIFT + shift`` of class shift and the baseline's
    :data:`BASELINE_SHIFT`, both drawn independently; both are scored on one fold plan and
    compared by :func:`~entropy_lens.analysis.separability.baselines.paired_row`.

    Args:
        n_samples: Samples per draw (two balanced classes), ``>= 8``.
        draws: Synthetic data sets.
        seed: Seed of :func:`numpy.random.default_rng`.
        settings: kNN settings (default :data:`PLANTED_SETTINGS`).
        shown: ``(beyond, beyond_low, beyond_high) -> bool``: the decision on the paired excess over the baseline.
        shift: Extra class shift of the profile; ``0`` is the null.

    Returns:
        The share in ``[0, 1]``.
    """
    settings = _check(n_samples, settings)

    def simulate(rng: np.random.Generator, _: int) -> Excess:
        X_profile, y = _draw(rng, n_samples, BASELINE_SHIFT + shift)
        X_baseline, _ = _draw(rng, n_samples, BASELINE_SHIFT)
        plan = plan_folds(y, settings)
        profile, baseline = score_folds(X_profile, plan, settings).knn, score_folds(X_baseline, plan, settings).knn
        return _excess(paired_row(profile, baseline, plan, ""))

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def _excess(row: Mapping[str, float]) -> Excess:
    """A row's excess over its null with its interval."""
    return float(row["beyond"]), float(row["beyond_low"]), float(row["beyond_high"])


def _check(n_samples: int, settings: KnnSettings | None) -> KnnSettings:
    if not isinstance(n_samples, int) or n_samples < 8:
        raise ValueError(f"n_samples must be an int >= 8 (two classes of >= 4), got {n_samples!r}")
    return settings or PLANTED_SETTINGS


def _draw(rng: np.random.Generator, n_samples: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """``[N, DIM]`` Gaussian features and ``[N]`` balanced labels; class 1 shifted by ``shift``."""
    y = np.arange(n_samples) % 2
    X = rng.normal(size=(n_samples, DIM)) + shift * y[:, None]
    return X, y
