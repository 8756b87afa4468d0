"""The expansion claims on the twin: the Spearman of Delta H with the nucleus change, and adjacent-layer overlap.

Both statistics are read on the trained model and on its twin over the prompts both stores hold, and
trained - twin is bootstrapped by drawing whole sources (stories, topics; on the blank set each sample) with
replacement, the same draw for both sides (:func:`~entropy_lens.analysis.twins.contract.paired_source_draws`):

* **Spearman**: as :func:`~entropy_lens.analysis.expansion.spearman.expansion_spearman`, the Pearson correlation
  of each side's full-sample ranks of ``Delta H`` and ``Delta N`` over every valid (prompt, token, layer pair) cell,
  each replicate the correlation of the drawn sources' cells;
* **overlap**: as :func:`~entropy_lens.analysis.expansion.overlap.nucleus_overlap`, the mean over valid cells of
  the containment of adjacent layers' top-p sets (the claim's statistic; also over the cells whose nucleus size
  changes) and of their Jaccard (the original rule), each replicate the ratio of the drawn sources' sums and
  counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats

from entropy_lens.analysis.expansion.overlap import (
    CONTAINMENT,
    CONTAINMENT_SIZE_CHANGES,
    JACCARD,
    containment_from_jaccard,
)
from entropy_lens.analysis.expansion.spearman import layer_deltas
from entropy_lens.analysis.features import model_values
from entropy_lens.analysis.twins.contract import (
    OVERLAP,
    SPEARMAN,
    empty_row,
    null_columns,
    paired_interval,
    paired_source_draws,
    prompt_sources,
    shared_prompts,
)
from entropy_lens.core.intervals import DEFAULT_N_BOOT
from entropy_lens.store import schema

UNIT = "sources (paired cluster bootstrap)"
OVERLAP_STATISTICS = (CONTAINMENT, CONTAINMENT_SIZE_CHANGES, JACCARD)


def expansion_rows(
    trained: Mapping[str, xr.Dataset],
    twins: Mapping[str, xr.Dataset],
    name: str,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Twin rows of the Spearman and the overlap statistics, per dataset both hold and model both hold.

    Args:
        trained: Combined stores of the trained models, by dataset.
        twins: Combined stores of the twins, by dataset.
        name: The twin's name (the rows' ``null_name``).
        n_boot: Bootstrap replicates.
        seed: Seed of the draws (one draw of sources per model and dataset serves every statistic).
    """
    rows = []
    for dataset in [d for d in trained if d in twins]:
        ds, twin = trained[dataset], twins[dataset]
        prompts = shared_prompts(ds, twin)
        sources = prompt_sources(ds, prompts)
        held = {str(m) for m in twin.indexes[schema.MODEL]}
        for model in [str(m) for m in ds.indexes[schema.MODEL] if str(m) in held]:
            cells = [_cells(store, model, prompts) for store in (ds, twin)]
            base = {"dataset": dataset, "model": model, "unit": UNIT, "n_sources": int(np.unique(sources).size)}
            rows.append({**base, **spearman_pair(*cells, sources, name, n_boot=n_boot, seed=seed)})
            rows += [{**base, **row} for row in overlap_pair(*cells, sources, name, n_boot=n_boot, seed=seed)]
    return rows


def _cells(ds: xr.Dataset, model: str, prompts: np.ndarray) -> dict[str, np.ndarray]:
    """``[P, T, L]`` entropy, nucleus size and Jaccard of ``model``'s ``prompts``, in that order."""
    ds = ds.sel({schema.PROMPT: list(prompts)})
    return {
        "entropy": model_values(ds, model, schema.ENTROPY).astype(np.float64),
        "nucleus": model_values(ds, model, schema.NUCLEUS_SIZE),
        "jaccard": model_values(ds, model, schema.NUCLEUS_JACCARD).astype(np.float64),
    }


def spearman_pair(
    trained: Mapping[str, np.ndarray],
    twin: Mapping[str, np.ndarray],
    sources: np.ndarray,
    name: str,
    *,
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """The Spearman of ``Delta H`` with ``Delta N`` on both sides, and trained - twin, sources drawn together.

    Args:
        trained, twin: Each side's ``[P, T, L]`` ``entropy`` and ``nucleus`` (the same prompts in order).
        sources: ``[P]`` source of each prompt.
        name: The twin's name.
        n_boot: Replicates.
        seed: Seed of the draws.
    """
    base = {"reading": SPEARMAN, "statistic": "spearman"}
    sums, estimates, n = [], [], 0
    for side in (trained, twin):
        d_h, d_n, _, prompt = layer_deltas(side["entropy"], side["nucleus"])
        if d_h.size < 3 or np.ptp(d_h) == 0 or np.ptp(d_n) == 0:
            return empty_row(base, name, "too few cells, or a constant change, for a rank correlation")
        x, y = stats.rankdata(d_h), stats.rankdata(d_n)
        x, y = x - x.mean(), y - y.mean()
        estimates.append(_pearson(*(np.array([v.sum()]) for v in (np.ones_like(x), x, y, x * x, y * y, x * y))))
        weights = (np.ones_like(x), x, y, x * x, y * y, x * y)
        sums += [np.bincount(prompt, w, minlength=sources.size) for w in weights]  # per prompt
        n = n or int(d_h.size)
    draws = paired_source_draws(np.stack(sums), sources, n_boot=n_boot, seed=seed)
    if draws is None:
        return empty_row(base, name, "fewer than two sources: no interval")
    side_t, side_w = _pearson(*draws[:6]), _pearson(*draws[6:])
    (lo, hi), twin_ci, beyond_ci = paired_interval(side_t, side_w)
    row = {**base, "n": n, "estimate": estimates[0][0], "ci_low": lo, "ci_high": hi}
    twin_stat, diff = (estimates[1][0], *twin_ci), (estimates[0][0] - estimates[1][0], *beyond_ci)
    return {**row, **null_columns(name, twin_stat, diff), "note": "ranks of the full sample, per side"}


def _pearson(n, sx, sy, sxx, syy, sxy) -> np.ndarray:
    """Pearson correlation from sums (a rank correlation when ``x``, ``y`` are ranks)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sxy - sx * sy / n) / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n))


def overlap_pair(
    trained: Mapping[str, np.ndarray],
    twin: Mapping[str, np.ndarray],
    sources: np.ndarray,
    name: str,
    *,
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Mean containment (over every valid cell, and over those whose nucleus size changes) and Jaccard of adjacent
    top-p sets on both sides, and trained - twin (sources drawn together); one row per statistic of
    :data:`OVERLAP_STATISTICS`."""
    per_side = []
    for side in (trained, twin):
        jaccard, nucleus = side["jaccard"], side["nucleus"]
        contained = containment_from_jaccard(jaccard, nucleus)
        changes = np.zeros(nucleus.shape, dtype=bool)
        changes[..., :-1] = nucleus[..., :-1] != nucleus[..., 1:]
        cells = {
            CONTAINMENT: contained,
            CONTAINMENT_SIZE_CHANGES: np.where(changes, contained, np.nan),
            JACCARD: jaccard,
        }
        per_side.append({k: (np.isfinite(v).sum(axis=(1, 2)), np.nansum(v, axis=(1, 2))) for k, v in cells.items()})
    weights = np.stack([w for side in per_side for k in OVERLAP_STATISTICS for w in side[k]]).astype(np.float64)
    draws = paired_source_draws(weights, sources, n_boot=n_boot, seed=seed)
    rows = []
    for i, statistic in enumerate(OVERLAP_STATISTICS):
        base = {"reading": OVERLAP, "statistic": statistic}
        (c_t, s_t), (c_w, s_w) = per_side[0][statistic], per_side[1][statistic]
        if draws is None or c_t.sum() == 0 or c_w.sum() == 0:
            rows.append(empty_row(base, name, "no valid cell, or fewer than two sources"))
            continue
        k = len(OVERLAP_STATISTICS) * 2
        with np.errstate(invalid="ignore", divide="ignore"):
            side_t, side_w = draws[2 * i + 1] / draws[2 * i], draws[k + 2 * i + 1] / draws[k + 2 * i]
        (lo, hi), twin_ci, beyond_ci = paired_interval(side_t, side_w)
        est_t, est_w = s_t.sum() / c_t.sum(), s_w.sum() / c_w.sum()
        row = {**base, "n": int(c_t.sum()), "estimate": est_t, "ci_low": lo, "ci_high": hi}
        rows.append({**row, **null_columns(name, (est_w, *twin_ci), (est_t - est_w, *beyond_ci)), "note": ""})
    return rows
