"""Family shapes: how a model's mean entropy profile moves with normalized depth.

The study describes families by the shape of their profiles: GPT profiles start high and
sharpen; Llama profiles start low, plateau, then refine.  These are tested on each
model's mean profile against normalized depth ``d = (l + 1) / L`` with three statistics
(nats, except ``spread``):

* ``rise``: mean over the middle third of depth (``1/3 < d <= 2/3``) minus the mean over
  the first third (``d <= 1/3``): below 0 when the profile starts high, above 0 when it
  starts low;
* ``refine``: mean over the middle third minus the mean over the last third
  (``d > 2/3``): above 0 when the profile falls in the last third (sharpens, refines).  A third,
  not the last layer alone: the final block flattens or sharpens the model's own output
  distribution, and a single layer would let that one block decide;
* ``drift``: the change across the middle third, read off a least-squares line through
  its layers (slope x 1/3), as a share of the profile's range over all layers, in
  absolute value: small on a plateau (a straight line gives about 1/3).  A line fit, not
  the middle third's max - min, so that noise does not pass for a slope.

Each prompt's profile is first averaged over its valid tokens; prompts of one source
(story, question, topic; a blank sample is its own source) are averaged into one
profile, and the mean profile is the mean over sources.  Intervals resample sources,
the independent unit (:func:`entropy_lens.core.intervals.bootstrap_mean_statistic`).  The
verdicts are :func:`entropy_lens.verdicts.rules.family_shape`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.families.profiles import real_profile
from entropy_lens.analysis.features import model_depth, model_names, model_profiles, prompt_sources
from entropy_lens.core.frames import MEASURE, Reading
from entropy_lens.core.intervals import DEFAULT_N_BOOT, bootstrap_mean_statistic
from entropy_lens.store import schema

log = logging.getLogger(__name__)

STATISTICS = ("rise", "refine", "drift")
# Width of a third of normalized depth: the span over which the middle third's slope is read.
THIRD = 1 / 3
# Prompt coordinates naming a prompt's source, first found wins; otherwise each prompt is one.
# Depth is (l + 1) / L in float32 in the stores: a third boundary is matched within this.
DEPTH_TOLERANCE = 1e-6
DEFAULT_SEED = 0
COLUMNS = (
    "model",
    "family",
    "n_layers",
    "n_prompts",
    "n_sources",
    "third_layers",
    "start",
    "final",
    *(f"{s}{suffix}" for s in STATISTICS for suffix in ("", "_low", "_high")),
)
# The table as a standard frame (entropy_lens.core.frames): three statistics per row, so no single estimate.
SHAPE_READING = Reading(None, n="n_prompts", sources="n_sources", split="dataset", fixed={MEASURE: "shannon"})


def thirds(depth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks of the first (``d <= 1/3``), middle (``1/3 < d <= 2/3``) and last thirds of ``[L]`` depths."""
    depth = np.asarray(depth, dtype=np.float64)
    first = depth <= 1 / 3 + DEPTH_TOLERANCE
    middle = ~first & (depth <= 2 / 3 + DEPTH_TOLERANCE)
    return first, middle, ~first & ~middle


def shape_statistics(profiles: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """``rise``, ``refine`` and ``drift`` of mean profiles.

    Args:
        profiles: ``[B, L]`` mean profiles in nats on a model's real layers.
        depth: ``[L]`` normalized depths of those layers.

    Returns:
        ``[B, 3]`` in :data:`STATISTICS` order; NaN where the first or last third holds no
        layer or the middle third fewer than two, and ``drift`` NaN on a flat profile.
    """
    profiles = np.asarray(profiles, dtype=np.float64)
    first, middle, last = thirds(depth)
    if not first.any() or not last.any() or middle.sum() < 2:
        return np.full((profiles.shape[0], len(STATISTICS)), math.nan)
    mid = profiles[:, middle]
    rise = mid.mean(axis=1) - profiles[:, first].mean(axis=1)
    refine = mid.mean(axis=1) - profiles[:, last].mean(axis=1)
    x = np.asarray(depth, dtype=np.float64)[middle]
    x = x - x.mean()
    slope = (mid - mid.mean(axis=1, keepdims=True)) @ x / (x @ x)  # nats per unit depth
    whole = np.ptp(profiles, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        drift = np.where(whole > 0, np.abs(slope) * THIRD / whole, math.nan)
    return np.stack([rise, refine, drift], axis=1)


def source_profiles(profiles: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, int]:
    """One mean profile per source.

    Args:
        profiles: ``[P, T, L]`` profiles, NaN on masked slots.
        sources: ``[P]`` source of each prompt.

    Returns:
        ``([S, L], n_prompts)``: each prompt averaged over its valid tokens, then prompts
        averaged within their source; prompts with no valid token on some layer are left
        out, and ``n_prompts`` counts those kept.
    """
    counts = np.isfinite(profiles).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_prompt = np.where(counts > 0, np.nansum(profiles, axis=1) / counts, np.nan)  # [P, L]
    keep = np.isfinite(per_prompt).all(axis=1)
    if not keep.all():
        log.warning("%d of %d prompts have a layer with no valid token and are left out", (~keep).sum(), keep.size)
    frame = pd.DataFrame(per_prompt[keep]).groupby(np.asarray(sources)[keep], sort=True).mean()
    return frame.to_numpy().reshape(-1, profiles.shape[2]), int(keep.sum())


def profile_shapes(
    ds: xr.Dataset,
    *,
    models: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Shape statistics of each model's mean Shannon profile, with 95% intervals over sources.

    Args:
        ds: Combined dataset (lazy is fine; one model is loaded at a time).
        models: Models to include (default: all).
        n_boot: Bootstrap replicates.
        seed: Seed of the bootstrap.

    Returns:
        One row per model with :data:`COLUMNS`: ``n_prompts`` and ``n_sources`` used,
        ``third_layers`` (layers in the smaller of the first and middle thirds),
        ``start`` and ``final`` (mean profile at the first and last layer, nats), and each
        statistic with ``_low`` / ``_high``.
    """
    sources = prompt_sources(ds)
    rows = []
    for model in model_names(ds, models):
        profiles = model_profiles(ds, model)
        depth = model_depth(ds, model)
        per_source, n_prompts = source_profiles(profiles, sources)
        mean = per_source.mean(axis=0) if per_source.size else np.full(depth.size, math.nan)
        estimate = shape_statistics(mean[None], depth)[0]
        low, high = bootstrap_mean_statistic(
            per_source, lambda m, d=depth: shape_statistics(m, d), n_boot=n_boot, seed=seed
        )
        first, middle, _ = thirds(depth)
        family = str(ds[schema.FAMILY].sel({schema.MODEL: model}).values) if schema.FAMILY in ds.coords else ""
        row = {
            "model": model,
            "family": family,
            "n_layers": depth.size,
            "n_prompts": n_prompts,
            "n_sources": per_source.shape[0],
            "third_layers": int(min(first.sum(), middle.sum())),
            "start": float(mean[0]),
            "final": float(mean[-1]),
        }
        for i, name in enumerate(STATISTICS):
            row.update({name: float(estimate[i]), f"{name}_low": float(low[i]), f"{name}_high": float(high[i])})
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def shape_descriptors(profiles: xr.DataArray) -> pd.DataFrame:
    """Per-model profile shape: start and final level, peak, largest rise and fall.

    Rise/fall at layer ``l`` is ``H_l - H_{l-1}``; its depth is layer ``l``'s.

    Args:
        profiles: ``(model, layer)`` from :func:`~entropy_lens.analysis.families.profiles.layer_profiles`.

    Returns:
        One row per model: ``model, family, n_layers, start, final, peak, peak_depth,
        max_rise, max_rise_depth, max_fall, max_fall_depth`` (levels in nats).
    """
    rows = []
    for model in profiles[schema.MODEL].values:
        depth, values = real_profile(profiles, str(model))
        steps = np.diff(values)
        rows.append(
            {
                "model": str(model),
                "family": str(profiles[schema.FAMILY].sel({schema.MODEL: model}).values),
                "n_layers": depth.size,
                "start": values[0],
                "final": values[-1],
                "peak": float(np.max(values)),
                "peak_depth": depth[int(np.argmax(values))],
                "max_rise": float(steps.max()),
                "max_rise_depth": depth[1 + int(np.argmax(steps))],
                "max_fall": float(steps.min()),
                "max_fall_depth": depth[1 + int(np.argmin(steps))],
            }
        )
    return pd.DataFrame(rows)
