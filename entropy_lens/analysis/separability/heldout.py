"""Model family held out across size: does a model's blank profile land in its own family?

The study reads blank-prompt profiles as clustering by model family rather than by size.
With one model per family, the pooled kNN ``family`` target cannot tell family from model
identity: every test prompt has its own model's other prompts in the training folds.  Here,
for each model ``m`` whose family has at least two models in the store, a kNN classifier
(the study's ``k``, distance and weights) is trained on the pooled samples of every *other*
model, labelled by family, and predicts ``m``'s samples.  A high share of ``m``'s samples
classified as its own family means a family's profile shape carries over to a model of
another size that the classifier never saw.

A held-out model is one observation of the claim (docs/verdicts.md, "The right units"): its samples
share its weights, so the share of its samples classified as its own family describes that one model,
and whether most of them are (``own_majority``) is what the claim counts.  ``chance`` is one over the
number of training families; ``majority_share`` and ``own_share_train`` say what always predicting the
largest family, or ``m``'s family, would score.  The Wilson interval over ``m``'s samples is descriptive.
The claim's row (model ``all``, :func:`over_models`) is the share of held-out models whose own family
takes most of their samples, with its exact (Clopper-Pearson) interval over models, against the best a
classifier without signal reaches (the largest of the held-out models' chance and training-majority
shares), and the number of held-out models that would decide it (:func:`models_to_decide`).

Vocabularies differ by 0.5-1.1 nats of ``log V`` between families, so a family's entropy level
may be its vocabulary size: ``normalize=True`` reads entropy / ``log V`` (each model's own
``V``, :func:`normalized_entropy`) instead.  A held-out model that shares its vocabulary size
(its tokenizer) with another model of its family has that named in its note as a confound:
there, family and tokenizer cannot be told apart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.features import FAMILY_FIRST_TOKEN, FeatureSettings, plain, pooled_features
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.frames import MEASURE, SPLIT, Reading
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.store import schema

log = logging.getLogger(__name__)

BLANK = "blank"
MIN_FAMILY_MODELS = 2
MIN_TRAIN_FAMILIES = 2
HELDOUT_COLUMNS = (
    "model",
    "own_majority",
    "family",
    "n_family_models",
    "n_train",
    "n_train_families",
    "k",
    "n",
    "n_own",
    "share",
    "ci_low",
    "ci_high",
    "chance",
    "majority_share",
    "own_share_train",
    "predicted",
    "models_to_decide",
    "note",
)
# The model of the claim's row over the held-out models (the pooled row a pooled claim reads).
OVER_MODELS = "all"
# The table as a standard frame (entropy_lens.core.frames): a share of blank samples per held-out model.
HELDOUT_READING = Reading("share", fixed={SPLIT: "blank", MEASURE: "shannon"})
# The same on entropy / log V (family_heldout(..., normalize=True)).
NORMALIZED_MEASURE = "shannon / log V"
HELDOUT_NORMALIZED_READING = Reading("share", fixed={SPLIT: "blank", MEASURE: NORMALIZED_MEASURE})


def family_heldout(
    stores: Mapping[str, xr.Dataset],
    *,
    dataset: str = BLANK,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
    normalize: bool = False,
) -> pd.DataFrame:
    """Leave-one-model-out kNN family prediction for every model of a family with >= 2 models.

    Args:
        stores: Combined datasets by dataset name (lazy is fine).
        dataset: The store to read (default the blank prompts); when absent, the empty
            frame is returned with a warning.
        features: Feature settings of the pooled features (Shannon entropy on the common
            normalized-depth grid; default :class:`~entropy_lens.analysis.features.FeatureSettings`).
        settings: The classifier's ``k``, distance, weights, level and threads (default
            :class:`~entropy_lens.analysis.separability.settings.KnnSettings`; the fold settings are unused).
        normalize: Read entropy / ``log V`` of each model (:func:`normalized_entropy`).

    Returns:
        Frame with :data:`HELDOUT_COLUMNS`, one row per held-out model in store order (shares are fractions
        of the model's samples), then the claim's row over them (model :data:`OVER_MODELS`,
        :func:`over_models`).  No row for a model alone in its family; rows that cannot be scored carry NaN
        numbers and a ``note``.
    """
    if dataset not in stores:
        log.warning("family held-out kNN skipped: no store for dataset %r", dataset)
        return pd.DataFrame(columns=list(HELDOUT_COLUMNS))
    ds = normalized_entropy(stores[dataset]) if normalize else stores[dataset]
    feats = pooled_features(ds, settings=features, first_token=FAMILY_FIRST_TOKEN)
    per_model = model_families(ds)
    confounds = tokenizer_confounds(ds)
    families = np.asarray([per_model[str(m)] for m in feats.models], dtype=object)
    sizes = pd.Series(per_model).value_counts()
    held_out = [m for m, fam in per_model.items() if sizes[fam] >= MIN_FAMILY_MODELS]
    if not held_out:
        log.warning("family held-out kNN: no family has %d models (families: %s)", MIN_FAMILY_MODELS, sizes.to_dict())
    rows = []
    for model in held_out:
        test = feats.models == model
        train = ~test
        base = {"model": model, "family": per_model[model], "n_family_models": int(sizes[per_model[model]])}
        row = heldout_row(feats.X[train], families[train].astype(str), feats.X[test], per_model[model], settings)
        note = "; ".join(t for t in (str(row.get("note") or ""), confounds.get(model, "")) if t)
        rows.append({**base, **row, "note": note})
    frame = pd.DataFrame(rows, columns=list(HELDOUT_COLUMNS))
    return pd.concat([frame, over_models(frame)], ignore_index=True) if rows else frame


def models_to_decide(bar: float, level: float = 0.95) -> int:
    """The fewest held-out models whose exact interval can clear ``bar``: ``m`` of ``m`` has the lower end
    ``((1 - level) / 2) ** (1 / m)``, above ``bar`` from ``m > log((1 - level) / 2) / log(bar)`` on."""
    if not 0 < bar < 1:
        raise ValueError(f"bar must lie in (0, 1), got {bar!r}")
    return int(np.floor(np.log((1 - level) / 2) / np.log(bar))) + 1


def over_models(per_model: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """The claim's row over the held-out models of ``per_model`` (see the module docstring): one row, model
    :data:`OVER_MODELS`, ``n`` the models scored and ``n_own`` those whose own family takes most of their
    samples, ``share`` with its exact interval, ``chance`` and ``majority_share`` the largest of the models'
    (the bar), ``predicted`` each model's observation."""
    scored = per_model[per_model["n_own"].notna()]
    n, own = len(scored), int(scored["own_majority"].sum()) if len(scored) else 0
    low, high = (np.nan, np.nan)
    if n:
        ci = stats.binomtest(own, n).proportion_ci(confidence_level=level, method="exact")
        low, high = float(ci.low), float(ci.high)
    bar = max(scored["chance"].max(), scored["majority_share"].max()) if n else np.nan
    seen = "; ".join(
        f"{m} {int(k)}/{int(t)}" for m, k, t in zip(scored["model"], scored["n_own"], scored["n"], strict=True)
    )
    row = {
        "model": OVER_MODELS,
        "family": "",
        "n_family_models": np.nan,
        "n": n,
        "n_own": own,
        "own_majority": np.nan,
        "share": own / n if n else np.nan,
        "ci_low": low,
        "ci_high": high,
        "chance": scored["chance"].max() if n else np.nan,
        "majority_share": scored["majority_share"].max() if n else np.nan,
        "predicted": seen,
        "models_to_decide": models_to_decide(bar, level) if n and 0 < bar < 1 else np.nan,
        "note": f"one observation per held-out model (its own family for most of its samples); exact interval "
        f"over {n} models",
    }
    return pd.DataFrame([row], columns=list(HELDOUT_COLUMNS))


def model_families(ds: xr.Dataset) -> dict[str, str]:
    """Family of every model of ``ds`` (its ``family`` coordinate on ``model``), in store order."""
    if schema.FAMILY not in ds.coords or ds[schema.FAMILY].dims != (schema.MODEL,):
        raise ValueError(f"the store has no {schema.FAMILY!r} coordinate on 'model'; combine stores with store.combine")
    families = plain(ds[schema.FAMILY].values)
    return {str(m): str(f) for m, f in zip(ds.indexes[schema.MODEL], families, strict=True)}


def normalized_entropy(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with Shannon entropy divided by ``log V`` of each model (its ``vocab_size`` coordinate), in ``[0, 1]``."""
    if schema.VOCAB_SIZE not in ds.coords or ds[schema.VOCAB_SIZE].dims != (schema.MODEL,):
        raise ValueError(
            f"the store has no {schema.VOCAB_SIZE!r} coordinate on 'model'; combine stores with store.combine"
        )
    log_v = np.log(ds[schema.VOCAB_SIZE].astype(np.float64))
    return ds.assign({schema.ENTROPY: ds[schema.ENTROPY] / log_v})


def tokenizer_confounds(ds: xr.Dataset) -> dict[str, str]:
    """Model -> a note naming the other models of its family with the same vocabulary size (a shared tokenizer)."""
    if schema.VOCAB_SIZE not in ds.coords:
        return {}
    families = model_families(ds)
    vocab = {str(m): int(v) for m, v in zip(ds.indexes[schema.MODEL], ds[schema.VOCAB_SIZE].values, strict=True)}
    notes = {}
    for model, family in families.items():
        twins = [m for m, f in families.items() if f == family and m != model and vocab[m] == vocab[model]]
        if twins:
            notes[model] = (
                f"confound: shares its tokenizer (vocabulary {vocab[model]}) with {', '.join(twins)} of its family, "
                "so family and tokenizer coincide here"
            )
    return notes


def heldout_row(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    family: str,
    settings: KnnSettings | None = None,
) -> dict[str, Any]:
    """Train on other models' samples, predict the held-out model's, count its own family.

    Args:
        X_train: ``[N_train, F]`` features of every other model.
        y_train: ``[N_train]`` their families.
        X_test: ``[n, F]`` features of the held-out model (same feature grid).
        family: The held-out model's family.
        settings: ``k`` (capped below ``N_train`` with a warning and a note), distance,
            weights, level and threads.

    Returns:
        The numeric columns of :data:`HELDOUT_COLUMNS` from ``n_train`` on.
    """
    settings = settings or KnnSettings()
    shares = pd.Series(y_train).value_counts(normalize=True)
    train = {
        "n_train": int(y_train.size),
        "n_train_families": int(shares.size),
        "chance": 1.0 / shares.size if shares.size else np.nan,
        "majority_share": float(shares.max()) if shares.size else np.nan,
        "own_share_train": float(shares.get(family, 0.0)),
        "n": int(X_test.shape[0]),
    }
    if shares.size < MIN_TRAIN_FAMILIES or X_test.shape[0] == 0:
        note = (
            f"skipped: the other models hold {shares.size} famil{'y' if shares.size == 1 else 'ies'} "
            f"(need >= {MIN_TRAIN_FAMILIES})"
            if shares.size < MIN_TRAIN_FAMILIES
            else "skipped: the held-out model has no sample"
        )
        log.warning("family held-out kNN for family %r %s", family, note)
        return {**train, "note": note}
    k, note = _capped_k(settings.k, y_train.size)
    clf = KNeighborsClassifier(n_neighbors=k, metric=settings.distance, weights=settings.weights)
    with threadpool_limits(limits=settings.n_threads, user_api="openmp"):
        predicted = clf.fit(X_train, y_train).predict(X_test)
    n_own = int((predicted == family).sum())
    low, high = wilson_interval(n_own, predicted.size, settings.level)
    share = {"k": k, "n_own": n_own, "share": n_own / predicted.size, "ci_low": low, "ci_high": high}
    share["own_majority"] = bool(2 * n_own > predicted.size)
    return {**train, **share, "predicted": predicted_counts(predicted), "note": note}


def _capped_k(k: int, n_train: int) -> tuple[int, str]:
    """``k`` below the training size: ``(k, "")``, or the capped ``k`` and a note (logged)."""
    if k < n_train:
        return k, ""
    capped = max(n_train - 1, 1)
    log.warning("k=%d is not below the %d training samples of the held-out kNN; using k=%d", k, n_train, capped)
    return capped, f"k capped {k} -> {capped} ({n_train} training samples)"


def predicted_counts(predicted: np.ndarray) -> str:
    """Counts of predicted labels, largest first (ties by name): ``"qwen 18; gemma 2"``."""
    counts = pd.Series(np.asarray(predicted).astype(str)).value_counts()
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "; ".join(f"{label} {n}" for label, n in ordered)
