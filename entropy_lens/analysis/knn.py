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
t-test, which inflates the variance by ``n_test / n_train``, and is the default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from sklearn.dummy import DummyClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import RepeatedStratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from entropy_lens import schema
from entropy_lens.analysis.features import (
    FeatureSettings,
    metric_label,
    model_features,
    plain,
    pooled_features,
    prompt_ids,
)

log = logging.getLogger(__name__)

DEFAULT_K = 29
DEFAULT_SPLITS = 10
DEFAULT_REPEATS = 3
DEFAULT_SEED = 0
DEFAULT_DISTANCE = "euclidean"
DEFAULT_WEIGHTS = "uniform"
PAIRED_TESTS = ("wilcoxon", "ttest", "corrected_ttest")
DEFAULT_TEST = "corrected_ttest"
MIN_PER_CLASS = 2
# OpenMP threads for the neighbour search.  With torch imported, two OpenMP runtimes share
# the cores and each small brute-force kNN call stalls for ~30-80 ms in spin-waits; one
# thread avoids that and costs little at the study's scale (thousands of samples).
DEFAULT_THREADS = 1
TABLE_COLUMNS = (
    "dataset",
    "target",
    "split",
    "model",
    "metric",
    "alpha",
    "measure",
    "mode",
    "mask_rule",
    "n_samples",
    "n_classes",
    "k",
    "n_splits",
    "n_repeats",
    "auc_mean",
    "auc_std",
    "dummy_mean",
    "dummy_std",
    "p_value",
    "test",
    "note",
)
POOLED_MODEL = "all"


@dataclass(frozen=True)
class KnnSettings:
    """Classifier and cross-validation settings.

    Attributes:
        k: Neighbours (capped below the smallest training fold, with a warning).
        n_splits: Stratified folds (capped at the smallest class count, with a warning).
        n_repeats: Repetitions of the shuffled fold split.
        seed: Seed of the fold shuffling and of the dummy baseline.
        distance: ``KNeighborsClassifier`` metric.
        weights: ``KNeighborsClassifier`` weights.
        test: Paired test over fold AUCs, one of :data:`PAIRED_TESTS`.
        n_threads: OpenMP threads for the neighbour search (``None``: the library default).
    """

    k: int = DEFAULT_K
    n_splits: int = DEFAULT_SPLITS
    n_repeats: int = DEFAULT_REPEATS
    seed: int = DEFAULT_SEED
    distance: str = DEFAULT_DISTANCE
    weights: str = DEFAULT_WEIGHTS
    test: str = DEFAULT_TEST
    n_threads: int | None = DEFAULT_THREADS

    def __post_init__(self) -> None:
        for name in ("k", "n_repeats"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if not isinstance(self.n_splits, int) or self.n_splits < 2:
            raise ValueError(f"n_splits must be an int >= 2, got {self.n_splits!r}")
        if self.test not in PAIRED_TESTS:
            raise ValueError(f"test must be one of {PAIRED_TESTS}, got {self.test!r}")


@dataclass(frozen=True)
class AucResult:
    """Fold AUCs of kNN and of the dummy baseline on the same folds.

    Attributes:
        knn: ``[n_splits * n_repeats]`` kNN ROC AUC per fold.
        dummy: ``[n_splits * n_repeats]`` stratified-dummy ROC AUC per fold.
        k: Neighbours actually used.
        n_splits: Folds actually used.
        n_repeats: Repetitions.
        n_samples: Samples.
        n_classes: Classes.
        p_value: One-sided paired test p-value (kNN > dummy).
        test: Name of the paired test.
    """

    knn: np.ndarray
    dummy: np.ndarray
    k: int
    n_splits: int
    n_repeats: int
    n_samples: int
    n_classes: int
    p_value: float
    test: str

    def summary(self) -> dict[str, Any]:
        """Mean +- std (ddof=1) over folds plus the run's sizes, as one table row."""
        return {
            "n_samples": self.n_samples,
            "n_classes": self.n_classes,
            "k": self.k,
            "n_splits": self.n_splits,
            "n_repeats": self.n_repeats,
            "auc_mean": float(self.knn.mean()),
            "auc_std": float(self.knn.std(ddof=1)),
            "dummy_mean": float(self.dummy.mean()),
            "dummy_std": float(self.dummy.std(ddof=1)),
            "p_value": self.p_value,
            "test": self.test,
        }


def knn_auc(X: np.ndarray, y: Sequence[Any], settings: KnnSettings | None = None) -> AucResult:
    """Cross-validated kNN ROC AUC of labels ``y`` from features ``X``.

    Args:
        X: ``[N, F]`` finite features.
        y: ``[N]`` labels (any hashable values; at least 2 classes of >= 2 samples each).
        settings: Classifier and CV settings (default :class:`KnnSettings`).

    Returns:
        :class:`AucResult` over ``n_splits * n_repeats`` folds.
    """
    settings = settings or KnnSettings()
    X = np.asarray(X, dtype=np.float64)
    codes, counts = _encode(y, X)
    n_splits = _cap_splits(settings.n_splits, int(counts.min()))
    k = _cap_k(settings.k, codes.size, n_splits)
    cv = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=settings.n_repeats, random_state=settings.seed)
    knn_scores, dummy_scores = [], []
    with threadpool_limits(limits=settings.n_threads, user_api="openmp"):
        for fold, (train, test) in enumerate(cv.split(X, codes)):
            clf = KNeighborsClassifier(n_neighbors=k, metric=settings.distance, weights=settings.weights)
            dummy = DummyClassifier(strategy="stratified", random_state=settings.seed + fold)
            knn_scores.append(fold_auc(codes[test], clf.fit(X[train], codes[train]).predict_proba(X[test])))
            dummy_scores.append(fold_auc(codes[test], dummy.fit(X[train], codes[train]).predict_proba(X[test])))
    knn_arr, dummy_arr = np.asarray(knn_scores), np.asarray(dummy_scores)
    ratio = 1.0 / (n_splits - 1)  # n_test / n_train of a k-fold split
    p = paired_p_value(knn_arr, dummy_arr, settings.test, test_train_ratio=ratio)
    return AucResult(knn_arr, dummy_arr, k, n_splits, settings.n_repeats, codes.size, counts.size, p, settings.test)


def _encode(y: Sequence[Any], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(y)
    if X.ndim != 2 or labels.shape != (X.shape[0],):
        raise ValueError(f"X must be [N, F] and y [N]; got X {X.shape} and y {labels.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN/inf; build features with a masked-token rule (features.apply_mask_rule)")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    counts = np.bincount(codes)
    if counts.size < 2 or counts.min() < MIN_PER_CLASS:
        raise ValueError(
            f"kNN AUC needs >= 2 classes with >= {MIN_PER_CLASS} samples each; class counts are {counts.tolist()}"
        )
    return codes, counts


def _cap_splits(n_splits: int, smallest_class: int) -> int:
    if smallest_class < n_splits:
        log.warning(
            "n_splits=%d exceeds the smallest class (%d samples); using %d folds",
            n_splits,
            smallest_class,
            smallest_class,
        )
        return smallest_class
    return n_splits


def _cap_k(k: int, n_samples: int, n_splits: int) -> int:
    smallest_train = n_samples - math.ceil(n_samples / n_splits)
    if k >= smallest_train:
        capped = max(smallest_train - 1, 1)
        log.warning("k=%d is not below the smallest training fold (%d samples); using k=%d", k, smallest_train, capped)
        return capped
    return k


def fold_auc(y_true: np.ndarray, proba: np.ndarray) -> float:
    """ROC AUC of one fold.

    Args:
        y_true: ``[n]`` integer class codes ``0..C-1`` (every class present).
        proba: ``[n, C]`` predicted class probabilities, columns in code order.

    Returns:
        Binary: AUC of the class-1 score.  Multi-class: one-vs-rest macro AUC.
    """
    if proba.shape[1] == 2:
        return float(roc_auc_score(y_true, proba[:, 1]))
    return float(roc_auc_score(y_true, proba, multi_class="ovr", average="macro", labels=np.arange(proba.shape[1])))


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
    """

    name: str
    dataset: str
    label: str
    where: Mapping[str, Any] = field(default_factory=dict)
    split_by: str | None = None
    pooled: bool = False


STUDY_TARGETS: tuple[Target, ...] = (
    Target("task", "tasks", "task", where={"scrambled": False}),
    Target("task_scrambled", "tasks", "task", where={"scrambled": True}),
    Target("format", "formats", "format"),
    Target("mmlu_correct", "mmlu", "correct_ll", split_by="style"),
    Target("family", "blank", schema.FAMILY, pooled=True),
)


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
        alphas: Rényi orders to evaluate (each must be in the store's ``alpha``).
        include_shannon: Also evaluate Shannon ``entropy``.
        features: Feature settings (default :class:`FeatureSettings`).
        settings: kNN settings (default :class:`KnnSettings`).

    Returns:
        Tidy frame with :data:`TABLE_COLUMNS`, one row per (target, split, model,
        measure); rows that cannot be evaluated carry NaN scores and a ``note``.
    """
    measures = [(schema.ENTROPY, None)] * include_shannon + [(schema.RENYI, float(a)) for a in alphas]
    if not measures:
        raise ValueError("nothing to evaluate: include_shannon is False and alphas is empty")
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
        "test": settings.test,
    }
    rows = []
    for split, ids in _splits(ds, target):
        for model in [POOLED_MODEL] if target.pooled else [str(m) for m in ds.indexes[schema.MODEL]]:
            if target.pooled:
                feats = pooled_features(ds, metric=metric, alpha=alpha, settings=features, prompts=ids)
            else:
                feats = model_features(ds, model, metric=metric, alpha=alpha, settings=features, prompts=ids)
            labels = sample_labels(ds, target.label, feats.models, feats.prompts)
            rows.append({**base, "split": split, "model": model, **_score(feats.X, labels, settings)})
    return rows


def _splits(ds: xr.Dataset, target: Target) -> Iterator[tuple[str, np.ndarray]]:
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


def _score(X: np.ndarray, labels: np.ndarray, settings: KnnSettings) -> dict[str, Any]:
    known = np.array([v is not None for v in labels], dtype=bool)
    X, labels = X[known], labels[known]
    counts = pd.Series(labels.astype(str)).value_counts()
    if counts.size < 2 or counts.min() < MIN_PER_CLASS:
        note = f"skipped: class counts {counts.to_dict()} (need >= 2 classes of >= {MIN_PER_CLASS})"
        log.warning(note)
        return {"n_samples": int(labels.size), "n_classes": int(counts.size), "note": note}
    result = knn_auc(X, labels, settings)
    note = "" if result.n_splits == settings.n_splits and result.k == settings.k else "k or n_splits capped"
    return {**result.summary(), "note": note}
