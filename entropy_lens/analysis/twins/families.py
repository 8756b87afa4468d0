"""The family claims on the twin: profile shapes, and the gaps of same-family pairs.

* **Shapes** (:mod:`~entropy_lens.analysis.families.shapes`): ``rise``, ``refine`` and ``drift`` of each model's
  mean profile over normalized depth, on the trained model and on its twin, each prompt averaged over its valid
  tokens and prompts averaged within their source; trained - twin is bootstrapped over the sources both hold,
  drawn together (on the blank set each sample is a source: trained sample ``i`` beside twin sample ``i``).
* **Family, not size, and size as resolution** (:mod:`~entropy_lens.analysis.families.gaps`): each same-family
  pair's family, resolution and alignment gaps on every scale, computed on the twins' blank store exactly as on
  the trained one (:func:`~entropy_lens.analysis.families.pairs.family_pairs`: the same pairs, others, grid and
  seed, so with equal sample counts each replicate resamples the same sample indices on both sides), and the
  difference of the two gaps per replicate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS, depth_grid
from entropy_lens.analysis.families.pairs import ALIGNMENT_GAP, STATISTIC_FUNCTIONS, family_size_pairs
from entropy_lens.analysis.families.profiles import layer_profiles
from entropy_lens.analysis.families.scales import NORMALIZED, SCALES, log_vocab, model_samples, scaled_means
from entropy_lens.analysis.families.shapes import STATISTICS, shape_statistics
from entropy_lens.analysis.features import model_depth, model_profiles
from entropy_lens.analysis.twins.contract import (
    FAMILY_PAIR,
    SHAPE,
    empty_row,
    null_columns,
    paired_interval,
    paired_source_bootstrap,
    prompt_sources,
    shared_prompts,
)
from entropy_lens.core.intervals import DEFAULT_N_BOOT
from entropy_lens.store import schema

SHAPE_UNIT = "sources (paired bootstrap)"
PAIR_UNIT = "blank samples within each model (bootstrap)"


def shape_rows(
    trained: Mapping[str, xr.Dataset],
    twins: Mapping[str, xr.Dataset],
    name: str,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Twin rows of ``rise``, ``refine`` and ``drift``, per dataset and model both hold (one draw of sources
    per model and dataset serves the three)."""
    rows = []
    for dataset in [d for d in trained if d in twins]:
        ds, twin = trained[dataset], twins[dataset]
        prompts = shared_prompts(ds, twin)
        sources = prompt_sources(ds, prompts)
        held = {str(m) for m in twin.indexes[schema.MODEL]}
        for model in [str(m) for m in ds.indexes[schema.MODEL] if str(m) in held]:
            sides = [_source_means(store, model, prompts, sources) for store in (ds, twin)]
            shared = sides[0].index.intersection(sides[1].index)
            per_source = [side.loc[shared].to_numpy() for side in sides]
            depth = model_depth(ds, model)
            base = {"reading": SHAPE, "dataset": dataset, "model": model, "unit": SHAPE_UNIT}
            base |= {"n": int(shared.size), "n_sources": int(shared.size)}
            rows += [{**base, **_shape_row(i, per_source, depth, name, n_boot, seed)} for i in range(len(STATISTICS))]
    return rows


def _source_means(ds: xr.Dataset, model: str, prompts: np.ndarray, sources: np.ndarray) -> pd.DataFrame:
    """``[S, L]`` each source's mean profile (prompts averaged over valid tokens, then within their source),
    indexed by source; prompts with a layer that has no valid token left out."""
    profiles = model_profiles(ds, model, prompts=list(prompts))  # [P, T, L]
    counts = np.isfinite(profiles).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_prompt = np.where(counts > 0, np.nansum(profiles, axis=1) / counts, np.nan)  # [P, L]
    keep = np.isfinite(per_prompt).all(axis=1)
    return pd.DataFrame(per_prompt[keep]).groupby(sources[keep], sort=True).mean()


def _shape_row(
    index: int, per_source: Sequence[np.ndarray], depth: np.ndarray, name: str, n_boot: int, seed: int
) -> dict[str, Any]:
    statistic = STATISTICS[index]
    trained, twin = per_source
    if trained.shape[0] < 2:
        return empty_row({"statistic": statistic}, name, "fewer than two sources held by both: no interval")

    def read(means: np.ndarray) -> np.ndarray:
        return shape_statistics(means, depth)[:, index]

    est_t, est_w = (float(read(side.mean(axis=0, keepdims=True))[0]) for side in (trained, twin))
    (lo, hi), twin_ci, beyond_ci = paired_source_bootstrap(read, trained, twin, n_boot=n_boot, seed=seed)
    row = {"statistic": statistic, "estimate": est_t, "ci_low": lo, "ci_high": hi, "note": ""}
    return {**row, **null_columns(name, (est_w, *twin_ci), (est_t - est_w, *beyond_ci))}


def family_pair_rows(
    trained: xr.Dataset,
    twin: xr.Dataset,
    name: str,
    *,
    scales: Sequence[str] = SCALES,
    grid_points: int = DEFAULT_GRID_POINTS,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Twin rows of every same-family pair's gaps on every scale (none without a pair).

    Args:
        trained: The trained models' combined blank store.
        twin: The twins' combined blank store (the same models).
        name: The twin's name.
        scales: Scales of :data:`~entropy_lens.analysis.families.scales.SCALES` to read.
        grid_points: Points of the common depth grid.
        n_boot: Replicates.
        seed: Seed of the draws (the same on both sides).
    """
    pairs = family_size_pairs(layer_profiles(trained))
    held = {str(m) for m in twin.indexes[schema.MODEL]}
    models = [str(m) for m in trained.indexes[schema.MODEL] if str(m) in held]
    samples = [{m: s for m, s in model_samples(ds, models).items() if s.rows.shape[0]} for ds in (trained, twin)]
    usable = [m for m in models if m in samples[0] and m in samples[1]]
    depths = {m: samples[0][m].depth for m in usable}
    grid = depth_grid([d.size for d in depths.values()], grid_points) if depths else np.empty(0)
    log_v = log_vocab(trained, usable) if NORMALIZED in scales else {}
    rows = []
    for scale in scales:
        means = [scaled_means({m: side[m] for m in usable}, scale, log_v, n_boot=n_boot, seed=seed) for side in samples]
        for pair in pairs:
            base = {"reading": FAMILY_PAIR, "dataset": "blank", "model": f"{pair[0]}, {pair[1]}", "scale": scale}
            base |= {"unit": PAIR_UNIT, "target": samples[0][pair[0]].family if pair[0] in usable else ""}
            if not all(m in usable for m in pair):
                rows += [
                    empty_row({**base, "statistic": s}, name, "a model of the pair has no blank sample")
                    for s in STATISTIC_FUNCTIONS
                ]
                continue
            others = [m for m in usable if samples[0][m].family != samples[0][pair[0]].family]
            n = min(side[m].rows.shape[0] for side in samples for m in pair)
            rows += [
                {**base, "n": n, "n_sources": n, **_gap_row(s, pair, others, means, depths, grid, name)}
                for s in STATISTIC_FUNCTIONS
            ]
    return rows


def _gap_row(statistic, pair, others, means, depths, grid, name) -> dict[str, Any]:
    compared = [] if statistic == ALIGNMENT_GAP else list(others)
    if not compared and statistic != ALIGNMENT_GAP:
        return empty_row({"statistic": statistic}, name, "no model of another family: no gap")
    function = STATISTIC_FUNCTIONS[statistic]
    gaps = [function(side.estimate, depths, grid, pair, compared)[2].min(axis=1)[0] for side in means]
    draws = [function(side.replicates, depths, grid, pair, compared)[2].min(axis=1) for side in means]
    (lo, hi), twin_ci, beyond_ci = paired_interval(*draws)
    row = {"statistic": statistic, "estimate": float(gaps[0]), "ci_low": lo, "ci_high": hi}
    diff = float(gaps[0] - gaps[1]) if all(map(math.isfinite, gaps)) else math.nan
    return {**row, **null_columns(name, (gaps[1], *twin_ci), (diff, *beyond_ci)), "note": ""}
