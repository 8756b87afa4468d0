"""kNN separability of profiles: cross-validated ROC AUC against a dummy baseline.

The study's diagnostic: if a kNN classifier on profile features predicts a label
(task, output format, answer correctness, model family) well above chance, the label
leaves a trace in the entropy profile.  Defaults follow the study's code: ``k = 29``,
Euclidean distance, uniform weights.  Evaluation here is stricter than a single split:
stratified ``n_splits``-fold CV with shuffling, repeated ``n_repeats`` times with a seed;
ROC AUC per fold (binary: positive-class score; multi-class: one-vs-rest macro
average); mean +- std over all folds; the same folds scored for a stratified
:class:`~sklearn.dummy.DummyClassifier`; and a one-sided paired test over fold AUCs
(kNN > dummy).

Folds of repeated CV share training data, so the plain paired tests (``wilcoxon``,
``ttest``) are optimistic; ``corrected_ttest`` is the Nadeau-Bengio corrected resampled
t-test, which inflates the variance by ``n_test / n_train``, and is the default.  The
same correction gives each mean AUC its interval (:func:`corrected_t_interval`).

The folds and their protocols (``grouped``, ``study``) are planned in
:mod:`~entropy_lens.analysis.separability.folds`; the settings are
:class:`~entropy_lens.analysis.separability.settings.KnnSettings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from sklearn.dummy import DummyClassifier
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.separability.folds import FoldPlan, plan_folds
from entropy_lens.analysis.separability.settings import DEFAULT_LEVEL, KnnSettings
from entropy_lens.core.folds import (
    DIFFERENCE_BOUNDS,
    ceiling_interval,
    corrected_t_interval,
    fold_score_interval,
    paired_p_value,
)
from entropy_lens.core.frames import NULL_CONTRACT

TABLE_COLUMNS = (
    "dataset",
    "target",
    "split",
    "model",
    "protocol",
    "metric",
    "alpha",
    "measure",
    "mode",
    "mask_rule",
    "n_samples",
    "n_groups",
    "n_classes",
    "k",
    "n_splits",
    "n_repeats",
    "auc_mean",
    "auc_std",
    "auc_low",
    "auc_high",
    "dummy_mean",
    "dummy_std",
    "dummy_low",
    "dummy_high",
    *NULL_CONTRACT,
    "p_value",
    "test",
    "note",
)
POOLED_MODEL = "all"
# The null of every separability row (the null columns of core.frames.NULL_CONTRACT): the stratified dummy on the
# same folds.
NULL_NAME = "stratified dummy (same folds)"


@dataclass(frozen=True)
class AucResult:
    """Fold AUCs of kNN and of the dummy baseline on the same folds.

    Attributes:
        knn: ``[F]`` kNN ROC AUC per scored fold.
        dummy: ``[F]`` stratified-dummy ROC AUC per scored fold.
        k: Neighbours actually used.
        n_splits: Folds per repeat actually used.
        n_repeats: Repetitions.
        n_samples: Samples.
        n_groups: Distinct groups (sources); ``n_samples`` when folds are not grouped.
        n_classes: Classes.
        p_value: One-sided paired test p-value (kNN > dummy).
        test: Name of the paired test.
        grouped: Whether folds kept each group on one side.
        level: Coverage of the intervals.
        n_skipped_folds: Grouped folds left out because their test part lacked a class.
    """

    knn: np.ndarray
    dummy: np.ndarray
    k: int
    n_splits: int
    n_repeats: int
    n_samples: int
    n_groups: int
    n_classes: int
    p_value: float
    test: str
    grouped: bool = False
    level: float = DEFAULT_LEVEL
    n_skipped_folds: int = 0

    @property
    def test_train_ratio(self) -> float:
        """``n_test / n_train`` of one k-fold split, ``1 / (n_splits - 1)``."""
        return 1.0 / (self.n_splits - 1)

    def interval(self, scores: np.ndarray) -> tuple[float, float]:
        """Interval of the mean of fold ``scores``: the corrected resampled t, or at the ceiling (every fold 1, or
        every fold 0) the exact interval over the row's sources
        (:func:`~entropy_lens.core.folds.fold_score_interval`)."""
        return fold_score_interval(scores, self.test_train_ratio, self.n_groups, self.level)

    def beyond(self) -> tuple[float, float, float]:
        """Mean paired fold difference kNN - dummy and its corrected resampled-t interval, in ``[-1, 1]``."""
        diff = self.knn - self.dummy
        low, high = corrected_t_interval(diff, self.test_train_ratio, self.level, bounds=DIFFERENCE_BOUNDS)
        return float(diff.mean()), low, high

    def summary(self) -> dict[str, Any]:
        """Mean, std (ddof=1) and interval over folds, the dummy as the null and kNN beyond it, as one row."""
        knn_lo, knn_hi = self.interval(self.knn)
        dummy_lo, dummy_hi = self.interval(self.dummy)
        beyond, beyond_lo, beyond_hi = self.beyond()
        return {
            "n_samples": self.n_samples,
            "n_groups": self.n_groups,
            "n_classes": self.n_classes,
            "k": self.k,
            "n_splits": self.n_splits,
            "n_repeats": self.n_repeats,
            "auc_mean": float(self.knn.mean()),
            "auc_std": float(self.knn.std(ddof=1)),
            "auc_low": knn_lo,
            "auc_high": knn_hi,
            "dummy_mean": float(self.dummy.mean()),
            "dummy_std": float(self.dummy.std(ddof=1)),
            "dummy_low": dummy_lo,
            "dummy_high": dummy_hi,
            "null_name": NULL_NAME,
            "null_estimate": float(self.dummy.mean()),
            "null_low": dummy_lo,
            "null_high": dummy_hi,
            "beyond": beyond,
            "beyond_low": beyond_lo,
            "beyond_high": beyond_hi,
            "p_value": self.p_value,
            "test": self.test,
        }


def knn_auc(
    X: np.ndarray,
    y: Sequence[Any],
    settings: KnnSettings | None = None,
    *,
    groups: Sequence[Any] | None = None,
    strata: Sequence[Any] | None = None,
) -> AucResult:
    """Cross-validated kNN ROC AUC of labels ``y`` from features ``X``.

    Args:
        X: ``[N, F]`` finite features.
        y: ``[N]`` labels (any hashable values; at least 2 classes of >= 2 samples each).
        settings: Classifier and CV settings (default :class:`KnnSettings`).
        groups: ``[N]`` source of each sample; when given, folds are grouped (a source
            never sits on both sides of a split); every class needs >= 2 sources, or a
            ``ValueError`` names the class and its sources.
        strata: ``[N]`` a second label the folds also balance (see :func:`plan_folds`).

    Returns:
        :class:`AucResult` over the ``n_splits * n_repeats`` folds.
    """
    return score_folds(X, plan_folds(y, settings, groups=groups, strata=strata), settings)


def score_folds(X: np.ndarray, plan: FoldPlan, settings: KnnSettings | None = None) -> AucResult:
    """kNN and dummy ROC AUC of features ``X`` on every fold of ``plan``.

    Args:
        X: ``[N, F]`` finite features, rows in the order of the labels the plan was built from.
        plan: Folds from :func:`plan_folds`.
        settings: Classifier settings (default :class:`KnnSettings`): distance, weights,
            the dummy's seed, the paired test, the interval level and the threads.

    Returns:
        :class:`AucResult` with one AUC per fold of the plan.
    """
    settings = settings or KnnSettings()
    X = _check_features(X, plan.codes.size)
    codes, knn_scores, dummy_scores = plan.codes, [], []
    with threadpool_limits(limits=settings.n_threads, user_api="openmp"):
        for index, train, test in plan.folds:
            clf = KNeighborsClassifier(n_neighbors=plan.k, metric=settings.distance, weights=settings.weights)
            dummy = DummyClassifier(strategy="stratified", random_state=settings.seed + index)
            knn_scores.append(fold_auc(codes[test], clf.fit(X[train], codes[train]).predict_proba(X[test])))
            dummy_scores.append(fold_auc(codes[test], dummy.fit(X[train], codes[train]).predict_proba(X[test])))
    knn_arr, dummy_arr = np.asarray(knn_scores), np.asarray(dummy_scores)
    p = paired_p_value(knn_arr, dummy_arr, settings.test, test_train_ratio=1.0 / (plan.n_splits - 1))
    sizes = (plan.k, plan.n_splits, plan.n_repeats, codes.size, plan.n_groups, plan.n_classes)
    return AucResult(
        knn_arr,
        dummy_arr,
        *sizes,
        p,
        settings.test,
        grouped=plan.grouped,
        level=settings.level,
        n_skipped_folds=plan.n_skipped_folds,
    )


def _check_features(X: np.ndarray, n_samples: int) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != n_samples:
        raise ValueError(f"X must be [N, F] with N = {n_samples} labels; got X {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN/inf; build features with a masked-token rule (features.apply_mask_rule)")
    return X


def fold_auc(y_true: np.ndarray, proba: np.ndarray) -> float:
    """ROC AUC of one fold.

    The Mann-Whitney form (mid-ranks for ties), equal to :func:`sklearn.metrics.roc_auc_score`
    and without its input checks, which cost ~30 ms a call at the study's fold sizes.

    Args:
        y_true: ``[n]`` integer class codes ``0..C-1`` (every class present).
        proba: ``[n, C]`` predicted class probabilities, columns in code order.

    Returns:
        Binary: AUC of the class-1 score.  Multi-class: one-vs-rest macro AUC (the
        unweighted mean over classes, so a small class counts as much as a large one).
    """
    y_true, proba = np.asarray(y_true), np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or proba.shape[0] != y_true.size or proba.shape[1] < 2:
        raise ValueError(f"proba must be [n, C >= 2] with n = {y_true.size} labels, got shape {proba.shape}")
    absent = sorted(set(range(proba.shape[1])) - set(np.unique(y_true).tolist()))
    if absent:
        raise ValueError(f"classes {absent} have no sample in this fold; every class must be present")
    if proba.shape[1] == 2:
        return _binary_auc(y_true == 1, proba[:, 1])
    return float(np.mean([_binary_auc(y_true == c, proba[:, c]) for c in range(proba.shape[1])]))


def _binary_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + half the ties: the Mann-Whitney U over its maximum."""
    ranks = stats.rankdata(score)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def ceiling_note(scores: np.ndarray, n_sources: int, level: float = DEFAULT_LEVEL) -> str:
    """``"ceiling: every fold 100; exact interval over m sources"`` (or the floor's) where the fold AUCs sit at a
    bound in every fold and take :func:`~entropy_lens.core.folds.ceiling_interval`, else ``""``."""
    if ceiling_interval(scores, n_sources, level) is None:
        return ""
    end = "ceiling: every fold 100" if np.all(np.asarray(scores) == 1.0) else "floor: every fold 0"
    return f"{end}; exact interval over {n_sources} sources"


def capped_note(result: AucResult, settings: KnnSettings) -> str:
    """What the run had to change from the settings (k, folds, skipped folds), or ``""``."""
    notes = []
    if result.k != settings.k:
        notes.append(f"k capped {settings.k} -> {result.k} (smallest training fold)")
    if result.n_splits != settings.n_splits:
        notes.append(f"folds capped {settings.n_splits} -> {result.n_splits} (smallest class)")
    if result.n_skipped_folds:
        notes.append(f"{result.n_skipped_folds} folds without every class left out")
    return "; ".join(notes)
