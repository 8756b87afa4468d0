"""The permutation null of a separability row: its own samples, its labels permuted at the source level, its folds.

A row of the kNN table (:mod:`~entropy_lens.analysis.separability.targets`) scores one set of samples on one fold
plan.  Its planted null (docs/verdicts.md, "Planted nulls on the row's own design") keeps everything but the link
between a profile and its label: the same features, the same sources, the same folds, the same classifier and
the same intervals, with the labels permuted so that no profile can carry its own.  The permutation respects the
sources the folds keep apart (:func:`permute_labels`):

* a label constant within each source (MMLU correctness of a question asked in one style) moves with its source:
  the sources' labels are permuted across sources;
* a label that varies within a source, each source holding the same labels (the three tasks of a story, the
  formats of a topic, the families of one blank sample drawn from every model), is permuted within each source;
* where both occur (correctness pooled over a question's three styles: some questions right in every style,
  others not), both: each source takes the labels of a random source of its size, shuffled within it.

Each draw is scored on the row's own fold plan by the row's own classifier.  Moving the labels over fixed
features is moving the features over fixed labels, and the second keeps the labels, sources and strata where the
plan put them: a draw gives each position the features of another sample (:func:`source_permutation`; a source's
features stay together, so no source sits on both sides of a split), and the plan, ``k``, the stratified dummy
(which reads no feature) and its fold AUCs are the row's.  The distances between the row's samples are computed
once; each fold's test samples vote with their ``k`` nearest training samples as
:class:`~sklearn.neighbors.KNeighborsClassifier` votes, and the AUC, the paired difference and the intervals are
:class:`~entropy_lens.analysis.separability.knn.AucResult`'s.  The scores equal
:func:`~entropy_lens.analysis.separability.knn.score_folds` on the moved features (tests/test_knn_nulls.py).

How many draws: the analysis does not judge (``analysis/`` never imports ``verdicts/``), so the caller hands in
the decision (``shown``): :func:`entropy_lens.core.draws.adaptive_draws` takes 45, then more in batches up to
400 until the Wilson 95% upper bound of the rate of shown draws is at most 0.08.  The table keeps every draw's
numbers; the verdicts judge each draw again through the row's own rule (:mod:`entropy_lens.verdicts.nulls`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from sklearn.dummy import DummyClassifier
from sklearn.metrics import pairwise_distances
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.features import FeatureSettings, metric_label
from entropy_lens.analysis.separability.folds import GROUPED, FoldPlan, plan_folds
from entropy_lens.analysis.separability.knn import TABLE_COLUMNS, AucResult, capped_note, fold_auc
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import STUDY_TARGETS, Samples, Target, table_measures, target_samples
from entropy_lens.core.draws import DrawSettings, Shown, adaptive_draws
from entropy_lens.core.folds import paired_p_value

log = logging.getLogger(__name__)

ACROSS, WITHIN, BOTH = "across sources", "within sources", "across and within sources"
# A draw's row keys and scores are the kNN table's: its keys up to the mode, its scores from the sample counts on.
KEYS = TABLE_COLUMNS[: TABLE_COLUMNS.index("mode")]
SCORE_COLUMNS = TABLE_COLUMNS[TABLE_COLUMNS.index("n_samples") :]
DRAW_COLUMNS = (*KEYS, "permutation", "draw", *SCORE_COLUMNS)


def permutation_kind(codes: np.ndarray, groups: np.ndarray) -> str:
    """How :func:`permute_labels` moves the ``codes`` of ``groups``: :data:`ACROSS`, :data:`WITHIN` or :data:`BOTH`."""
    frame = pd.DataFrame({"group": np.asarray(groups).astype(str), "code": np.asarray(codes)})
    if (frame.groupby("group")["code"].nunique() == 1).all():
        return ACROSS
    multisets = frame.groupby("group")["code"].apply(lambda c: tuple(sorted(c)))
    return WITHIN if multisets.nunique() == 1 else BOTH


def source_permutation(groups: np.ndarray, rng: np.random.Generator, kind: str) -> np.ndarray:
    """``[N]`` the sample whose features each position takes: a permutation at the level of the ``groups``.

    Unless every source holds the same labels (``kind`` :data:`WITHIN`), each source takes the features of a
    source of its own size drawn without replacement (the sources of one size are permuted among themselves);
    then the features are shuffled among the source's positions.  Moving the features over fixed labels is
    moving the labels over fixed features: constant labels move across sources, labels that vary within
    sources alike are shuffled within each, mixed labels both (see the module docstring); the labels, sources
    and strata stay where the fold plan put them, so every draw is scored on the row's own folds.

    Args:
        groups: ``[N]`` source of each sample.
        rng: The generator of the draw.
        kind: :func:`permutation_kind` of the row's labels.

    Returns:
        ``[N]`` sample indices.
    """
    groups = np.asarray(groups).astype(str)
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    theirs = list(range(len(members)))
    if kind != WITHIN:
        by_size: dict[int, list[int]] = {}
        for index, rows in enumerate(members):
            by_size.setdefault(rows.size, []).append(index)
        for sources in by_size.values():
            for mine, other in zip(sources, rng.permutation(sources), strict=True):
                theirs[mine] = int(other)
    order = np.empty(groups.size, dtype=np.int64)
    for mine, rows in enumerate(members):
        order[rows] = rng.permutation(members[theirs[mine]])
    return order


def midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, ties taking their mean rank (as :func:`scipy.stats.rankdata`)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    edges = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    counts = np.diff(edges)
    out = np.empty(values.size)
    out[order] = np.repeat(edges[:-1] + (counts + 1) / 2, counts)
    return out


def auc(codes: np.ndarray, proba: np.ndarray) -> float:
    """One fold's ROC AUC of ``[n]`` class codes from ``[n, C]`` probabilities, as
    :func:`~entropy_lens.analysis.separability.knn.fold_auc` computes it (binary: the class-1 column; more classes:
    the one-vs-rest macro mean), with :func:`midranks` for speed."""
    columns = [1] if proba.shape[1] == 2 else range(proba.shape[1])
    out = []
    for c in columns:
        positive = codes == c
        n_pos = int(positive.sum())
        ranks = midranks(proba[:, c])
        out.append((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (codes.size - n_pos)))
    return float(np.mean(out))


class PlanScorer:
    """One row's samples on its own fold plan, scored again with its features moved (see the module docstring).

    The distances between the row's samples are computed once; a draw's fold reads the block of its test and
    training samples' features, and each test sample's ``k`` nearest training samples vote as
    :class:`~sklearn.neighbors.KNeighborsClassifier` votes (uniform or inverse-distance weights).  The labels and
    the folds are the row's, so the stratified dummy's fold AUCs are the row's own, computed once.

    Args:
        X: ``[N, F]`` the row's features.
        plan: Its fold plan (:func:`~entropy_lens.analysis.separability.folds.plan_folds`).
        settings: Its classifier settings.
    """

    def __init__(self, X: np.ndarray, plan: FoldPlan, settings: KnnSettings) -> None:
        self.plan, self.settings = plan, settings
        with threadpool_limits(limits=settings.n_threads, user_api="openmp"):
            self._distance = pairwise_distances(np.asarray(X, dtype=np.float64), metric=settings.distance)
        self._dummy = np.asarray([self._dummy_auc(index, train, test) for index, train, test in plan.folds])

    def _dummy_auc(self, index: int, train: np.ndarray, test: np.ndarray) -> float:
        codes = self.plan.codes
        dummy = DummyClassifier(strategy="stratified", random_state=self.settings.seed + index)
        proba = dummy.fit(np.zeros((train.size, 1)), codes[train]).predict_proba(np.zeros((test.size, 1)))
        return fold_auc(codes[test], proba)

    def _votes(self, distance: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """``[n_test, C]`` class probabilities from ``[n_test, n_train]`` distances and the training labels."""
        # the k nearest, ties at the k-th distance to the earlier training sample, as scikit-learn's search keeps them
        nearest = np.argsort(distance, axis=1, kind="stable")[:, : self.plan.k]
        near = np.take_along_axis(distance, nearest, axis=1)
        weight = np.ones_like(near)
        if self.settings.weights != "uniform":
            with np.errstate(divide="ignore"):
                weight = 1.0 / near
            exact = np.isinf(weight)
            rows = exact.any(axis=1)
            weight[rows] = exact[rows]  # a sample at distance 0 takes the whole vote, as scikit-learn weighs it
        votes = np.zeros((distance.shape[0], self.plan.n_classes))
        np.add.at(votes, (np.arange(distance.shape[0])[:, None], labels[nearest]), weight)
        return votes / votes.sum(axis=1, keepdims=True)

    def score(self, order: np.ndarray) -> AucResult:
        """kNN and dummy fold AUCs with position ``i`` holding the features of sample ``order[i]``."""
        plan, codes = self.plan, self.plan.codes
        knn = []
        for _, train, test in plan.folds:
            block = self._distance[np.ix_(order[test], order[train])]
            knn.append(auc(codes[test], self._votes(block, codes[train])))
        knn_arr = np.asarray(knn)
        p = paired_p_value(knn_arr, self._dummy, self.settings.test, test_train_ratio=1.0 / (plan.n_splits - 1))
        sizes = (plan.k, plan.n_splits, plan.n_repeats, codes.size, plan.n_groups, plan.n_classes)
        return AucResult(
            knn_arr,
            self._dummy,
            *sizes,
            p,
            self.settings.test,
            grouped=plan.grouped,
            level=self.settings.level,
            n_skipped_folds=plan.n_skipped_folds,
        )


def row_draws(
    samples: Samples, settings: KnnSettings, shown: Shown | None, draws: DrawSettings, seed: int
) -> Iterator[dict[str, Any]]:
    """The permutation draws of one grouped row: ``{"permutation", "draw", *SCORE_COLUMNS}`` per draw.

    Args:
        samples: The row's samples (:func:`~entropy_lens.analysis.separability.targets.target_samples`).
        settings: Its kNN settings.
        shown: The decision on one draw's row, or ``None`` to take ``draws.min_draws`` draws.
        draws: How many.
        seed: Seed of this row's permutations.
    """
    known = np.array([v is not None for v in samples.labels], dtype=bool)
    if samples.groups is None or not known.any():
        return
    labels, groups = samples.labels[known], samples.groups[known]
    strata = samples.strata[known] if samples.strata is not None else None
    try:
        plan = plan_folds(labels, settings, groups=groups, strata=strata)
    except ValueError:  # the row itself could not be scored: nothing to permute
        return
    scorer, rng = PlanScorer(samples.X[known], plan, settings), np.random.default_rng(seed)
    kind = permutation_kind(plan.codes, groups)

    def draw(_: int) -> list[dict[str, Any]]:
        result = scorer.score(source_permutation(groups, rng, kind))
        return [{"permutation": kind, **result.summary(), "note": capped_note(result, settings)}]

    yield from adaptive_draws(draw, shown, draws)


def permutation_table(
    stores: Mapping[str, xr.Dataset],
    targets: Sequence[Target] = STUDY_TARGETS,
    *,
    alphas: Sequence[float] = (),
    include_shannon: bool = True,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
    shown: Shown | None = None,
    draws: DrawSettings | None = None,
) -> pd.DataFrame:
    """Permutation draws of every grouped row of :func:`~entropy_lens.analysis.separability.targets.knn_table`.

    Args:
        stores: Combined datasets by dataset name; targets whose dataset is absent are skipped.
        targets: What to predict (default the table's).
        alphas: Rényi orders, as the table's.
        include_shannon: Also Shannon entropy, as the table's.
        features: Feature settings, as the table's.
        settings: kNN settings, as the table's.
        shown: The decision on one draw (see the module docstring); ``None``: ``draws.min_draws`` per row.
        draws: How many (default :class:`DrawSettings`).

    Returns:
        :data:`DRAW_COLUMNS`, one row per draw: the row's keys (``protocol`` ``grouped``), how its labels were
        permuted (``permutation``), the draw's index and its scores as the table's columns.
    """
    settings, draws = settings or KnnSettings(), draws or DrawSettings()
    out, row_index = [], 0
    for target in targets:
        if target.dataset not in stores or target.group_by is None:
            continue
        for metric, alpha in table_measures(alphas, include_shannon):
            keys = {"dataset": target.dataset, "target": target.name, "protocol": GROUPED, "metric": metric}
            keys |= {"alpha": np.nan if alpha is None else alpha, "measure": metric_label(metric, alpha)}
            samples_of = target_samples(stores[target.dataset], target, metric=metric, alpha=alpha, features=features)
            for samples in samples_of:
                rows = list(row_draws(samples, settings, shown, draws, draws.seed + row_index))
                row_index += 1
                log.info("permutation null of %s %s %s: %d draws", target.name, samples.split, samples.model, len(rows))
                out += [{**keys, "split": samples.split, "model": samples.model, **r} for r in rows]
    return pd.DataFrame(out, columns=list(DRAW_COLUMNS))
