"""Cross-validation folds of the kNN AUC, planned from labels and groups before any feature is read.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import RepeatedStratifiedKFold, StratifiedGroupKFold

from entropy_lens.analysis.separability.settings import KnnSettings

log = logging.getLogger(__name__)

MIN_PER_CLASS = 2
GROUPED = "grouped"
STUDY = "study"
PROTOCOLS = (GROUPED, STUDY)


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
    """Build the folds of :func:`~entropy_lens.analysis.separability.knn.knn_auc` without features (see
    :class:`FoldPlan`).

    Args:
        y: ``[N]`` labels (at least 2 classes of >= 2 samples each).
        settings: CV settings (default :class:`KnnSettings`); ``k``, ``n_splits``,
            ``n_repeats`` and ``seed`` shape the plan.
        groups: ``[N]`` source of each sample, for grouped folds (see
            :func:`~entropy_lens.analysis.separability.knn.knn_auc`).
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


def class_shortfall(labels: np.ndarray) -> str:
    """Why known ``[N]`` labels cannot be scored (fewer than two classes of enough samples), or ``""``."""
    counts = pd.Series(np.asarray(labels).astype(str)).value_counts()
    if counts.size < 2 or counts.min() < MIN_PER_CLASS:
        return f"skipped: class counts {counts.to_dict()} (need >= 2 classes of >= {MIN_PER_CLASS})"
    return ""
