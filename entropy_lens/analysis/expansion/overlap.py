"""Adjacent-layer overlap of the top-p nuclei: Jaccard and containment, overall and per layer.

Adjacent-layer nucleus overlap of the top-p sets of layers ``l`` and ``l+1`` is summarized
per model, overall and per layer, by two statistics: the store's Jaccard
``|A & B| / |A | B|`` and the containment (overlap coefficient) ``|A & B| / min(|A|, |B|)``,
derived exactly from the Jaccard and the two sizes.  "The shortlist grows and shrinks" is a
containment claim: a nucleus that doubles and keeps every old token has Jaccard 0.5 but
containment 1.  Masked token slots (NaN / -1) and padded layers never enter.

Intervals.  The (token, layer) cells of one prompt are not independent, and neither are the prompts of
one source (:func:`~entropy_lens.analysis.features.prompt_sources`), so an overlap mean's interval is a
source-cluster bootstrap of the mean (:mod:`entropy_lens.core.intervals`).

Nulls.  Every statistic sits beside its cross-prompt null (layer ``l`` of a prompt against layer
``l + 1`` of its partner, :mod:`~entropy_lens.analysis.expansion.nulls`), on the same cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.expansion import nulls
from entropy_lens.analysis.features import model_depth, model_info, model_names, model_values, prompt_sources
from entropy_lens.core.frames import Reading
from entropy_lens.core.intervals import DEFAULT_N_BOOT, cluster_bootstrap_mean, cluster_sums, percentile_interval
from entropy_lens.store import schema

DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
DEFAULT_SEED = 0
JACCARD, CONTAINMENT, CONTAINMENT_SIZE_CHANGES = nulls.JACCARD, nulls.CONTAINMENT, nulls.CONTAINMENT_SIZE_CHANGES
CONTAINMENT_TOLERANCE = nulls.CONTAINMENT_TOLERANCE


def containment_from_jaccard(jaccard: np.ndarray, nucleus: np.ndarray) -> np.ndarray:
    """Containment of the top-p sets of adjacent layers, derived from their Jaccard and sizes.

    With ``J = |A & B| / |A | B|`` and sizes ``a, b``: ``|A & B| = J (a + b) / (1 + J)``,
    so the overlap coefficient ``|A & B| / min(a, b)`` follows exactly (to float precision).
    Float excess over 1 is clipped; an excess beyond :data:`CONTAINMENT_TOLERANCE` means the
    Jaccard and the sizes cannot come from one pair of sets and is logged as a warning.

    Args:
        jaccard: ``[P, T, L]`` Jaccard of the top-p sets of layers ``l`` and ``l+1`` at index
            ``l`` (the store's ``nucleus_jaccard``; NaN where masked and at the last layer).
        nucleus: ``[P, T, L]`` top-p set sizes in tokens (the store's ``nucleus_size``;
            zero or negative where masked).

    Returns:
        ``[P, T, L]`` float64 containment in ``[0, 1]`` of the sets of layers ``l`` and ``l+1``
        at index ``l``; NaN where the Jaccard is NaN, either size is masked, and at the last
        layer (no pair).
    """
    if jaccard.shape != nucleus.shape or jaccard.ndim != 3:
        raise ValueError(f"jaccard and nucleus must share a [P, T, L] shape; got {jaccard.shape}, {nucleus.shape}")
    j = jaccard[..., :-1].astype(np.float64)
    if np.any((j < 0) | (j > 1)):
        raise ValueError(f"jaccard must lie in [0, 1]; got values from {np.nanmin(j)} to {np.nanmax(j)}")
    size = nulls.sizes(nucleus)
    out = np.full(jaccard.shape, np.nan)
    out[..., :-1] = nulls.pair_containment(j, size[..., :-1], size[..., 1:])  # [P, T, L-1]
    return out


def _overlap_cells(ds: xr.Dataset, model: str) -> dict[str, np.ndarray]:
    """``[P, T, L_m]`` float64 Jaccard and containment of each adjacent-layer pair of ``model``."""
    jaccard = model_values(ds, model, schema.NUCLEUS_JACCARD).astype(np.float64)
    nucleus = model_values(ds, model, schema.NUCLEUS_SIZE)
    return {JACCARD: jaccard, CONTAINMENT: containment_from_jaccard(jaccard, nucleus)}


def quantile_column(q: float) -> str:
    """Column name of quantile ``q``: ``0.05 -> "q05"``, ``0.5 -> "q50"``."""
    return f"q{round(q * 100):02d}"


OVERLAP_COLUMNS = (
    "model",
    "statistic",
    "family",
    "n_layers",
    "n",
    "n_prompts",
    "n_sources",
    "mean",
    "ci_low",
    "ci_high",
    "std",
    "both_singleton_share",
    *nulls.NULL_COLUMNS,
)
# The table as a standard frame (entropy_lens.core.frames).
OVERLAP_READING = Reading("mean", sources="n_sources", split="dataset", measure="statistic")


def _summary(
    cells: np.ndarray, sources: np.ndarray, quantiles: Sequence[float], n_boot: int, seed: int
) -> dict[str, float]:
    """Count, mean with its source-cluster interval, std and quantiles of the finite ``[P, T, L]`` cells;
    ``sources`` is the ``[P]`` source code of each prompt."""
    finite = np.isfinite(cells)
    values = cells[finite]
    prompts = np.broadcast_to(np.arange(cells.shape[0])[:, None, None], cells.shape)[finite]
    clusters = sources[prompts]
    row = {"n": int(values.size), "n_prompts": int(np.unique(prompts).size), "n_sources": int(np.unique(clusters).size)}
    row["mean"] = float(values.mean()) if values.size else np.nan
    interval = cluster_bootstrap_mean(values, clusters, n_boot=n_boot, seed=seed) if values.size else (np.nan, np.nan)
    row["ci_low"], row["ci_high"] = interval
    row["std"] = float(values.std(ddof=1)) if values.size > 1 else np.nan
    qs = np.quantile(values, quantiles) if values.size else np.full(len(quantiles), np.nan)
    row.update({quantile_column(q): float(v) for q, v in zip(quantiles, qs, strict=True)})
    return row


def nucleus_overlap(
    ds: xr.Dataset,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    models: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Adjacent-layer nucleus overlap per model and statistic: mean, std and quantiles over valid cells.

    Each statistic is summarized over its own valid cells: the Jaccard wherever the store
    holds one, the containment where both sizes are valid too (the same cells in a store
    written by the lens), ``containment_size_changes`` the containment where the two sets
    differ in size (what "the shortlist grows and shrinks" is about: where both sets hold one
    token, containment only asks whether the top token stayed).  Beside each, its cross-prompt
    null (:mod:`~entropy_lens.analysis.expansion.nulls`: layer ``l`` of a prompt against layer
    ``l + 1`` of its batch partner, from the store's ``nucleus_jaccard_cross``), observed and null
    on the cells valid for both; NaN for a store extracted without it.

    Args:
        ds: Combined dataset (lazy is fine; one model is loaded at a time).
        quantiles: Quantiles to report, each in ``[0, 1]``.
        models: Models to include (default: all).
        n_boot: Bootstrap replicates of the source-cluster interval.
        seed: Seed of the bootstrap (the same source draws for both statistics).

    Returns:
        Long form, three rows per model (``statistic`` ``jaccard``, ``containment``,
        ``containment_size_changes``): ``model, statistic, family, n_layers, n`` (valid cells),
        ``n_prompts, n_sources, mean, ci_low, ci_high`` (95%, resampling sources), ``std``,
        ``both_singleton_share`` (share of the row's cells where both sets hold one token), the
        null's columns (:data:`~entropy_lens.analysis.expansion.nulls.NULL_COLUMNS`) and one
        ``qNN`` column per quantile.
    """
    if any(not 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must lie in [0, 1], got {list(quantiles)!r}")
    rows = []
    sources = nulls.source_codes(prompt_sources(ds), ds.sizes[schema.PROMPT])
    for model in model_names(ds, models):
        cells, nulls_of = _overlap_cells(ds, model), nulls.overlap_nulls(ds, model, n_boot=n_boot, seed=seed)
        nucleus = model_values(ds, model, schema.NUCLEUS_SIZE)
        size = nulls.sizes(nucleus)
        changes = np.full(size.shape, False)
        changes[..., :-1] = size[..., :-1] != size[..., 1:]
        cells[CONTAINMENT_SIZE_CHANGES] = np.where(changes, cells[CONTAINMENT], np.nan)
        share = nulls.both_singleton_share(nucleus)
        shares = {JACCARD: share, CONTAINMENT: share, CONTAINMENT_SIZE_CHANGES: 0.0}
        rows += [
            {
                **model_info(ds, model),
                "statistic": name,
                **_summary(values, sources, quantiles, n_boot, seed),
                "both_singleton_share": shares[name],
                **nulls_of[name],
            }
            for name, values in cells.items()
        ]
    return pd.DataFrame(rows, columns=[*OVERLAP_COLUMNS, *(quantile_column(q) for q in quantiles)])


DEPTH_COLUMNS = ("model", "statistic", "layer", "depth", "mean", "ci_low", "ci_high", "n", "n_prompts")


def _depth_frame(cells: np.ndarray, depth: np.ndarray, sources: np.ndarray, n_boot: int, seed: int) -> pd.DataFrame:
    """Per-layer mean of the finite ``[P, T, L]`` cells with a 95% source-cluster bootstrap interval.

    One draw of sources (``[P]`` the source code of each prompt) serves every layer: per-prompt sums and
    counts ``[P, L]`` are summed over the drawn sources' prompts
    (:func:`~entropy_lens.core.intervals.cluster_sums`), and each layer's replicate mean is their ratio.
    Layers without a valid cell are left out.
    """
    finite = np.isfinite(cells)
    counts = finite.sum(axis=1).astype(np.float64)  # [P, L]
    sums = np.where(finite, cells, 0.0).sum(axis=1)  # [P, L]
    n = counts.sum(axis=0)
    used = counts.sum(axis=1) > 0  # prompts with a valid cell at some layer
    draws = cluster_sums([*counts[used].T, *sums[used].T], sources[used], n_boot=n_boot, seed=seed)
    low, high = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
    if draws is not None:
        n_draw, sum_draw = np.split(draws, 2)  # [L, B] each
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high = percentile_interval((sum_draw / n_draw).T)
    keep = n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=0) / n
    frame = {"layer": np.arange(n.size), "depth": depth, "mean": mean, "ci_low": low, "ci_high": high}
    frame |= {"n": n.astype(np.int64), "n_prompts": (counts > 0).sum(axis=0)}
    return pd.DataFrame(frame)[keep].reset_index(drop=True)


def overlap_by_depth(
    ds: xr.Dataset,
    *,
    models: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Mean adjacent-layer Jaccard and containment at each layer (overlap of layers ``l`` and ``l+1``).

    Args:
        ds: Combined dataset (lazy is fine; one model is loaded at a time).
        models: Models to include (default: all).
        n_boot: Bootstrap replicates of the source-cluster interval.
        seed: Seed of the bootstrap.

    Returns:
        ``model, statistic`` (``jaccard``, ``containment``), ``layer, depth`` (normalized
        depth of layer ``l``), ``mean, ci_low, ci_high`` (95%, resampling sources), ``n``
        (valid cells) and ``n_prompts``; the last layer, which has no successor, is left out.
    """
    sources = nulls.source_codes(prompt_sources(ds), ds.sizes[schema.PROMPT])
    frames = [
        _depth_frame(cells, model_depth(ds, model), sources, n_boot, seed).assign(model=model, statistic=name)
        for model in model_names(ds, models)
        for name, cells in _overlap_cells(ds, model).items()
    ]
    return pd.concat(frames, ignore_index=True)[list(DEPTH_COLUMNS)] if frames else pd.DataFrame(columns=DEPTH_COLUMNS)
