"""What the kNN predicts: the study's targets (task, scrambled control, format, MMLU correctness, family,
image class), their labels, splits and source groups in a combined store, and the AUC table over them.

The classifier, its folds and intervals are :mod:`entropy_lens.analysis.separability.knn`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.features import (
    FAMILY_FIRST_TOKEN,
    FeatureSettings,
    metric_label,
    model_features,
    plain,
    pooled_features,
    prompt_ids,
)
from entropy_lens.analysis.separability.folds import GROUPED, PROTOCOLS, STUDY, class_shortfall
from entropy_lens.analysis.separability.knn import (
    NULL_NAME,
    POOLED_MODEL,
    TABLE_COLUMNS,
    capped_note,
    ceiling_note,
    knn_auc,
)
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.frames import Reading
from entropy_lens.store import schema

log = logging.getLogger(__name__)
# The AUC table as a standard frame (entropy_lens.core.frames): n counts samples, the interval's unit is
# the source groups the folds keep apart.
KNN_READING = Reading("auc_mean", "auc_low", "auc_high", n="n_samples", sources="n_groups", split="split")


@dataclass(frozen=True)
class Target:
    """One label to predict from profiles.

    Attributes:
        name: Row name in the table (e.g. ``task_scrambled``).
        dataset: Name of the combined store the target reads.
        label: A coordinate on ``prompt`` (``task``), a ``(model, prompt)`` variable
            (``correct_ll``; negative ints mean missing) or, for pooled targets, a
            coordinate on ``model`` (``family``).
        where: Prompt-coordinate filters, e.g. ``{"scrambled": False}``.
        split_by: A prompt coordinate; the target runs once per value (e.g. ``style``).
        pooled: Samples are ``(model, prompt)`` pairs of all models on a common depth
            grid (one row, model ``"all"``) instead of one run per model.
        group_by: A coordinate on ``prompt`` naming each prompt's source (``story_id``,
            ``question_id``, ``topic``; ``prompt`` itself for pooled samples, which groups
            a prompt's samples across models).  With it, each row is scored under both
            :data:`PROTOCOLS`; without it, under ``study`` only.
        stratify_by: A prompt coordinate the grouped folds balance besides the label
            (``style`` for MMLU correctness pooled over styles).
        first_token: The first token slot of the features (pooled targets;
            :data:`~entropy_lens.analysis.features.FAMILY_FIRST_TOKEN` for the family: a blank sample's
            token 0 is the same for every sample of a model).
    """

    name: str
    dataset: str
    label: str
    where: Mapping[str, Any] = field(default_factory=dict)
    split_by: str | None = None
    pooled: bool = False
    group_by: str | None = None
    stratify_by: str | None = None
    first_token: int = 0


STUDY_TARGETS: tuple[Target, ...] = (
    Target("task", "tasks", "task", where={"scrambled": False}, group_by="story_id"),
    Target("task_scrambled", "tasks", "task", where={"scrambled": True}, group_by="story_id"),
    Target("format", "formats", "format", group_by="topic"),
    # Correctness of the answer whose profile is read: the greedy letter (highest log-likelihood right after
    # the prompt, the generation's own first choice).  Per style: the findings; pooled over styles: a summary
    # whose folds keep a question's styles together and balance the styles.
    Target("mmlu_correct", "mmlu", schema.CORRECT_LL, group_by="question_id", stratify_by="style"),
    Target("mmlu_correct", "mmlu", schema.CORRECT_LL, split_by="style", group_by="question_id"),
    # Variant: the calibrated letter's correctness (an answer the greedy generation need not have given).
    Target("mmlu_correct_calibrated", "mmlu", schema.CORRECT_CALIBRATED, group_by="question_id", stratify_by="style"),
    Target("family", "blank", schema.FAMILY, pooled=True, group_by=schema.PROMPT, first_token=FAMILY_FIRST_TOKEN),
    # Beyond the study: image classes from image classifiers' profiles (one token slot).
    Target("image_class", "images", "label", group_by="source"),
)
# Variants of a study target (another label for the same samples): scored, but not compared across Rényi orders,
# whose rows follow only the decided findings.
VARIANT_TARGETS = ("mmlu_correct_calibrated",)
RENYI_TARGETS = tuple(t for t in STUDY_TARGETS if t.name not in VARIANT_TARGETS)


def knn_table(
    stores: Mapping[str, xr.Dataset],
    targets: Sequence[Target] = STUDY_TARGETS,
    *,
    alphas: Sequence[float] = (),
    include_shannon: bool = True,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
) -> pd.DataFrame:
    """kNN AUC for every target, model, split and entropy measure.

    Args:
        stores: Combined datasets by dataset name (lazy is fine).  Targets whose
            dataset is absent are skipped with a warning.
        targets: What to predict (default :data:`STUDY_TARGETS`).
        alphas: Rényi orders to evaluate (each must be in the store's ``alpha``); order 1
            is Shannon entropy and is left out when ``include_shannon`` scores it already.
        include_shannon: Also evaluate Shannon ``entropy``.
        features: Feature settings (default :class:`FeatureSettings`).
        settings: kNN settings (default :class:`KnnSettings`).

    Returns:
        Tidy frame with :data:`TABLE_COLUMNS`, one row per (target, split, model,
        measure); rows that cannot be evaluated carry NaN scores and a ``note``.
    """
    measures = table_measures(alphas, include_shannon)
    rows = []
    for target in targets:
        if target.dataset not in stores:
            log.warning("target %r skipped: no store for dataset %r", target.name, target.dataset)
            continue
        for metric, alpha in measures:
            log.info("kNN target %s on %s, %s", target.name, target.dataset, metric_label(metric, alpha))
            rows += target_rows(
                stores[target.dataset], target, metric=metric, alpha=alpha, features=features, settings=settings
            )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def table_measures(alphas: Sequence[float], include_shannon: bool = True) -> list[tuple[str, float | None]]:
    """``(metric, alpha)`` of every measure the table scores: Shannon entropy, then each Rényi order (order 1 is
    Shannon and is left out when ``include_shannon`` scores it already)."""
    orders = [float(a) for a in alphas if not (include_shannon and float(a) == 1.0)]
    measures = [(schema.ENTROPY, None)] * include_shannon + [(schema.RENYI, a) for a in orders]
    if not measures:
        raise ValueError("nothing to evaluate: include_shannon is False and alphas is empty")
    return measures


def target_rows(
    ds: xr.Dataset,
    target: Target,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
) -> list[dict[str, Any]]:
    """Table rows of one target on one store for one entropy measure (see :func:`knn_table`)."""
    features = features or FeatureSettings()
    settings = settings or KnnSettings()
    base = {
        "dataset": target.dataset,
        "target": target.name,
        "metric": metric,
        "alpha": np.nan if alpha is None else alpha,
        "measure": metric_label(metric, alpha),
        "mode": features.mode,
        "mask_rule": features.mask_rule,
        "null_name": NULL_NAME,
        "test": settings.test,
    }
    protocols = PROTOCOLS if target.group_by else (STUDY,)
    rows = []
    for samples in target_samples(ds, target, metric=metric, alpha=alpha, features=features):
        for protocol in protocols:
            grouped = protocol == GROUPED
            scored = _score(
                samples.X,
                samples.labels,
                settings,
                samples.groups if grouped else None,
                samples.strata if grouped else None,
            )
            rows.append({**base, "split": samples.split, "model": samples.model, "protocol": protocol, **scored})
    return rows


@dataclass(frozen=True)
class Samples:
    """The samples one row of a target scores: its split and model, features, labels, sources and strata.

    Attributes:
        split: The split (``""`` without ``split_by``).
        model: The model, or :data:`POOLED_MODEL` for a pooled target.
        X: ``[N, F]`` features.
        labels: ``[N]`` label of each sample (``None``: missing).
        groups: ``[N]`` source of each sample (the target's ``group_by``), or ``None``.
        strata: ``[N]`` the second label the grouped folds balance (``stratify_by``), or ``None``.
    """

    split: str
    model: str
    X: np.ndarray
    labels: np.ndarray
    groups: np.ndarray | None
    strata: np.ndarray | None


def target_samples(
    ds: xr.Dataset,
    target: Target,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    features: FeatureSettings | None = None,
) -> Iterator[Samples]:
    """The :class:`Samples` of every row of one target on one store for one entropy measure, in table order:
    what :func:`target_rows` scores (and the permutation null draws from)."""
    features = features or FeatureSettings()
    for split, ids in target_splits(ds, target):
        for model in [POOLED_MODEL] if target.pooled else [str(m) for m in ds.indexes[schema.MODEL]]:
            if target.pooled:
                feats = pooled_features(
                    ds, metric=metric, alpha=alpha, settings=features, prompts=ids, first_token=target.first_token
                )
            else:
                feats = model_features(ds, model, metric=metric, alpha=alpha, settings=features, prompts=ids)
            labels = sample_labels(ds, target.label, feats.models, feats.prompts)
            groups = sample_labels(ds, target.group_by, feats.models, feats.prompts) if target.group_by else None
            strata = sample_labels(ds, target.stratify_by, feats.models, feats.prompts) if target.stratify_by else None
            yield Samples(split, model, feats.X, labels, groups, strata)


def target_splits(ds: xr.Dataset, target: Target) -> Iterator[tuple[str, np.ndarray]]:
    """``(split, prompt ids)`` of each run of ``target``: ``("", ids)`` without ``split_by``.

    Args:
        ds: The target's combined store.
        target: Its ``where`` filters keep prompts; its ``split_by`` values split them.
    """
    ids = prompt_ids(ds)
    mask = np.ones(ids.size, dtype=bool)
    for coord, value in target.where.items():
        mask &= _prompt_coord(ds, coord) == value
    if target.split_by is None:
        yield "", ids[mask]
        return
    values = _prompt_coord(ds, target.split_by)
    for value in pd.unique(values[mask]):
        yield str(value), ids[mask & (values == value)]


def _prompt_coord(ds: xr.Dataset, name: str) -> np.ndarray:
    if name not in ds.coords or ds[name].dims != (schema.PROMPT,):
        found = [c for c in ds.coords if ds[c].dims == (schema.PROMPT,)]
        raise ValueError(f"{name!r} is not a coordinate on 'prompt'; prompt coordinates here: {found}")
    return plain(ds[name].values)


def sample_labels(ds: xr.Dataset, label: str, models: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    """Label of each ``(model, prompt)`` sample; ``None`` where missing.

    Args:
        ds: Combined dataset.
        label: A coordinate on ``prompt`` or ``model``, or a ``(model, prompt)`` variable;
            negative ints and NaN count as missing (e.g. ``correct_parsed == -1``).
        models: ``[N]`` model of each sample.
        prompts: ``[N]`` prompt id of each sample.

    Returns:
        ``[N]`` object array.
    """
    if label not in ds.variables:
        raise ValueError(f"label {label!r} is neither a coordinate nor a variable of the store")
    var = ds[label]
    if var.dims == (schema.PROMPT,):
        values = var.sel({schema.PROMPT: xr.DataArray(prompts)}).values
    elif var.dims == (schema.MODEL,):
        values = var.sel({schema.MODEL: xr.DataArray(models.astype(str))}).values
    elif set(var.dims) == {schema.MODEL, schema.PROMPT}:
        values = var.sel({schema.MODEL: xr.DataArray(models.astype(str)), schema.PROMPT: xr.DataArray(prompts)}).values
    else:
        raise ValueError(f"label {label!r} has dims {var.dims}; expected (prompt,), (model,) or (model, prompt)")
    return _missing_to_none(plain(values))


def _missing_to_none(values: np.ndarray) -> np.ndarray:
    out = values.astype(object)
    if values.dtype.kind in "iu":
        out[values < 0] = None
    elif values.dtype.kind == "f":
        out[~np.isfinite(values)] = None
    return out


def _score(
    X: np.ndarray,
    labels: np.ndarray,
    settings: KnnSettings,
    groups: np.ndarray | None,
    strata: np.ndarray | None = None,
) -> dict[str, Any]:
    known = np.array([v is not None for v in labels], dtype=bool)
    X, labels = X[known], labels[known]
    groups = groups[known] if groups is not None else None
    strata = strata[known] if strata is not None else None
    sizes = {"n_samples": int(labels.size), "n_classes": int(pd.unique(labels.astype(str)).size)}
    note = class_shortfall(labels)
    if note:
        log.warning(note)
        return {**sizes, "note": note}
    try:
        result = knn_auc(X, labels, settings, groups=groups, strata=strata)
    except ValueError as err:  # e.g. too few groups to build folds holding every class
        log.warning("skipped: %s", err)
        return {**sizes, "note": f"skipped: {err}"}
    notes = (capped_note(result, settings), ceiling_note(result.knn, result.n_groups, result.level))
    return {**result.summary(), "note": "; ".join(n for n in notes if n)}
