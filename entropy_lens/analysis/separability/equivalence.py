"""Rényi against Shannon on identical folds: paired differences of kNN AUC.

The study reads Rényi entropy at other orders as leaving its separability findings
intact.  Reproducing each order on its own cannot show that: two AUCs with overlapping
intervals may still differ.  Here each separability row (target, split, model) of the
``grouped`` protocol is scored once for Shannon ``entropy`` and once per Rényi order
``alpha != 1`` on one :class:`~entropy_lens.analysis.separability.folds.FoldPlan`: the same samples,
labels, groups, folds, skipped folds and ``k``.  The per-fold difference
``AUC_renyi - AUC_shannon`` is then a paired quantity, and the mean difference gets the
Nadeau-Bengio corrected resampled-t interval (variance times
``1/F + n_test/n_train``, ``t`` with ``F - 1`` degrees of freedom), bounded by
``[-1, 1]``.  Shannon is scored once per row and its fold AUCs are reused for every order.

Each row also carries each side's own AUC interval (Shannon is the Rényi claim's null: the difference is
``renyi_auc - shannon_auc``).  This module produces the numbers only; the equivalence margin and the verdict
belong to :mod:`entropy_lens.verdicts.rules`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.features import Features, FeatureSettings, metric_label, model_features, pooled_features
from entropy_lens.analysis.separability.folds import FoldPlan, class_shortfall, plan_folds
from entropy_lens.analysis.separability.knn import POOLED_MODEL, AucResult, capped_note, score_folds
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import STUDY_TARGETS, Target, sample_labels, target_splits
from entropy_lens.core.folds import DIFFERENCE_BOUNDS, corrected_t_interval
from entropy_lens.core.frames import Reading
from entropy_lens.store import schema

log = logging.getLogger(__name__)

SHANNON_ORDER = 1.0
EQUIVALENCE_COLUMNS = (
    "dataset",
    "target",
    "split",
    "model",
    "measure",
    "alpha",
    "n_samples",
    "n_groups",
    "n_folds",
    "shannon_auc",
    "shannon_low",
    "shannon_high",
    "renyi_auc",
    "renyi_low",
    "renyi_high",
    "difference",
    "ci_low",
    "ci_high",
    "note",
)
# The table as a standard frame (entropy_lens.core.frames): the Rényi-minus-Shannon AUC difference.
EQUIVALENCE_READING = Reading("difference", n="n_samples", sources="n_groups", split="split")


def difference_interval(shannon: AucResult, renyi: AucResult, level: float | None = None) -> tuple[float, float, float]:
    """Mean paired fold difference ``renyi - shannon`` and its corrected resampled-t interval.

    Args:
        shannon: Fold AUCs of Shannon features.
        renyi: Fold AUCs of Rényi features on the same :class:`~entropy_lens.analysis.separability.folds.FoldPlan`.
        level: Coverage (default: the results' level).

    Returns:
        ``(difference, low, high)`` as fractions in ``[-1, 1]``.
    """
    if shannon.knn.shape != renyi.knn.shape or shannon.n_splits != renyi.n_splits:
        raise ValueError(
            f"results are not paired: {shannon.knn.size} and {renyi.knn.size} folds, "
            f"{shannon.n_splits} and {renyi.n_splits} splits; score both on one FoldPlan"
        )
    diff = renyi.knn - shannon.knn
    low, high = corrected_t_interval(
        diff, shannon.test_train_ratio, shannon.level if level is None else level, bounds=DIFFERENCE_BOUNDS
    )
    return float(diff.mean()), low, high


def renyi_equivalence(
    stores: Mapping[str, xr.Dataset],
    targets: Sequence[Target] = STUDY_TARGETS,
    *,
    alphas: Sequence[float] | None = None,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
) -> pd.DataFrame:
    """Paired Rényi-minus-Shannon kNN AUC for every grouped separability row.

    Args:
        stores: Combined datasets by dataset name (lazy is fine); targets whose dataset
            is absent are skipped with a warning, as :func:`~entropy_lens.analysis.separability.targets.knn_table` does.
        targets: What to predict; targets without ``group_by`` have no grouped rows and are left out.
        alphas: Rényi orders to compare (default: every order on the store's ``alpha``);
            order 1 (Shannon itself) is left out.
        features: Feature settings (default :class:`~entropy_lens.analysis.features.FeatureSettings`).
        settings: kNN settings (default :class:`~entropy_lens.analysis.separability.settings.KnnSettings`).

    Returns:
        Tidy frame with :data:`EQUIVALENCE_COLUMNS`, one row per (target, split, model,
        order); AUCs and differences are fractions; rows that cannot be scored carry NaN
        numbers and a ``note``.
    """
    rows: list[dict[str, Any]] = []
    for target in targets:
        if target.dataset not in stores:
            log.warning("target %r skipped: no store for dataset %r", target.name, target.dataset)
            continue
        if target.group_by is None:
            log.info("target %r has no group_by, hence no grouped rows to compare", target.name)
            continue
        ds = stores[target.dataset]
        orders = renyi_orders(ds, alphas)
        log.info("Rényi equivalence of %s on %s, orders %s", target.name, target.dataset, orders)
        for split, ids in target_splits(ds, target):
            for model in [POOLED_MODEL] if target.pooled else [str(m) for m in ds.indexes[schema.MODEL]]:
                base = {"dataset": target.dataset, "target": target.name, "split": split, "model": model}
                rows += [{**base, **row} for row in _model_rows(ds, target, model, ids, orders, features, settings)]
    return pd.DataFrame(rows, columns=list(EQUIVALENCE_COLUMNS))


def renyi_orders(ds: xr.Dataset, alphas: Sequence[float] | None = None) -> list[float]:
    """Rényi orders to compare with Shannon: ``alphas`` (default: the store's ``alpha``) except 1."""
    values = ds[schema.ALPHA].values if alphas is None else alphas
    return [float(a) for a in values if not np.isclose(float(a), SHANNON_ORDER)]


def _model_rows(
    ds: xr.Dataset,
    target: Target,
    model: str,
    ids: np.ndarray,
    orders: Sequence[float],
    features: FeatureSettings | None,
    settings: KnnSettings | None,
) -> list[dict[str, Any]]:
    """Rows of one (split, model): Shannon scored once per sample set, each order on its plan."""
    shannon = _features(ds, target, model, ids, None, features)
    scored: dict[bytes, _Baseline] = {}
    rows = []
    for alpha in orders:
        renyi = _features(ds, target, model, ids, alpha, features)
        rows_s, rows_r = common_rows(shannon, renyi)
        key = rows_s.tobytes()
        if key not in scored:
            scored[key] = _score_shannon(ds, target, shannon, rows_s, settings)
        row = {"measure": metric_label(schema.RENYI, alpha), "alpha": alpha}
        rows.append({**row, **_paired_row(scored[key], renyi.X[rows_r], settings)})
    return rows


def _features(
    ds: xr.Dataset, target: Target, model: str, ids: np.ndarray, alpha: float | None, features: FeatureSettings | None
) -> Features:
    metric = schema.ENTROPY if alpha is None else schema.RENYI
    if target.pooled:
        return pooled_features(
            ds, metric=metric, alpha=alpha, settings=features, prompts=ids, first_token=target.first_token
        )
    return model_features(ds, model, metric=metric, alpha=alpha, settings=features, prompts=ids)


def common_rows(a: Features, b: Features) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the ``(model, prompt)`` samples present in both feature sets.

    The masked-token rule may drop a prompt from one metric's features and keep it in
    another's; pairing needs the samples both kept, in ``a``'s order.

    Returns:
        ``([S], [S])`` indices into ``a`` and into ``b`` of the same samples.
    """
    keys_a = pd.MultiIndex.from_arrays([a.models.astype(str), a.prompts.astype(str)])
    keys_b = pd.MultiIndex.from_arrays([b.models.astype(str), b.prompts.astype(str)])
    where = keys_b.get_indexer(keys_a)
    rows_a = np.flatnonzero(where >= 0)
    if rows_a.size < len(keys_a) or rows_a.size < len(keys_b):
        log.warning(
            "pairing %d of %d and %d samples: the metrics drop different prompts", rows_a.size, len(keys_a), len(keys_b)
        )
    return rows_a, where[rows_a]


@dataclass(frozen=True)
class _Baseline:
    """Shannon scored on one sample set, reused for every Rényi order of the same samples.

    Attributes:
        sizes: ``n_samples`` (with a known label) and ``n_groups``.
        known: ``[S]`` which paired samples have a known label.
        plan: The folds, ``None`` when the row cannot be scored.
        result: Shannon's fold AUCs on ``plan``.
        note: Why the row cannot be scored, or ``""``.
    """

    sizes: dict[str, int]
    known: np.ndarray
    plan: FoldPlan | None = None
    result: AucResult | None = None
    note: str = ""


def _score_shannon(
    ds: xr.Dataset, target: Target, shannon: Features, rows: np.ndarray, settings: KnnSettings | None
) -> _Baseline:
    """Build the plan on the paired samples ``rows`` of ``shannon`` and score Shannon on it."""
    models, prompts = shannon.models[rows], shannon.prompts[rows]
    labels = sample_labels(ds, target.label, models, prompts)
    groups = sample_labels(ds, target.group_by, models, prompts)
    known = np.array([v is not None for v in labels], dtype=bool)
    sizes = {"n_samples": int(known.sum()), "n_groups": int(pd.unique(groups[known].astype(str)).size)}
    note = class_shortfall(labels[known])
    if not note:
        try:
            plan = plan_folds(labels[known], settings, groups=groups[known])
        except ValueError as err:  # e.g. a class from a single source, or too few folds holding every class
            note = f"skipped: {err}"
    if note:
        log.warning("Rényi equivalence of %s: %s", target.name, note)
        return _Baseline(sizes, known, note=note)
    return _Baseline(sizes, known, plan, score_folds(shannon.X[rows[known]], plan, settings))


def _paired_row(shannon: _Baseline, X_renyi: np.ndarray, settings: KnnSettings | None) -> dict[str, Any]:
    """One table row: Rényi features (rows paired with Shannon's) scored on Shannon's plan."""
    if shannon.plan is None or shannon.result is None:
        return {**shannon.sizes, "note": shannon.note}
    renyi = score_folds(X_renyi[shannon.known], shannon.plan, settings)
    difference, low, high = difference_interval(shannon.result, renyi)
    shannon_low, shannon_high = shannon.result.interval(shannon.result.knn)
    renyi_low, renyi_high = renyi.interval(renyi.knn)
    return {
        **shannon.sizes,
        "n_folds": int(renyi.knn.size),
        "shannon_auc": float(shannon.result.knn.mean()),
        "shannon_low": shannon_low,
        "shannon_high": shannon_high,
        "renyi_auc": float(renyi.knn.mean()),
        "renyi_low": renyi_low,
        "renyi_high": renyi_high,
        "difference": difference,
        "ci_low": low,
        "ci_high": high,
        "note": capped_note(shannon.result, settings or KnnSettings()),
    }
