"""Same-family pairs against other families: "family, not size" and "size as resolution".

On blank-prompt profiles, for each same-family pair ``(small, large)`` of
:func:`entropy_lens.analysis.families.family_size_pairs`, three statistics, each on every scale
(below):

* ``family_gap`` = min over ``m`` in {small, large} and every model ``o`` of another family
  of ``d(m, o)``, minus ``d(small, large)``.  ``d`` is the RMS distance of two models' mean
  profiles on one normalized-depth grid for every model of the store
  (:func:`~entropy_lens.analysis.features.depth_grid`), so that every distance covers the same
  depths and distances compare.  Above 0: the two sizes of the family are closer to each
  other than either is to any other family (the worse of the two models counts).
* ``resolution_gap`` = min over ``o`` of another family of ``r(small, o) - r(small, large)``.
  ``r(small, x)`` is the RMS difference between the smaller model's profile at its own
  layer depths and ``x``'s profile read (linearly interpolated) at those depths; both terms
  of a difference use the smaller model's depths that ``o`` covers (``>= 1 / L_o``, no
  extrapolation).  Above 0: the larger model of the family, sampled at the smaller one's
  depths, matches the smaller model better than any other family does: the smaller model
  looks like a coarser sampling of its family's schedule.
* ``alignment_gap`` = ``r_abs - r_norm``, the pair alone (no other family enters).
  ``r_norm`` = ``r(small, large)`` on every depth of the smaller model (the ``same`` of
  ``resolution_gap``): the two aligned on normalized depth.  ``r_abs`` is the RMS difference
  of the smaller model's layer ``l`` and the larger model's layer ``l``, ``l = 0 .. L_small -
  1``: the two aligned on absolute layer index.  Above 0: normalized depth aligns the two
  sizes better than layer index does, so the smaller model is the family's schedule sampled
  more coarsely, not its first layers.  "Smaller" here is the model with fewer layers.

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

Intervals: each model's blank samples are generated independently of every other model's,
so a replicate resamples samples within each model on its own
(:func:`entropy_lens.core.intervals.bootstrap_group_means`).  A sample's profile is its mean
over valid tokens (:func:`entropy_lens.analysis.shapes.source_profiles`, each sample its
own source).  Verdicts: :func:`entropy_lens.verdicts.rules.family_not_size` and
:func:`~entropy_lens.verdicts.rules.size_resolution`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.families import family_size_pairs, layer_profiles, rms_of
from entropy_lens.analysis.features import (
    DEFAULT_GRID_POINTS,
    depth_grid,
    model_depth,
    model_names,
    model_profiles,
    resample_depth,
)
from entropy_lens.analysis.shapes import prompt_sources, source_profiles
from entropy_lens.core.frames import SPLIT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, bootstrap_group_means, percentile_interval
from entropy_lens.store import schema

log = logging.getLogger(__name__)

FAMILY_GAP = "family_gap"
RESOLUTION_GAP = "resolution_gap"
ALIGNMENT_GAP = "alignment_gap"
STATISTICS = (FAMILY_GAP, RESOLUTION_GAP, ALIGNMENT_GAP)
NATS = "nats"
NORMALIZED = "normalized"
CENTRED = "centred"
SCALES = (NATS, NORMALIZED, CENTRED)
# Per-model coordinate of a combined store: the vocabulary size, whose log bounds the entropy.
VOCAB_SIZE = "vocab_size"
# Depth is (l + 1) / L in float32 in the stores: coverage of a depth is decided within this.
DEPTH_TOLERANCE = 1e-6
DEFAULT_SEED = 0
COLUMNS = (
    "statistic",
    "scale",
    "family",
    "small",
    "large",
    "n_models",
    "n_other",
    "n_samples",
    "same",
    "nearest",
    "nearest_value",
    "gap",
    "gap_low",
    "gap_high",
)
# The table as a standard frame (entropy_lens.core.frames): a pair of models, so the row builder names it.
PAIR_READING = Reading(
    "gap",
    "gap_low",
    "gap_high",
    n="n_samples",
    sources="n_samples",
    measure="scale",
    model=None,
    fixed={SPLIT: "blank"},
)


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


def model_samples(ds: xr.Dataset, models: Sequence[str] | None = None) -> dict[str, ModelSamples]:
    """Per-sample profiles of each model of a combined blank store, on its own layers.

    Samples with a layer that has no valid token are left out (with a warning).
    """
    sources = prompt_sources(ds)
    out = {}
    for model in model_names(ds, models):
        rows, _ = source_profiles(model_profiles(ds, model), sources)
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


def _rms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[B]`` RMS difference of ``[B, G]`` rows."""
    return np.sqrt(np.mean((a - b) ** 2, axis=-1))


def family_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The family gap of one pair against ``others`` (see the module docstring).

    Args:
        means: Model -> ``[B, L_m]`` mean profiles (``B`` replicates, or one estimate).
        depths: Model -> ``[L_m]`` depths.
        grid: ``[G]`` common depth grid.
        pair: ``(small, large)``.
        others: Models of other families.

    Returns:
        ``same [B]`` (the pair's distance), ``[B, O]`` each other model's distance to the
        nearer of the pair, and ``[B, O]`` that distance minus ``same``; the gap is the
        minimum of the last over ``O``.
    """
    on_grid = {m: resample_depth(means[m], depths[m], grid) for m in (*pair, *others)}
    same = _rms(on_grid[pair[0]], on_grid[pair[1]])
    cross = [np.minimum(*(_rms(on_grid[m], on_grid[o]) for m in pair)) for o in others]
    values = np.stack(cross, axis=1) if cross else np.empty((same.size, 0))
    return same, values, values - same[:, None]


def resolution_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The resolution gap of one pair against ``others`` (see the module docstring; ``grid`` unused).

    Returns:
        ``same [B]`` (the larger model read at every depth of the smaller one:
        ``rmse_subsampled`` of :func:`~entropy_lens.analysis.families.size_pairs`), ``[B, O]``
        each ``r(small, o)`` on the depths ``o`` covers, and ``[B, O]`` ``r(small, o) -
        r(small, large)`` on those depths; the gap is the minimum of the last over ``O``.
    """
    small, large = pair
    at = depths[small]
    read_large = resample_depth(means[large], depths[large], at)
    same = rms_of(read_large - means[small])  # rmse_subsampled (families.subsampled_rmse), read once
    values, gaps = [], []
    for other in others:
        covered = at >= depths[other][0] - DEPTH_TOLERANCE
        mine = means[small][:, covered]
        values.append(_rms(resample_depth(means[other], depths[other], at[covered]), mine))
        gaps.append(values[-1] - _rms(read_large[:, covered], mine))
    if not others:
        return same, np.empty((same.size, 0)), np.empty((same.size, 0))
    return same, np.stack(values, axis=1), np.stack(gaps, axis=1)


def alignment_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The alignment gap of one pair (see the module docstring; ``grid`` and ``others`` unused).

    Returns:
        ``same [B]`` = ``r_norm`` (the deeper model read at the shallower one's depths),
        ``[B, 1]`` ``r_abs`` (the deeper model's first ``L_small`` layers, layer for layer)
        and ``[B, 1]`` ``r_abs - r_norm``.
    """
    coarse, fine = sorted(pair, key=lambda m: depths[m].size)
    r_norm = _rms(resample_depth(means[fine], depths[fine], depths[coarse]), means[coarse])
    r_abs = _rms(means[fine][:, : depths[coarse].size], means[coarse])
    return r_norm, r_abs[:, None], (r_abs - r_norm)[:, None]


STATISTIC_FUNCTIONS = {FAMILY_GAP: family_gap, RESOLUTION_GAP: resolution_gap, ALIGNMENT_GAP: alignment_gap}


def family_pairs(
    ds: xr.Dataset,
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    scales: Sequence[str] = SCALES,
    grid_points: int = DEFAULT_GRID_POINTS,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Family, resolution and alignment gaps of every same-family pair, with intervals over blank samples.

    Args:
        ds: Combined blank store (lazy is fine); ``normalized`` reads its ``vocab_size``
            coordinate on ``model``.
        pairs: ``(small, large)`` pairs (default:
            :func:`~entropy_lens.analysis.families.family_size_pairs` of the store).
        scales: Which of :data:`SCALES` to report (default: all).
        grid_points: Points of the common depth grid of ``family_gap``.
        n_boot: Bootstrap replicates.
        seed: Seed of the bootstrap.
        level: Coverage.

    Returns:
        :data:`COLUMNS`, one row per pair, statistic and scale: the pair's own value ``same``,
        the other-family model ``nearest`` to it (at the estimate) and its value
        ``nearest_value``, the ``gap`` with ``gap_low`` / ``gap_high``, ``n_other`` models of
        other families and ``n_samples`` (the fewest of any model compared).  Values in nats
        (``nats``, ``centred``) or fractions of ``log V`` (``normalized``).  NaN gaps when no
        model of another family has samples; no rows without a pair.  ``alignment_gap`` rows
        compare the pair alone: ``same`` is ``r_norm``, ``nearest_value`` is ``r_abs``,
        ``nearest`` is empty and ``n_other`` is 0.

    Raises:
        ValueError: on an unknown scale, or (``normalized``) a model without a vocabulary size.
    """
    scales = _check_scales(scales)
    pairs = family_size_pairs(layer_profiles(ds)) if pairs is None else list(pairs)
    samples = {m: s for m, s in model_samples(ds).items() if s.rows.shape[0] > 0}
    log_v = log_vocab(ds, list(samples)) if NORMALIZED in scales else {}
    depths = {m: s.depth for m, s in samples.items()}
    grid = depth_grid([d.size for d in depths.values()], grid_points) if depths else np.empty(0)
    inputs = _Inputs(samples, depths, grid, level)
    scaled = [scaled_means(samples, scale, log_v, n_boot=n_boot, seed=seed) for scale in scales]
    rows = []
    for pair in pairs:
        if not all(m in samples for m in pair):
            log.warning("pair %s has a model without valid blank samples and is left out", pair)
            continue
        others = [m for m, s in samples.items() if s.family != samples[pair[0]].family]
        rows += [_pair_row(name, pair, others, means, inputs) for name in STATISTICS for means in scaled]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _check_scales(scales: Sequence[str]) -> tuple[str, ...]:
    if isinstance(scales, str) or not scales or any(s not in SCALES for s in scales):
        raise ValueError(f"scales must be a non-empty sequence of {SCALES}, got {scales!r}")
    return tuple(dict.fromkeys(scales))


@dataclass(frozen=True)
class _Inputs:
    """What every row of one table shares: samples, ``[L_m]`` depths, the ``[G]`` grid, the level."""

    samples: Mapping[str, ModelSamples]
    depths: Mapping[str, np.ndarray]
    grid: np.ndarray
    level: float


def _pair_row(name: str, pair: tuple[str, str], others: Sequence[str], means: ScaledMeans, inputs: _Inputs) -> dict:
    statistic = STATISTIC_FUNCTIONS[name]
    compared = [] if name == ALIGNMENT_GAP else list(others)  # the alignment gap needs the pair alone
    same, values, gaps = statistic(means.estimate, inputs.depths, inputs.grid, pair, compared)
    row = {
        "statistic": name,
        "scale": means.scale,
        "family": inputs.samples[pair[0]].family,
        "small": pair[0],
        "large": pair[1],
        "n_models": len(inputs.samples),
        "n_other": len(compared),
        "n_samples": min(inputs.samples[m].rows.shape[0] for m in (*pair, *compared)),
        "same": float(same[0]),
        "nearest": "",
        **dict.fromkeys(("nearest_value", "gap", "gap_low", "gap_high"), math.nan),
    }
    if values.shape[1] == 0:
        return row
    draws = statistic(means.replicates, inputs.depths, inputs.grid, pair, compared)[2].min(axis=1)
    low, high = percentile_interval(draws, inputs.level)
    nearest = int(np.argmin(gaps[0]))
    row.update(
        nearest=compared[nearest] if compared else "",
        nearest_value=float(values[0, nearest]),
        gap=float(gaps[0, nearest]),
        gap_low=float(low),
        gap_high=float(high),
    )
    return row
