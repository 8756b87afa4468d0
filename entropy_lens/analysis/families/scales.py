"""The scales same-family pairs are compared on, and each model's blank samples on them.

Scales (column ``scale``; "after depth normalization" is always the x-axis, layer ``l`` of
``L`` at depth ``(l + 1) / L``):

* ``nats``: entropy as measured.  Its level is bounded by ``log V`` (``V`` the vocabulary
  size), which differs between models by about as much as the gaps, so a gap in nats can be
  a vocabulary effect.
* ``normalized``: each model's entropy divided by its own ``log V`` (the ``vocab_size``
  coordinate on ``model``), a fraction of the entropy's ceiling: the level stays, the
  vocabulary's ceiling goes.
* ``centred``: each sample's profile minus its own mean over the model's layers, nats: the
  shape alone.

Dividing by a profile's range is not offered: it would inflate noise on flat profiles.

A sample's profile is its mean over valid tokens from token 1 on (token 0 reads the same context, the
BOS token alone, in every sample: :data:`~entropy_lens.analysis.features.FAMILY_FIRST_TOKEN`;
:func:`entropy_lens.analysis.families.shapes.source_profiles`, each sample its own source); the
mean profiles of one scale are bootstrapped with each model's samples resampled on their own
(:func:`entropy_lens.core.intervals.bootstrap_group_means`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from entropy_lens.analysis.families.shapes import source_profiles
from entropy_lens.analysis.features import (
    FAMILY_FIRST_TOKEN,
    check_first_token,
    model_depth,
    model_names,
    model_profiles,
    prompt_sources,
)
from entropy_lens.core.intervals import bootstrap_group_means
from entropy_lens.store import schema

NATS = "nats"
NORMALIZED = "normalized"
CENTRED = "centred"
SCALES = (NATS, NORMALIZED, CENTRED)
# Per-model coordinate of a combined store: the vocabulary size, whose log bounds the entropy.
VOCAB_SIZE = "vocab_size"


@dataclass(frozen=True)
class ModelSamples:
    """One model's blank samples on its own layers.

    Attributes:
        depth: ``[L]`` normalized depths of the model's layers.
        rows: ``[N, L]`` each sample's profile (mean over its valid tokens), nats.
        family: The model's family.
    """

    depth: np.ndarray
    rows: np.ndarray
    family: str


def model_samples(
    ds: xr.Dataset, models: Sequence[str] | None = None, *, first_token: int = FAMILY_FIRST_TOKEN
) -> dict[str, ModelSamples]:
    """Per-sample profiles of each model of a combined blank store, on its own layers, from token slot
    ``first_token`` on (default :data:`~entropy_lens.analysis.features.FAMILY_FIRST_TOKEN`).

    Samples with a layer that has no valid token are left out (with a warning).
    """
    sources = prompt_sources(ds)
    first = check_first_token(first_token, ds)
    out = {}
    for model in model_names(ds, models):
        rows, _ = source_profiles(model_profiles(ds, model)[:, first:], sources)
        family = str(ds[schema.FAMILY].sel({schema.MODEL: model}).values)
        out[model] = ModelSamples(model_depth(ds, model), rows, family)
    return out


def log_vocab(ds: xr.Dataset, models: Sequence[str]) -> dict[str, float]:
    """``log V`` of each model, ``V`` its vocabulary size (the ``vocab_size`` coordinate on ``model``).

    Returns:
        Model -> the ceiling of its entropy, nats.

    Raises:
        ValueError: naming the first model whose vocabulary size is missing or below 2.
    """
    models = list(models)
    found = VOCAB_SIZE in ds.coords and ds[VOCAB_SIZE].dims == (schema.MODEL,)
    sizes = ds[VOCAB_SIZE].sel({schema.MODEL: models}).values if found else np.full(len(models), np.nan)
    out = {}
    for model, size in zip(models, np.asarray(sizes, dtype=np.float64), strict=True):
        if not size > 1:  # NaN included; V = 1 has log V = 0
            shown = "missing" if math.isnan(size) else f"{size:g}"
            raise ValueError(
                f"model {model!r} has vocab_size {shown}; scale {NORMALIZED!r} divides entropy by log(vocab_size) "
                f"and needs a coordinate {VOCAB_SIZE!r} on 'model' above 1 (combine the stores again, "
                f"or leave {NORMALIZED!r} out of scales)"
            )
        out[model] = math.log(size)
    return out


def scale_rows(rows: np.ndarray, scale: str, log_v: float = math.nan) -> np.ndarray:
    """One model's sample profiles on ``scale`` (see the module docstring).

    Args:
        rows: ``[N, L]`` sample profiles, nats.
        scale: One of :data:`SCALES`.
        log_v: The model's ``log V``, nats (``normalized`` only).

    Returns:
        ``[N, L]``: nats for ``nats`` and ``centred``, a fraction of ``log V`` for ``normalized``.
    """
    if scale == NATS:
        return rows
    if scale == CENTRED:
        return rows - rows.mean(axis=1, keepdims=True)
    if scale == NORMALIZED and log_v > 0:
        return rows / log_v
    raise ValueError(f"scale must be one of {SCALES} ('normalized' with log_v > 0), got {scale!r}, log_v={log_v!r}")


@dataclass(frozen=True)
class ScaledMeans:
    """Every model's mean profile on one scale, at the estimate and per bootstrap replicate.

    Attributes:
        scale: One of :data:`SCALES`.
        estimate: Model -> ``[1, L_m]`` mean over its samples.
        replicates: Model -> ``[B, L_m]`` bootstrap replicates of that mean.
    """

    scale: str
    estimate: dict[str, np.ndarray]
    replicates: dict[str, np.ndarray]


def scaled_means(
    samples: Mapping[str, ModelSamples], scale: str, log_v: Mapping[str, float], *, n_boot: int, seed: int
) -> ScaledMeans:
    """Mean profiles on ``scale``, each model's samples resampled on their own.

    The draws depend only on the sample counts and ``seed``, so every scale of one seed
    resamples the same samples.
    """
    rows = {m: scale_rows(s.rows, scale, log_v.get(m, math.nan)) for m, s in samples.items()}
    replicates = bootstrap_group_means(list(rows.values()), n_boot=n_boot, seed=seed) if rows else []
    return ScaledMeans(
        scale, {m: r.mean(axis=0, keepdims=True) for m, r in rows.items()}, dict(zip(rows, replicates, strict=True))
    )
