"""Expansion and pruning: how entropy changes track the top-p nucleus across layers.

``Delta H_l = H_l - H_{l-1}`` is compared with the change of the top-p nucleus size
``Delta N_l = N_l - N_{l-1}`` (or of ``log N`` with ``log_nucleus=True``) for every
adjacent pair of real layers, every valid generated token and every prompt: one
Spearman correlation per model with its sample size.  Positive correlation means that
layers that raise entropy widen the candidate set (expansion) and layers that lower it
narrow the set (pruning).  Adjacent-layer nucleus overlap (the store's Jaccard of the
top-p sets of layers ``l`` and ``l+1``) is summarized per model by its mean and
quantiles.  Masked token slots (NaN / -1) and padded layers never enter.

Intervals.  The (token, layer) rows of one prompt are not independent, so every interval
resamples prompts, not rows (:mod:`entropy_lens.core.intervals`): the Spearman interval is a
prompt-cluster bootstrap of the correlation of the full sample's ranks, and the Jaccard
mean's interval a prompt-cluster bootstrap of the mean.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from entropy_lens.analysis.features import metric_array, model_depth, model_n_layers, model_names, model_values
from entropy_lens.core.intervals import DEFAULT_N_BOOT, cluster_bootstrap_correlation, cluster_bootstrap_mean
from entropy_lens.store import schema

log = logging.getLogger(__name__)

# The study's Spearman correlations of Delta H against the nucleus-size change.
STUDY_SPEARMAN: dict[str, float] = {
    "Llama-3.2-1B": 0.8250,
    "Llama-3.2-3B": 0.7365,
    "Gemma-2-2B": 0.8804,
    "Gemma-2-9B": 0.8540,
}
DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
DEFAULT_MAX_POINTS = 20_000
DEFAULT_SEED = 0
MIN_SPEARMAN_N = 3


def layer_deltas(
    entropy: np.ndarray, nucleus: np.ndarray, *, log_nucleus: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Adjacent-layer changes of entropy and nucleus size over valid cells.

    Args:
        entropy: ``[P, T, L]`` entropy in nats (NaN where masked).
        nucleus: ``[P, T, L]`` nucleus sizes (negative where masked).
        log_nucleus: Compare with the change of ``log N`` instead of ``N``.

    Returns:
        ``(delta_h, delta_n, layer, prompt)``: ``[n]`` arrays, ``layer`` being the upper
        layer ``l`` of each pair ``(l-1, l)`` and ``prompt`` the row's prompt index.
    """
    if entropy.shape != nucleus.shape or entropy.ndim != 3:
        raise ValueError(f"entropy and nucleus must share a [P, T, L] shape; got {entropy.shape}, {nucleus.shape}")
    size = np.where(nucleus > 0, nucleus, np.nan).astype(np.float64)
    size = np.log(size) if log_nucleus else size
    d_h = np.diff(entropy.astype(np.float64), axis=2)
    d_n = np.diff(size, axis=2)
    ok = np.isfinite(d_h) & np.isfinite(d_n)
    layer = np.broadcast_to(np.arange(1, entropy.shape[2]), d_h.shape)
    prompt = np.broadcast_to(np.arange(entropy.shape[0])[:, None, None], d_h.shape)
    return d_h[ok], d_n[ok], layer[ok], prompt[ok]


def _model_arrays(ds: xr.Dataset, model: str, metric: str, alpha: float | None) -> tuple[np.ndarray, np.ndarray]:
    return model_values(ds, model, metric_array(ds, metric, alpha)), model_values(ds, model, schema.NUCLEUS_SIZE)


def _model_info(ds: xr.Dataset, model: str) -> dict[str, object]:
    family = str(ds[schema.FAMILY].sel({schema.MODEL: model}).values) if schema.FAMILY in ds.coords else ""
    return {"model": model, "family": family, "n_layers": model_n_layers(ds, model)}


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman rho and two-sided p-value; NaN when ``n < 3`` or either input is constant."""
    if x.size < MIN_SPEARMAN_N or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    res = stats.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)


def expansion_spearman(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    log_nucleus: bool = False,
    models: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Spearman correlation of ``Delta H`` with the nucleus-size change, per model.

    Args:
        ds: Combined dataset (lazy is fine; one model is loaded at a time).
        metric: ``"entropy"`` (the study's) or ``"renyi"``.
        alpha: Rényi order for ``renyi``.
        log_nucleus: Use the change of ``log N`` (same ranks per layer pair only if N > 0).
        models: Models to include (default: all).
        n_boot: Bootstrap replicates of the prompt-cluster interval.
        seed: Seed of the bootstrap.

    Returns:
        One row per model: ``model, family, n_layers, n`` (valid layer pairs),
        ``n_prompts, spearman, ci_low, ci_high`` (95%, resampling prompts) and
        ``p_value`` (scipy's, which treats rows as independent and so overstates
        precision; kept for reference).
    """
    rows = []
    for model in model_names(ds, models):
        d_h, d_n, _, prompts = layer_deltas(*_model_arrays(ds, model, metric, alpha), log_nucleus=log_nucleus)
        rho, p = spearman(d_h, d_n)
        lo, hi = (math.nan, math.nan) if math.isnan(rho) else _rank_interval(d_h, d_n, prompts, n_boot, seed)
        rows.append(
            {
                **_model_info(ds, model),
                "n": int(d_h.size),
                "n_prompts": int(np.unique(prompts).size),
                "spearman": rho,
                "ci_low": lo,
                "ci_high": hi,
                "p_value": p,
            }
        )
    return pd.DataFrame(rows, columns=list(SPEARMAN_COLUMNS))


SPEARMAN_COLUMNS = ("model", "family", "n_layers", "n", "n_prompts", "spearman", "ci_low", "ci_high", "p_value")


def _rank_interval(
    d_h: np.ndarray, d_n: np.ndarray, prompts: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float]:
    ranks = (stats.rankdata(d_h), stats.rankdata(d_n))
    return cluster_bootstrap_correlation(*ranks, prompts, n_boot=n_boot, seed=seed)


def expansion_points(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    log_nucleus: bool = False,
    max_points: int = DEFAULT_MAX_POINTS,
    seed: int = DEFAULT_SEED,
    models: Sequence[str] | None = None,
) -> pd.DataFrame:
    """``(Delta N, Delta H)`` pairs for a scatter plot, at most ``max_points`` per model.

    Returns:
        ``model, layer, depth, delta_nucleus, delta_entropy`` (a seeded random subsample).
    """
    rng = np.random.default_rng(seed)
    frames = []
    for model in model_names(ds, models):
        d_h, d_n, layer, _ = layer_deltas(*_model_arrays(ds, model, metric, alpha), log_nucleus=log_nucleus)
        pick = rng.choice(d_h.size, size=min(max_points, d_h.size), replace=False)
        depth = model_depth(ds, model)[layer[pick]]
        frames.append(
            pd.DataFrame(
                {
                    "model": model,
                    "layer": layer[pick],
                    "depth": depth,
                    "delta_nucleus": d_n[pick],
                    "delta_entropy": d_h[pick],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _jaccard(ds: xr.Dataset, model: str) -> np.ndarray:
    return model_values(ds, model, schema.NUCLEUS_JACCARD).astype(np.float64)


def quantile_column(q: float) -> str:
    """Column name of quantile ``q``: ``0.05 -> "q05"``, ``0.5 -> "q50"``."""
    return f"q{round(q * 100):02d}"


def nucleus_overlap(
    ds: xr.Dataset, *, quantiles: Sequence[float] = DEFAULT_QUANTILES, models: Sequence[str] | None = None
) -> pd.DataFrame:
    """Adjacent-layer nucleus Jaccard per model: mean, std and quantiles over valid cells.

    Returns:
        One row per model: ``model, family, n_layers, n, n_prompts, mean, ci_low, ci_high``
        (95%, resampling prompts), ``std`` and one ``qNN`` column per quantile.
    """
    if any(not 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must lie in [0, 1], got {list(quantiles)!r}")
    rows = []
    for model in model_names(ds, models):
        cells = _jaccard(ds, model)
        finite = np.isfinite(cells)
        values = cells[finite]
        prompts = np.broadcast_to(np.arange(cells.shape[0])[:, None, None], cells.shape)[finite]
        row = {**_model_info(ds, model), "n": int(values.size), "n_prompts": int(np.unique(prompts).size)}
        row["mean"] = float(values.mean()) if values.size else np.nan
        row["ci_low"], row["ci_high"] = cluster_bootstrap_mean(values, prompts) if values.size else (np.nan, np.nan)
        row["std"] = float(values.std(ddof=1)) if values.size > 1 else np.nan
        qs = np.quantile(values, quantiles) if values.size else np.full(len(quantiles), np.nan)
        row.update({quantile_column(q): float(v) for q, v in zip(quantiles, qs, strict=True)})
        rows.append(row)
    return pd.DataFrame(rows)


def overlap_by_depth(ds: xr.Dataset, *, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean adjacent-layer Jaccard at each layer (overlap of layers ``l`` and ``l+1``).

    Returns:
        ``model, layer, depth, mean, n`` (the last layer, which has no successor, is left out).
    """
    frames = []
    for model in model_names(ds, models):
        values = _jaccard(ds, model)
        n = np.isfinite(values).sum(axis=(0, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nansum(values, axis=(0, 1)) / n
        keep = n > 0
        frames.append(
            pd.DataFrame(
                {
                    "model": model,
                    "layer": np.flatnonzero(keep),
                    "depth": model_depth(ds, model)[keep],
                    "mean": mean[keep],
                    "n": n[keep],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
