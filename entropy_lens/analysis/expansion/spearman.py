"""Expansion and pruning: how entropy changes track the top-p nucleus size across layers.

``Delta H_l = H_l - H_{l-1}`` is compared with the change of the top-p nucleus size
``Delta N_l = N_l - N_{l-1}`` (or of ``log N`` with ``log_nucleus=True``) for every
adjacent pair of real layers, every valid generated token and every prompt: one
Spearman correlation per model with its sample size.  Positive correlation means that
layers that raise entropy widen the candidate set (expansion) and layers that lower it
narrow the set (pruning).  Masked token slots (NaN / -1) and padded layers never enter.
The adjacent-layer overlap of the nuclei is :mod:`~entropy_lens.analysis.expansion.overlap`.

Intervals.  The (token, layer) rows of one prompt are not independent, and neither are the prompts
of one source (a story's, a topic's, a question's: :func:`~entropy_lens.analysis.features.prompt_sources`),
so every interval resamples sources, not rows or prompts (:mod:`entropy_lens.core.intervals`): the
Spearman interval is a source-cluster bootstrap of the correlation of the full sample's ranks.

Nulls.  The statistic sits beside its cross-prompt null (layer ``l`` of a prompt against layer
``l + 1`` of its partner, :mod:`~entropy_lens.analysis.expansion.nulls`), on the same cells.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from entropy_lens.analysis.expansion import nulls
from entropy_lens.analysis.features import (
    metric_array,
    model_depth,
    model_info,
    model_names,
    model_values,
    prompt_sources,
)
from entropy_lens.core.frames import MEASURE, Reading
from entropy_lens.core.intervals import DEFAULT_N_BOOT, cluster_bootstrap_correlation
from entropy_lens.store import schema

log = logging.getLogger(__name__)

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
        n_boot: Bootstrap replicates of the source-cluster interval.
        seed: Seed of the bootstrap.

    Returns:
        One row per model: ``model, family, n_layers, n`` (valid layer pairs),
        ``n_prompts, n_sources, spearman, ci_low, ci_high`` (95%, resampling sources),
        ``p_value`` (scipy's, which treats rows as independent and so overstates
        precision; kept for reference) and the cross-prompt null's columns
        (:data:`~entropy_lens.analysis.expansion.nulls.NULL_COLUMNS`, :mod:`~entropy_lens.analysis.expansion.nulls`;
        with ``log_nucleus`` the null is of the ``log N`` statistic too).
    """
    rows = []
    sources = prompt_sources(ds)
    codes = nulls.source_codes(sources, sources.size)
    for model in model_names(ds, models):
        entropy, nucleus = _model_arrays(ds, model, metric, alpha)
        d_h, d_n, _, prompts = layer_deltas(entropy, nucleus, log_nucleus=log_nucleus)
        rho, p = spearman(d_h, d_n)
        lo, hi = (math.nan, math.nan) if math.isnan(rho) else _rank_interval(d_h, d_n, codes[prompts], n_boot, seed)
        rows.append(
            {
                **model_info(ds, model),
                "n": int(d_h.size),
                "n_prompts": int(np.unique(prompts).size),
                "n_sources": int(np.unique(codes[prompts]).size),
                "spearman": rho,
                "ci_low": lo,
                "ci_high": hi,
                "p_value": p,
                **_spearman_null(ds, model, (entropy, nucleus), log_nucleus=log_nucleus, n_boot=n_boot, seed=seed),
            }
        )
    return pd.DataFrame(rows, columns=list(SPEARMAN_COLUMNS))


SPEARMAN_COLUMNS = (
    "model",
    "family",
    "n_layers",
    "n",
    "n_prompts",
    "n_sources",
    "spearman",
    "ci_low",
    "ci_high",
    "p_value",
    *nulls.NULL_COLUMNS,
)


def _spearman_null(
    ds: xr.Dataset,
    model: str,
    arrays: tuple[np.ndarray, np.ndarray],
    *,
    log_nucleus: bool,
    n_boot: int,
    seed: int,
) -> dict[str, object]:
    """The cross-prompt null's columns of one model; ``arrays`` are its ``[P, T, L]`` entropy and nucleus size."""
    entropy, nucleus = arrays
    partner, name, unpartnered = nulls.partners(ds, model)
    return nulls.spearman_null(
        entropy,
        nucleus,
        partner,
        name,
        log_nucleus=log_nucleus,
        n_boot=n_boot,
        seed=seed,
        sources=prompt_sources(ds),
        unpartnered=unpartnered,
    )


def _rank_interval(
    d_h: np.ndarray, d_n: np.ndarray, sources: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float]:
    ranks = (stats.rankdata(d_h), stats.rankdata(d_n))
    return cluster_bootstrap_correlation(*ranks, sources, n_boot=n_boot, seed=seed)


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


# The table as a standard frame (entropy_lens.core.frames).
SPEARMAN_READING = Reading("spearman", sources="n_sources", split="dataset", fixed={MEASURE: "shannon"})
