"""Baselines beside a profile's kNN AUC: what a trivial reading of the same samples already separates.

A profile that separates tasks, formats or right from wrong answers says little if a simpler
reading separates them as well.  Each grouped separability row gets, on its own
:class:`~entropy_lens.analysis.separability.folds.FoldPlan` (the same samples, folds, skipped folds and ``k``):

* tasks and formats: the **first-token profile** (the entropy of the first generated token at
  every layer, the same kNN) and the **prompt text** (a bag-of-words logistic regression on the
  prompt the model read: the instruction alone may name the task);
* MMLU correctness: the **final-layer entropy** (the profile's last layer alone, the same kNN)
  and the **top-letter probability** (the model's own confidence in the letter it would give:
  its probability, and its share of the four letters' mass, from the choice log-probabilities);
* family (model identity where each family has one model), pooled over the blank samples of every model:
  **one scalar, token 0's final-layer entropy** (each model's own last layer; a blank prompt's first token
  is the same context for every sample of a model, so the scalar is nearly a constant per model).

Each row carries the profile's AUC, the baseline's, and the paired fold difference
``profile - baseline`` with the Nadeau-Bengio corrected resampled-t interval (the interval of
:func:`~entropy_lens.core.folds.corrected_t_interval`, bounded by ``[-1, 1]``), in the
null columns of :data:`~entropy_lens.core.frames.NULL_CONTRACT` (``null_*`` is the baseline, ``beyond`` the
difference).  An AUC at the ceiling (or floor) in every fold takes the exact interval over the row's sources
(:func:`~entropy_lens.core.folds.fold_score_interval`), and the note says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.features import (
    FeatureSettings,
    apply_mask_rule,
    model_profiles,
    pooled_features,
    token_features,
)
from entropy_lens.analysis.separability.folds import FoldPlan, class_shortfall, plan_folds
from entropy_lens.analysis.separability.knn import POOLED_MODEL, ceiling_note, fold_auc, score_folds
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import STUDY_TARGETS, Target, sample_labels, target_splits
from entropy_lens.core.folds import DIFFERENCE_BOUNDS, corrected_t_interval, fold_score_interval
from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.store import schema

log = logging.getLogger(__name__)

FIRST_TOKEN = "first-token profile"
PROMPT_TEXT = "prompt text (bag of words)"
FINAL_LAYER = "final-layer entropy"
TOP_LETTER = "top-letter probability"
TOKEN0_FINAL = "token 0's final-layer entropy"
# Which baselines stand beside which kNN target's grouped rows.
BASELINES: dict[str, tuple[str, ...]] = {
    "task": (FIRST_TOKEN, PROMPT_TEXT),
    "task_scrambled": (FIRST_TOKEN, PROMPT_TEXT),
    "format": (FIRST_TOKEN, PROMPT_TEXT),
    "mmlu_correct": (FINAL_LAYER, TOP_LETTER),
    "family": (TOKEN0_FINAL,),
}
# The bag-of-words model: a fixed, mildly regularized logistic regression (no tuning on the results), fitted on one
# BLAS/OpenMP thread: with the default threads its lbfgs took 1-2 s a fold on 60-72 prompts here, on one 0.15 s.
TEXT_C = 1.0
TEXT_THREADS = 1
TEXT_MAX_ITER = 1000
BASELINE_COLUMNS = (
    "dataset",
    "target",
    "split",
    "model",
    "baseline",
    "n_samples",
    "n_groups",
    "n_folds",
    "auc_mean",
    "auc_low",
    "auc_high",
    *NULL_CONTRACT,
    "note",
)
# The table as a standard frame (entropy_lens.core.frames): the profile's AUC beyond the baseline.
BASELINE_READING = Reading(
    "beyond", "beyond_low", "beyond_high", n="n_samples", sources="n_groups", split="split", measure="baseline"
)


def baseline_table(
    stores: Mapping[str, xr.Dataset],
    letter_logprobs: pd.DataFrame | None = None,
    targets: Sequence[Target] = STUDY_TARGETS,
    *,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
) -> pd.DataFrame:
    """The profile's kNN AUC beside each baseline of :data:`BASELINES`, paired on identical grouped folds.

    Args:
        stores: Combined datasets by dataset name (lazy is fine); absent datasets are skipped.
        letter_logprobs: MMLU scores with ``model, prompt_id, logprob_A..D`` (the ``score_mmlu``
            tables, concatenated); without it the top-letter rows carry a note.
        targets: Targets to read (those named in :data:`BASELINES` with a ``group_by`` are used).
        features: Feature settings of the profile (Shannon entropy; default
            :class:`~entropy_lens.analysis.features.FeatureSettings`).
        settings: kNN settings (default :class:`~entropy_lens.analysis.separability.settings.KnnSettings`).

    Returns:
        Frame with :data:`BASELINE_COLUMNS`, one row per (target, split, model, baseline); AUCs
        and differences are fractions; rows that cannot be scored carry NaN numbers and a note.
    """
    rows: list[dict[str, Any]] = []
    for target in targets:
        if target.name not in BASELINES or target.group_by is None or target.dataset not in stores:
            continue
        ds = stores[target.dataset]
        for split, ids in target_splits(ds, target):
            for model in [POOLED_MODEL] if target.pooled else [str(m) for m in ds.indexes[schema.MODEL]]:
                log.info("baselines of %s %s on %s", target.name, split or "(all)", model)
                base = {"dataset": target.dataset, "target": target.name, "split": split, "model": model}
                samples = _samples(ds, target, model, ids, letter_logprobs, features or FeatureSettings())
                rows += [{**base, **row} for row in _scored_rows(ds, target, samples, settings)]
    return pd.DataFrame(rows, columns=list(BASELINE_COLUMNS))


@dataclass(frozen=True)
class _Samples:
    """One row's samples: the profile's features and, lazily, each baseline's inputs, in one sample order.

    Attributes:
        X: ``[N, F]`` the profile's features (the kNN table's, for this target).
        models: ``[N]`` model of each sample.
        prompts: ``[N]`` prompt id of each sample.
        inputs: Baseline name -> a function of a ``[N]`` bool mask giving the kept samples' features (or texts).
    """

    X: np.ndarray
    models: np.ndarray
    prompts: np.ndarray
    inputs: Mapping[str, Callable[[np.ndarray], Any]]


def _samples(
    ds: xr.Dataset,
    target: Target,
    model: str,
    ids: np.ndarray,
    letter_logprobs: pd.DataFrame | None,
    features: FeatureSettings,
) -> _Samples:
    """The samples of one (split, model) row (every model's, pooled, for a pooled target)."""
    if target.pooled:
        feats = pooled_features(ds, settings=features, prompts=ids)
        inputs = {TOKEN0_FINAL: lambda rows: token0_final_entropy(ds, feats.models[rows], feats.prompts[rows])}
        return _Samples(feats.X, feats.models, feats.prompts, inputs)
    complete, keep = apply_mask_rule(model_profiles(ds, model, prompts=ids), features.mask_rule)  # [P, T, L]
    prompts = ids[keep]
    inputs = {
        FIRST_TOKEN: lambda rows: complete[rows, 0, :],
        FINAL_LAYER: lambda rows: token_features(complete[rows][:, :, -1:], features.mode, features.n_windows),
        TOP_LETTER: lambda rows: top_letter_features(letter_logprobs, model, prompts[rows]),
        PROMPT_TEXT: lambda rows: prompt_texts(ds, model, prompts[rows]),
    }
    X = token_features(complete, features.mode, features.n_windows)
    return _Samples(X, np.full(prompts.size, model, dtype=object), prompts, inputs)


def _scored_rows(
    ds: xr.Dataset, target: Target, samples: _Samples, settings: KnnSettings | None
) -> list[dict[str, Any]]:
    """One row per baseline of ``target``, every one scored on the profile's fold plan."""
    names = BASELINES[target.name]
    labels = sample_labels(ds, target.label, samples.models, samples.prompts)
    groups = sample_labels(ds, target.group_by, samples.models, samples.prompts)
    strata = sample_labels(ds, target.stratify_by, samples.models, samples.prompts) if target.stratify_by else None
    known = np.array([v is not None for v in labels], dtype=bool)
    sizes = {"n_samples": int(known.sum()), "n_groups": int(pd.unique(groups[known].astype(str)).size)}
    note = class_shortfall(labels[known])
    plan = None
    if not note:
        try:
            plan = plan_folds(
                labels[known], settings, groups=groups[known], strata=None if strata is None else strata[known]
            )
        except ValueError as err:
            note = f"skipped: {err}"
    if plan is None:
        return [{**sizes, "baseline": name, "null_name": name, "note": note} for name in names]
    profile = score_folds(samples.X[known], plan, settings).knn
    rows = []
    for name in names:
        try:
            scores = baseline_scores(name, samples.inputs[name](known), plan, settings)
        except ValueError as err:  # e.g. no letter log-probabilities for this model
            log.warning("baseline %s of %s skipped: %s", name, target.name, err)
            rows.append({**sizes, "baseline": name, "null_name": name, "note": f"skipped: {err}"})
            continue
        rows.append({**sizes, "baseline": name, **paired_row(profile, scores, plan, name, settings)})
    return rows


def token0_final_entropy(ds: xr.Dataset, models: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    """``[N, 1]`` the entropy of each sample's first generated token at its model's own final layer (nats).

    Args:
        ds: Combined store.
        models: ``[N]`` model of each sample.
        prompts: ``[N]`` prompt id of each sample.
    """
    out = np.full(models.size, np.nan)
    for model in pd.unique(models.astype(str)):
        rows = np.flatnonzero(models.astype(str) == model)
        out[rows] = model_profiles(ds, model, prompts=list(prompts[rows]))[:, 0, -1]
    if not np.isfinite(out).all():
        raise ValueError(f"{int((~np.isfinite(out)).sum())} samples have no token 0 at the final layer")
    return out[:, None]


def baseline_scores(name: str, inputs: Any, plan: FoldPlan, settings: KnnSettings | None = None) -> np.ndarray:
    """``[F]`` fold AUCs of one baseline on ``plan``: the same kNN on features, or the text classifier."""
    if name == PROMPT_TEXT:
        return text_scores(inputs, plan)
    return score_folds(np.asarray(inputs, dtype=np.float64), plan, settings).knn


def paired_row(
    profile: np.ndarray, baseline: np.ndarray, plan: FoldPlan, name: str, settings: KnnSettings | None = None
) -> dict[str, Any]:
    """The profile's and the baseline's mean fold AUC and the paired difference, with corrected intervals.

    Args:
        profile: ``[F]`` fold AUCs of the profile on ``plan``.
        baseline: ``[F]`` fold AUCs of the baseline on the same folds.
        plan: The folds (its ``n_splits`` sets the ``n_test / n_train`` correction).
        name: The baseline's name (the ``null_name`` column).
        settings: Its ``level`` is the intervals' coverage.

    Returns:
        The numeric columns of :data:`BASELINE_COLUMNS` from ``n_folds`` on, ``null_name``, and a ``note`` where an
        AUC sits at the ceiling in every fold.
    """
    profile, baseline = np.asarray(profile, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    if profile.shape != baseline.shape:
        raise ValueError(f"fold AUCs are not paired: {profile.shape} and {baseline.shape}; score both on one plan")
    level = (settings or KnnSettings()).level
    ratio = 1.0 / (plan.n_splits - 1)
    auc_low, auc_high = fold_score_interval(profile, ratio, plan.n_groups, level)
    null_low, null_high = fold_score_interval(baseline, ratio, plan.n_groups, level)
    diff = profile - baseline
    beyond_low, beyond_high = corrected_t_interval(diff, ratio, level, bounds=DIFFERENCE_BOUNDS)
    notes = [
        f"{who} {note}"
        for who, scores in (("profile", profile), (name, baseline))
        if (note := ceiling_note(scores, plan.n_groups, level))
    ]
    return {
        "n_folds": int(profile.size),
        "auc_mean": float(profile.mean()),
        "auc_low": auc_low,
        "auc_high": auc_high,
        "null_name": name,
        "null_estimate": float(baseline.mean()),
        "null_low": null_low,
        "null_high": null_high,
        "beyond": float(diff.mean()),
        "beyond_low": beyond_low,
        "beyond_high": beyond_high,
        "note": "; ".join(notes),
    }


def text_scores(texts: Sequence[str], plan: FoldPlan) -> np.ndarray:
    """``[F]`` fold AUCs of a bag-of-words logistic regression on the prompt texts, on ``plan``'s folds.

    The vocabulary is fitted on each fold's training prompts only (word counts,
    :class:`~sklearn.feature_extraction.text.CountVectorizer`), so a test prompt's unseen words count for nothing.
    """
    texts = np.asarray(texts, dtype=object)
    if texts.shape != plan.codes.shape:
        raise ValueError(f"texts must hold one prompt per sample ({plan.codes.size}), got shape {texts.shape}")
    scores = []
    with threadpool_limits(limits=TEXT_THREADS):
        for _, train, test in plan.folds:
            vectorizer = CountVectorizer(token_pattern=r"(?u)\b\w+\b")
            words = vectorizer.fit_transform(texts[train])
            clf = LogisticRegression(C=TEXT_C, max_iter=TEXT_MAX_ITER).fit(words, plan.codes[train])
            proba = np.zeros((test.size, plan.n_classes))
            proba[:, clf.classes_] = clf.predict_proba(vectorizer.transform(texts[test]))
            scores.append(fold_auc(plan.codes[test], proba))
    return np.asarray(scores)


def prompt_texts(ds: xr.Dataset, model: str, prompts: np.ndarray) -> np.ndarray:
    """``[N]`` the prompt text ``model`` read for each prompt id (the combined store's ``prompt_text``)."""
    text = ds[schema.PROMPT_TEXT]
    if schema.MODEL in text.dims:
        text = text.sel({schema.MODEL: model})
    return np.asarray([str(t) for t in text.sel({schema.PROMPT: list(prompts)}).values], dtype=object)


def top_letter_features(letter_logprobs: pd.DataFrame | None, model: str, prompts: np.ndarray) -> np.ndarray:
    """``[N, 2]`` the model's top-letter probability and that letter's share of the four letters' mass.

    Args:
        letter_logprobs: Frame with ``model, prompt_id`` and ``logprob_A..D`` (nats).
        model: The model whose answers are read.
        prompts: ``[N]`` prompt ids, in the order of the rows wanted.
    """
    columns = [f"logprob_{letter}" for letter in LETTERS]
    if letter_logprobs is None or letter_logprobs.empty:
        raise ValueError("no letter log-probabilities given (the score_mmlu tables)")
    missing = [c for c in ("model", "prompt_id", *columns) if c not in letter_logprobs.columns]
    if missing:
        raise ValueError(f"letter log-probabilities lack columns {missing}")
    table = letter_logprobs[letter_logprobs["model"].astype(str) == model].set_index("prompt_id")
    absent = [p for p in prompts if p not in table.index]
    if absent:
        raise ValueError(f"no letter log-probabilities of {model!r} for {len(absent)} prompts, e.g. {absent[0]!r}")
    probs = np.exp(table.loc[list(prompts), columns].to_numpy(dtype=np.float64))  # [N, 4]
    top = probs.max(axis=1)
    return np.stack([top, top / probs.sum(axis=1)], axis=1)
