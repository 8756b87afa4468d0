"""Separability on the twin: the same kNN on the same grouped folds, trained against twin fold by fold.

For each target the study's separability claims read (task, scrambled control, format, family or model
identity on the blank set), the folds are planned once from the labels and sources of the samples both stores
hold (the same prompt ids; on the blank set the same ``(model, sample)`` pairs), and the trained model's profiles
and its twin's are scored on them by the same code (:func:`~entropy_lens.analysis.separability.knn.score_folds`).
The row's ``beyond`` is the paired fold difference trained - twin with the Nadeau-Bengio corrected
resampled-t interval (:func:`~entropy_lens.analysis.separability.baselines.paired_row`), AUCs as fractions.

MMLU correctness has no twin reading: the twin answers at chance, so the labels "its answer was right" mean
nothing on it; its row says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.features import Features, FeatureSettings, model_features, pooled_features
from entropy_lens.analysis.separability.baselines import paired_row
from entropy_lens.analysis.separability.folds import class_shortfall, plan_folds
from entropy_lens.analysis.separability.knn import POOLED_MODEL, score_folds
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import STUDY_TARGETS, Target, sample_labels, target_splits
from entropy_lens.analysis.twins.contract import SEPARABILITY, empty_row, shared_prompts
from entropy_lens.store import schema

# The targets with a twin reading: the separability claims on the text sets whose labels need no answer.
TWIN_TARGETS = tuple(t for t in STUDY_TARGETS if t.dataset in ("tasks", "formats", "blank"))
NO_CORRECTNESS = (
    "no twin reading: the twin answers at chance, so its correctness labels mean nothing (docs/verdicts.md, "
    "'Beyond the twin')"
)
UNIT = "folds (corrected resampled t), grouped by source"


def separability_rows(
    trained: Mapping[str, xr.Dataset],
    twins: Mapping[str, xr.Dataset],
    name: str,
    *,
    mmlu: bool = False,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
) -> list[dict[str, Any]]:
    """Twin rows of every separability target whose dataset both the trained models and the twins hold.

    Args:
        trained: Combined stores of the trained models, by dataset.
        twins: Combined stores of the twins, by dataset.
        name: The twin's name (the rows' ``null_name``).
        mmlu: Whether the trained models were profiled on MMLU (its correctness row says why it has no twin
            reading).
        features: Feature settings (default :class:`~entropy_lens.analysis.features.FeatureSettings`).
        settings: kNN settings (default :class:`~entropy_lens.analysis.separability.settings.KnnSettings`).

    Returns:
        Rows of the twin table (:data:`~entropy_lens.analysis.twins.contract.COLUMNS`); with ``mmlu``, one row
        saying why MMLU correctness has no twin reading.
    """
    rows = []
    for target in TWIN_TARGETS:
        if target.dataset in trained and target.dataset in twins:
            rows += _target_rows(trained[target.dataset], twins[target.dataset], target, name, features, settings)
    if mmlu:
        base = {"reading": SEPARABILITY, "dataset": "mmlu", "target": "mmlu_correct", "model": POOLED_MODEL}
        rows.append(empty_row({**base, "statistic": "auc", "unit": UNIT}, name, NO_CORRECTNESS))
    return rows


def _target_rows(
    trained: xr.Dataset,
    twin: xr.Dataset,
    target: Target,
    name: str,
    features: FeatureSettings | None,
    settings: KnnSettings | None,
) -> list[dict[str, Any]]:
    features, settings = features or FeatureSettings(), settings or KnnSettings()
    shared = set(shared_prompts(trained, twin))
    models = [str(m) for m in trained.indexes[schema.MODEL] if str(m) in set(map(str, twin.indexes[schema.MODEL]))]
    rows = []
    for split, ids in target_splits(trained, target):
        ids = np.asarray([p for p in ids if p in shared], dtype=object)
        if ids.size == 0:  # no prompt of this target in the stores (e.g. no scrambled prompt)
            continue
        for model in [POOLED_MODEL] if target.pooled else models:
            base = {
                "reading": SEPARABILITY,
                "dataset": target.dataset,
                "target": target.name,
                "split": split,
                "model": model,
                "statistic": "auc",
                "unit": UNIT,
            }
            pair = [_features(ds, target, model, ids, models, features) for ds in (trained, twin)]
            rows.append({**base, **paired_auc(trained, target, *pair, name, settings)})
    return rows


def _features(
    ds: xr.Dataset, target: Target, model: str, ids: np.ndarray, models: list[str], features: FeatureSettings
) -> Features:
    if target.pooled:
        return pooled_features(ds, settings=features, models=models, prompts=ids)
    return model_features(ds, model, settings=features, prompts=ids)


def paired_auc(
    labels_from: xr.Dataset,
    target: Target,
    trained: Features,
    twin: Features,
    name: str,
    settings: KnnSettings,
) -> dict[str, Any]:
    """The trained and twin fold AUCs of one row on one plan of the samples both keep, and their difference.

    Args:
        labels_from: The trained store, whose labels and sources plan the folds.
        target: What is predicted.
        trained, twin: Their features, one row per kept ``(model, prompt)`` sample.
        name: The twin's name.
        settings: kNN settings.

    Returns:
        The numeric columns of a twin row (``n``, ``n_sources``, the trained AUC, the null contract), or a
        ``note`` where the row cannot be scored.
    """
    keys_t = list(zip(trained.models.astype(str), trained.prompts.astype(str), strict=True))
    keys_w = {key: i for i, key in enumerate(zip(twin.models.astype(str), twin.prompts.astype(str), strict=True))}
    both = [(i, keys_w[key]) for i, key in enumerate(keys_t) if key in keys_w]
    rows_t, rows_w = (np.asarray([b[j] for b in both], dtype=np.int64) for j in (0, 1))
    models, prompts = trained.models[rows_t], trained.prompts[rows_t]
    labels = sample_labels(labels_from, target.label, models, prompts)
    groups = sample_labels(labels_from, target.group_by, models, prompts)
    known = np.array([v is not None for v in labels], dtype=bool)
    sizes = {"n": int(known.sum()), "n_sources": int(pd.unique(groups[known].astype(str)).size)}
    note = class_shortfall(labels[known])
    if not note:
        try:
            plan = plan_folds(labels[known], settings, groups=groups[known])
        except ValueError as err:
            note = f"skipped: {err}"
    if note:
        return {**sizes, "null_name": name, "note": note}
    scores = [score_folds(X[rows][known], plan, settings).knn for X, rows in ((trained.X, rows_t), (twin.X, rows_w))]
    row = paired_row(scores[0], scores[1], plan, name, settings)
    return {
        **sizes,
        "estimate": row["auc_mean"],
        "ci_low": row["auc_low"],
        "ci_high": row["auc_high"],
        **{k: row[k] for k in ("null_name", "null_estimate", "null_low", "null_high")},
        **{k: row[k] for k in ("beyond", "beyond_low", "beyond_high")},
        "note": f"{row['n_folds']} folds; {len(both)} samples held by both",
    }
