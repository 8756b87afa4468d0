"""Same-family pairs against other families: "family, not size" and "size as resolution".

On blank-prompt profiles, for each same-family pair ``(small, large)`` of
:func:`entropy_lens.analysis.families.family_size_pairs`, two statistics in nats:

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

Profiles stay in nats, not rescaled by their range: "after depth normalization" is the
x-axis (layer ``l`` of ``L`` at depth ``(l + 1) / L``), which is what lets models of
different depth be compared.  A profile's level (bounded by the log of the vocabulary,
which a family's sizes share) is part of the fingerprint the study clusters; dividing by
the range would drop it and inflate noise on flat profiles.

Intervals: each model's blank samples are generated independently of every other model's,
so a replicate resamples samples within each model on its own
(:func:`entropy_lens.core.intervals.bootstrap_group_means`).  A sample's profile is its mean
over valid tokens (:func:`entropy_lens.analysis.shapes.source_profiles`, each sample its
own source).  Verdicts: :func:`entropy_lens.analysis.verdicts.family_not_size` and
:func:`~entropy_lens.analysis.verdicts.size_resolution`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.families import family_size_pairs, layer_profiles
from entropy_lens.analysis.features import DEFAULT_GRID_POINTS, depth_grid, model_depth, model_names, model_profiles
from entropy_lens.analysis.shapes import prompt_sources, source_profiles
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, bootstrap_group_means, percentile_interval
from entropy_lens.store import schema

log = logging.getLogger(__name__)

FAMILY_GAP = "family_gap"
RESOLUTION_GAP = "resolution_gap"
STATISTICS = (FAMILY_GAP, RESOLUTION_GAP)
# Depth is (l + 1) / L in float32 in the stores: coverage of a depth is decided within this.
DEPTH_TOLERANCE = 1e-6
DEFAULT_SEED = 0
COLUMNS = (
    "statistic",
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


def _rms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[B]`` RMS difference of ``[B, G]`` rows."""
    return np.sqrt(np.mean((a - b) ** 2, axis=-1))


def _interp(values: np.ndarray, depth: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``[B, len(at)]`` rows of ``[B, L]`` ``values`` read at depths ``at`` (linear)."""
    weights = np.stack([np.interp(at, depth, row) for row in np.eye(depth.size)])  # [L, len(at)]
    return values @ weights


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
    on_grid = {m: _interp(means[m], depths[m], grid) for m in (*pair, *others)}
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
    read_large = _interp(means[large], depths[large], at)
    same = _rms(read_large, means[small])
    values, gaps = [], []
    for other in others:
        covered = at >= depths[other][0] - DEPTH_TOLERANCE
        mine = means[small][:, covered]
        values.append(_rms(_interp(means[other], depths[other], at[covered]), mine))
        gaps.append(values[-1] - _rms(read_large[:, covered], mine))
    if not others:
        return same, np.empty((same.size, 0)), np.empty((same.size, 0))
    return same, np.stack(values, axis=1), np.stack(gaps, axis=1)


STATISTIC_FUNCTIONS = {FAMILY_GAP: family_gap, RESOLUTION_GAP: resolution_gap}


def family_pairs(
    ds: xr.Dataset,
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    grid_points: int = DEFAULT_GRID_POINTS,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Family and resolution gaps of every same-family pair, with intervals over blank samples.

    Args:
        ds: Combined blank store (lazy is fine).
        pairs: ``(small, large)`` pairs (default:
            :func:`~entropy_lens.analysis.families.family_size_pairs` of the store).
        grid_points: Points of the common depth grid of ``family_gap``.
        n_boot: Bootstrap replicates.
        seed: Seed of the bootstrap.
        level: Coverage.

    Returns:
        :data:`COLUMNS`, one row per pair and statistic: the pair's own value ``same``, the
        other-family model ``nearest`` to it (at the estimate) and its value
        ``nearest_value``, the ``gap`` with ``gap_low`` / ``gap_high``, ``n_other`` models of
        other families and ``n_samples`` (the fewest of any model compared).  NaN gaps when
        no model of another family has samples; no rows without a pair.
    """
    pairs = family_size_pairs(layer_profiles(ds)) if pairs is None else list(pairs)
    samples = {m: s for m, s in model_samples(ds).items() if s.rows.shape[0] > 0}
    depths = {m: s.depth for m, s in samples.items()}
    grid = depth_grid([d.size for d in depths.values()], grid_points) if depths else np.empty(0)
    estimate = {m: s.rows.mean(axis=0, keepdims=True) for m, s in samples.items()}
    replicates = dict(
        zip(samples, bootstrap_group_means([s.rows for s in samples.values()], n_boot=n_boot, seed=seed), strict=True)
    )
    rows = []
    for pair in pairs:
        if not all(m in samples for m in pair):
            log.warning("pair %s has a model without valid blank samples and is left out", pair)
            continue
        others = [m for m, s in samples.items() if s.family != samples[pair[0]].family]
        for name in STATISTICS:
            rows.append(_pair_row(name, pair, others, samples, (estimate, replicates, depths, grid), level))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _pair_row(name: str, pair, others, samples: Mapping[str, ModelSamples], data, level: float) -> dict:
    estimate, replicates, depths, grid = data
    statistic = STATISTIC_FUNCTIONS[name]
    same, values, gaps = statistic(estimate, depths, grid, pair, others)
    row = {
        "statistic": name,
        "family": samples[pair[0]].family,
        "small": pair[0],
        "large": pair[1],
        "n_models": len(samples),
        "n_other": len(others),
        "n_samples": min(samples[m].rows.shape[0] for m in (*pair, *others)),
        "same": float(same[0]),
        "nearest": "",
        **dict.fromkeys(("nearest_value", "gap", "gap_low", "gap_high"), math.nan),
    }
    if not others:
        return row
    low, high = percentile_interval(statistic(replicates, depths, grid, pair, others)[2].min(axis=1), level)
    nearest = int(np.argmin(gaps[0]))
    row.update(
        nearest=others[nearest],
        nearest_value=float(values[0, nearest]),
        gap=float(gaps[0, nearest]),
        gap_low=float(low),
        gap_high=float(high),
    )
    return row
