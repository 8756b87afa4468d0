"""Same-family pairs against other families: "family, not size" and "size as resolution".

On blank-prompt profiles, the same-family pairs ``(small, large)`` of a store
(:func:`family_size_pairs`); for each, on the models' mean profiles, the smaller model against the
larger one read at its depths (:func:`size_pairs`, the fingerprints' table), and the three gaps of
:mod:`~entropy_lens.analysis.families.gaps` on every scale of
:mod:`~entropy_lens.analysis.families.scales`, with intervals over blank samples (:func:`family_pairs`).

Intervals: each model's blank samples are generated independently of every other model's,
so a replicate resamples samples within each model on its own
(:func:`entropy_lens.core.intervals.bootstrap_group_means`).  A sample's profile is its mean
over valid tokens (:func:`entropy_lens.analysis.families.shapes.source_profiles`, each sample its
own source).  Verdicts: :func:`entropy_lens.verdicts.rules.family_not_size` and
:func:`~entropy_lens.verdicts.rules.size_resolution`.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS, depth_grid, resample_depth
from entropy_lens.analysis.families.gaps import (
    ALIGNMENT_GAP,
    FAMILY_GAP,
    RESOLUTION_GAP,
    STATISTICS,
    alignment_gap,
    family_gap,
    resolution_gap,
    rms_of,
    subsampled_error,
)
from entropy_lens.analysis.families.profiles import N_PARAMS, layer_profiles, real_profile
from entropy_lens.analysis.families.scales import (
    NORMALIZED,
    SCALES,
    ModelSamples,
    ScaledMeans,
    log_vocab,
    model_samples,
    scaled_means,
)
from entropy_lens.analysis.features import plain
from entropy_lens.core.frames import SPLIT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, percentile_interval
from entropy_lens.store import schema

log = logging.getLogger(__name__)

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


def family_size_pairs(profiles: xr.DataArray) -> list[tuple[str, str]]:
    """``(smaller, larger)`` model pairs of the same family with different layer counts.

    Size is ``n_params`` when present, else the layer count.
    """
    layers = np.asarray(profiles[schema.N_LAYERS].values)
    frame = pd.DataFrame(
        {
            "model": [str(m) for m in profiles[schema.MODEL].values],
            "family": plain(profiles[schema.FAMILY].values),
            "n_layers": layers,
            "size": np.asarray(profiles[N_PARAMS].values) if N_PARAMS in profiles.coords else layers,
        }
    ).sort_values(["size", "n_layers"], kind="stable")
    pairs = []
    for _, group in frame.groupby("family", sort=True):
        rows = list(group.itertuples(index=False))
        pairs += [(a.model, b.model) for a, b in itertools.combinations(rows, 2) if a.n_layers != b.n_layers]
    return pairs


def size_pairs(
    profiles: xr.DataArray,
    pairs: Sequence[tuple[str, str]] | None = None,
    *,
    grid_points: int = DEFAULT_GRID_POINTS,
) -> pd.DataFrame:
    """Smaller vs larger model of a family: "size looks like resolution".

    ``corr_depth`` is the Pearson correlation of the two profiles on a common depth
    grid; ``rmse_subsampled`` / ``mae_subsampled`` compare the smaller model's profile
    with the larger one read (linearly interpolated) at the smaller model's depths,
    which is exact subsampling when those depths are layer depths of the larger model.

    Args:
        profiles: ``(model, layer)`` from :func:`layer_profiles`.
        pairs: ``(smaller, larger)`` names (default: :func:`family_size_pairs`).
        grid_points: Grid size for ``corr_depth``.

    Returns:
        One row per pair: ``family, small, large, small_layers, large_layers, corr_depth,
        rmse_subsampled, mae_subsampled``.
    """
    pairs = family_size_pairs(profiles) if pairs is None else list(pairs)
    rows = []
    for small, large in pairs:
        (d_s, v_s), (d_l, v_l) = real_profile(profiles, small), real_profile(profiles, large)
        grid = depth_grid([d_s.size, d_l.size], grid_points)
        a, b = resample_depth(v_s, d_s, grid), resample_depth(v_l, d_l, grid)
        err = subsampled_error(v_s, d_s, v_l, d_l)
        rows.append(
            {
                "family": str(profiles[schema.FAMILY].sel({schema.MODEL: small}).values),
                "small": small,
                "large": large,
                "small_layers": d_s.size,
                "large_layers": d_l.size,
                "corr_depth": _pearson(a, b),
                "rmse_subsampled": float(rms_of(err)),
                "mae_subsampled": float(np.mean(np.abs(err))),
            }
        )
    columns = [
        "family",
        "small",
        "large",
        "small_layers",
        "large_layers",
        "corr_depth",
        "rmse_subsampled",
        "mae_subsampled",
    ]
    return pd.DataFrame(rows, columns=columns)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


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
            :func:`~entropy_lens.analysis.families.pairs.family_size_pairs` of the store).
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
