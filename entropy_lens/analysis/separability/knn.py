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

Protocols.  Prompts built from the same source are not independent (a story yields four
intact prompts per task that differ only in phrasing and template; an MMLU question
appears in three styles).  ``grouped`` folds keep every prompt of a source (the
target's ``group_by`` coordinate: story, question, topic, sample) on one side of each
split (:class:`~sklearn.model_selection.StratifiedGroupKFold`, reshuffled per repeat);
``study`` folds are the study's plain stratified folds, which can put a near-twin of a
test prompt in the training set.  Verdicts use ``grouped``; ``study`` is reported beside.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.dummy import DummyClassifier
from sklearn.model_selection import RepeatedStratifiedKFold, StratifiedGroupKFold
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from entropy_lens.core.folds import (
    DEFAULT_TEST,
    DIFFERENCE_BOUNDS,
    PAIRED_TESTS,
    corrected_t_interval,
    paired_p_value,
)
from entropy_lens.core.frames import NULL_CONTRACT

log = logging.getLogger(__name__)

DEFAULT_K = 29
DEFAULT_SPLITS = 5
DEFAULT_REPEATS = 3
DEFAULT_SEED = 0
DEFAULT_DISTANCE = "euclidean"
DEFAULT_WEIGHTS = "uniform"
MIN_PER_CLASS = 2
DEFAULT_LEVEL = 0.95
GROUPED = "grouped"
STUDY = "study"
PROTOCOLS = (GROUPED, STUDY)
# OpenMP threads for the neighbour search.  With torch imported, two OpenMP runtimes share
# the cores and each small brute-force kNN call stalls for ~30-80 ms in spin-waits; one
# thread avoids that and costs little at the study's scale (thousands of samples).
DEFAULT_THREADS = 1
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
# The null of every separability row (issue 36's column contract): the stratified dummy on the same folds.
NULL_NAME = "stratified dummy (same folds)"


@dataclass(frozen=True)
class KnnSettings:
    """Classifier and cross-validation settings.

    Attributes:
        k: Neighbours (capped below the smallest training fold, with a warning).
        n_splits: Stratified folds (capped at the smallest class count, or its number of
            groups under grouped folds, with a warning).
        n_repeats: Repetitions of the shuffled fold split.
        seed: Seed of the fold shuffling and of the dummy baseline.
        distance: ``KNeighborsClassifier`` metric.
        weights: ``KNeighborsClassifier`` weights.
        test: Paired test over fold AUCs, one of :data:`PAIRED_TESTS`.
        level: Coverage of the AUC intervals, in ``(0, 1)``.
        n_threads: OpenMP threads for the neighbour search (``None``: the library default).
    """

    k: int = DEFAULT_K
    n_splits: int = DEFAULT_SPLITS
    n_repeats: int = DEFAULT_REPEATS
    seed: int = DEFAULT_SEED
    distance: str = DEFAULT_DISTANCE
    weights: str = DEFAULT_WEIGHTS
    test: str = DEFAULT_TEST
    level: float = DEFAULT_LEVEL
    n_threads: int | None = DEFAULT_THREADS

    @classmethod
    def from_config(cls, knn: Mapping[str, Any]) -> KnnSettings:
        """The settings of a validated ``analysis.knn`` config section (its ``folds`` and ``repeats`` are
        :attr:`n_splits` and :attr:`n_repeats`; the paired test is the corrected resampled t, the one the
        intervals use)."""
        return cls(k=knn["k"], n_splits=knn["folds"], n_repeats=knn["repeats"], seed=knn["seed"])

    def __post_init__(self) -> None:
        for name in ("k", "n_repeats"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if not isinstance(self.n_splits, int) or self.n_splits < 2:
            raise ValueError(f"n_splits must be an int >= 2, got {self.n_splits!r}")
        if self.test not in PAIRED_TESTS:
            raise ValueError(f"test must be one of {PAIRED_TESTS}, got {self.test!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")


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
        """Corrected resampled-t interval of the mean of fold ``scores`` (see :func:`corrected_t_interval`)."""
        return corrected_t_interval(scores, self.test_train_ratio, self.level)

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


@dataclass(frozen=True)
class FoldPlan:
    """Cross-validation folds built once from labels and groups, to score any features on.

    Folds depend on the labels, the groups and the settings only, never on feature
    values, so two feature sets of the same samples scored on one plan are paired fold
    by fold (the same training and test samples, the same folds skipped, the same ``k``).

    Attributes:
        codes: ``[N]`` integer class codes ``0..C-1``.
        folds: ``(index, train, test)`` of each fold to score: its position among all
            ``n_splits * n_repeats`` folds, its ``[n_train]`` and ``[n_test]`` sample indices.
        k: Neighbours (capped below the smallest training fold).
        n_splits: Folds per repeat actually used.
        n_repeats: Repetitions.
        n_groups: Distinct groups (sources); ``N`` when folds are not grouped.
        grouped: Whether folds keep each group on one side.
        n_skipped_folds: Folds left out because their test part lacked a class.
    """

    codes: np.ndarray
    folds: tuple[tuple[int, np.ndarray, np.ndarray], ...]
    k: int
    n_splits: int
    n_repeats: int
    n_groups: int
    grouped: bool
    n_skipped_folds: int

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return int(self.codes.max()) + 1


def plan_folds(
    y: Sequence[Any],
    settings: KnnSettings | None = None,
    *,
    groups: Sequence[Any] | None = None,
    strata: Sequence[Any] | None = None,
) -> FoldPlan:
    """Build the folds of :func:`knn_auc` without features (see :class:`FoldPlan`).

    Args:
        y: ``[N]`` labels (at least 2 classes of >= 2 samples each).
        settings: CV settings (default :class:`KnnSettings`); ``k``, ``n_splits``,
            ``n_repeats`` and ``seed`` shape the plan.
        groups: ``[N]`` source of each sample, for grouped folds (see :func:`knn_auc`).
        strata: ``[N]`` a second label (an MMLU prompt's style) the splitter balances
            together with ``y``: folds are stratified by the ``(y, stratum)`` pair, while the
            AUC, the fold and ``k`` caps and the kept folds read ``y`` alone.

    Returns:
        The plan; a ``ValueError`` when fewer than two folds hold every class in their test part.
    """
    settings = settings or KnnSettings()
    codes, counts = _encode(y)
    group_codes = _group_codes(groups, codes) if groups is not None else None
    if group_codes is not None:
        _check_sources(y, groups)
    n_splits = _cap_splits(settings.n_splits, _smallest_class(codes, counts, group_codes), group_codes is not None)
    folds = list(_folds(_strata_codes(codes, strata), group_codes, n_splits, settings))
    k = _cap_k(settings.k, min(train.size for train, _ in folds))
    kept = tuple((i, tr, te) for i, (tr, te) in enumerate(folds) if np.unique(codes[te]).size == counts.size)
    if len(kept) < 2:
        raise ValueError(f"only {len(kept)} folds hold every class in their test part; add samples or groups")
    n_groups = int(np.unique(group_codes).size) if group_codes is not None else int(codes.size)
    skipped = len(folds) - len(kept)
    return FoldPlan(codes, kept, k, n_splits, settings.n_repeats, n_groups, group_codes is not None, skipped)


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


def _strata_codes(codes: np.ndarray, strata: Sequence[Any] | None) -> np.ndarray:
    """Codes of the ``(class, stratum)`` pairs the splitter balances; the class codes without strata."""
    if strata is None:
        return codes
    values = np.asarray(strata).astype(str)
    if values.shape != codes.shape:
        raise ValueError(f"strata must hold one value per sample ({codes.size}), got shape {values.shape}")
    pairs = np.char.add(np.char.add(codes.astype(str), "|"), values)
    return np.unique(pairs, return_inverse=True)[1]


def _group_codes(groups: Sequence[Any], codes: np.ndarray) -> np.ndarray:
    values = np.asarray(groups)
    if values.shape != codes.shape:
        raise ValueError(f"groups must hold one value per sample ({codes.size}), got shape {values.shape}")
    return np.unique(values.astype(str), return_inverse=True)[1]


def _check_sources(y: Sequence[Any], groups: Sequence[Any]) -> None:
    """Grouped folds hold out whole sources: every class needs sources on both sides of a split."""
    per_class = pd.Series(np.asarray(groups).astype(str)).groupby(np.asarray(y).astype(str)).nunique()
    thin = per_class[per_class < MIN_PER_CLASS]
    if thin.size:
        shortfall = ", ".join(f"class {label!r} comes from {n} source" + "s" * (n != 1) for label, n in thin.items())
        raise ValueError(
            f"grouped folds need >= {MIN_PER_CLASS} sources (groups) per class, as a fold holds out whole sources; "
            f"{shortfall} (sources per class: {per_class.to_dict()}); add samples from more sources to it"
        )


def _smallest_class(codes: np.ndarray, counts: np.ndarray, group_codes: np.ndarray | None) -> int:
    """Samples (or, grouped, distinct groups) of the smallest class: the most folds it can fill."""
    if group_codes is None:
        return int(counts.min())
    return min(int(np.unique(group_codes[codes == c]).size) for c in range(counts.size))


def _folds(codes, group_codes, n_splits: int, settings: KnnSettings) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    X = np.zeros((codes.size, 1))  # the splitters read only the sample count from X
    if group_codes is None:
        cv = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=settings.n_repeats, random_state=settings.seed)
        yield from cv.split(X, codes)
        return
    for repeat in range(settings.n_repeats):
        cv = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=settings.seed + repeat)
        yield from cv.split(X, codes, group_codes)


def _check_features(X: np.ndarray, n_samples: int) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != n_samples:
        raise ValueError(f"X must be [N, F] with N = {n_samples} labels; got X {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN/inf; build features with a masked-token rule (features.apply_mask_rule)")
    return X


def _encode(y: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"y must be [N] labels, got shape {labels.shape}")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    counts = np.bincount(codes)
    if counts.size < 2 or counts.min() < MIN_PER_CLASS:
        raise ValueError(
            f"kNN AUC needs >= 2 classes with >= {MIN_PER_CLASS} samples each; class counts are {counts.tolist()}"
        )
    return codes, counts


def _cap_splits(n_splits: int, smallest_class: int, grouped: bool) -> int:
    if smallest_class < n_splits:
        what = "groups" if grouped else "samples"
        log.warning(
            "n_splits=%d exceeds the smallest class (%d %s); using %d folds",
            n_splits,
            smallest_class,
            what,
            smallest_class,
        )
        return smallest_class
    return n_splits


def _cap_k(k: int, smallest_train: int) -> int:
    if k >= smallest_train:
        capped = max(smallest_train - 1, 1)
        log.warning("k=%d is not below the smallest training fold (%d samples); using k=%d", k, smallest_train, capped)
        return capped
    return k


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


def class_shortfall(labels: np.ndarray) -> str:
    """Why known ``[N]`` labels cannot be scored (fewer than two classes of enough samples), or ``""``."""
    counts = pd.Series(np.asarray(labels).astype(str)).value_counts()
    if counts.size < 2 or counts.min() < MIN_PER_CLASS:
        return f"skipped: class counts {counts.to_dict()} (need >= 2 classes of >= {MIN_PER_CLASS})"
    return ""


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
