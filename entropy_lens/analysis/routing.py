"""Do layers of expansion coincide with diffuse routing?  ΔH against routing entropy in MoE models.

For every model whose store carries ``routing_entropy`` (mixture-of-experts blocks, see
:mod:`entropy_lens.model.routing`), block ``l``'s lens entropy change ``ΔH_l = H_l - H_{l-1}``
is paired with the entropy ``R_l`` of block ``l``'s router distribution at the same
(prompt, token): the block that changes the entropy is the one whose router spread its
token over experts, or not.  Dense blocks (NaN routing) and masked slots never enter.

Two readings, each with a 95% interval from a bootstrap over prompts (the token x layer
rows of a prompt are not independent; :mod:`entropy_lens.core.intervals`):

* **over layers** (the question asked): Spearman across MoE layers of the per-layer mean
  ``ΔH`` and mean ``R``; each replicate redraws prompts and recomputes both means.
* **over cells**: Spearman of ``ΔH`` and ``R`` over every valid (token, layer) cell, whose
  interval bootstraps the correlation of the full sample's ranks, as for ΔH against the
  nucleus size (:mod:`entropy_lens.analysis.expansion.spearman`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from entropy_lens.analysis.expansion.spearman import spearman
from entropy_lens.analysis.features import model_depth, model_n_layers, model_names, model_values
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    cluster_bootstrap_correlation,
    cluster_sums,
    percentile_interval,
)
from entropy_lens.store import schema

log = logging.getLogger(__name__)

DEFAULT_SEED = 0
MIN_LAYERS = 3
SUMMARY_COLUMNS = (
    "dataset",
    "model",
    "family",
    "n_layers",
    "n_moe_layers",
    "n",
    "n_prompts",
    "spearman_layers",
    "ci_low",
    "ci_high",
    "spearman_cells",
    "cells_ci_low",
    "cells_ci_high",
    "mean_routing_entropy",
    "note",
)
LAYER_COLUMNS = ("dataset", "model", "layer", "depth", "n", "mean_delta_entropy", "mean_routing_entropy")


def routing_pairs(entropy: np.ndarray, routing: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``ΔH_l`` and ``R_l`` over valid cells of one model.

    Args:
        entropy: ``[P, T, L]`` lens entropy, nats (NaN where masked).
        routing: ``[P, T, L]`` routing entropy, nats (NaN on dense layers and masked slots).

    Returns:
        ``(delta_h, routing, layer, prompt)``: ``[n]`` arrays over cells with both values,
        ``layer`` being the block ``l >= 1`` of each change.
    """
    if entropy.shape != routing.shape or entropy.ndim != 3:
        raise ValueError(f"entropy and routing must share a [P, T, L] shape; got {entropy.shape}, {routing.shape}")
    d_h = np.diff(entropy.astype(np.float64), axis=2)
    r = routing[:, :, 1:].astype(np.float64)
    ok = np.isfinite(d_h) & np.isfinite(r)
    layer = np.broadcast_to(np.arange(1, entropy.shape[2]), d_h.shape)
    prompt = np.broadcast_to(np.arange(entropy.shape[0])[:, None, None], d_h.shape)
    return d_h[ok], r[ok], layer[ok], prompt[ok]


def layer_means(d_h: np.ndarray, r: np.ndarray, layer: np.ndarray) -> pd.DataFrame:
    """Per layer: cells ``n``, mean ``ΔH`` and mean routing entropy."""
    frame = pd.DataFrame({"layer": layer, "d_h": d_h, "r": r})
    grouped = frame.groupby("layer")
    return pd.DataFrame(
        {"n": grouped.size(), "mean_delta_entropy": grouped["d_h"].mean(), "mean_routing_entropy": grouped["r"].mean()}
    ).reset_index()


def layer_spearman_interval(
    d_h: np.ndarray,
    r: np.ndarray,
    layer: np.ndarray,
    prompt: np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> tuple[float, float]:
    """Percentile interval of the across-layer Spearman of mean ``ΔH`` and mean ``R``, prompts redrawn.

    Each replicate sums, per layer, the cells of the drawn prompts (:func:`cluster_sums`),
    takes both means and their Spearman across layers; replicates where a layer gets no
    cell or a mean is constant are left out.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two prompts or no usable replicate.
    """
    layers = np.unique(layer)
    onehot = [(layer == value).astype(np.float64) for value in layers]
    weights = [*onehot, *(w * d_h for w in onehot), *(w * r for w in onehot)]
    sums = cluster_sums(weights, prompt, n_boot=n_boot, seed=seed)
    if sums is None:
        return math.nan, math.nan
    count, sum_h, sum_r = np.split(sums, 3)  # each [L', n_boot]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_h, mean_r = sum_h / count, sum_r / count
    usable = np.isfinite(mean_h).all(0) & np.isfinite(mean_r).all(0) & (np.ptp(mean_h, 0) > 0) & (np.ptp(mean_r, 0) > 0)
    if not usable.any():
        return math.nan, math.nan
    rank_h, rank_r = stats.rankdata(mean_h[:, usable], axis=0), stats.rankdata(mean_r[:, usable], axis=0)
    rho = np.array([np.corrcoef(a, b)[0, 1] for a, b in zip(rank_h.T, rank_r.T, strict=True)])
    low, high = percentile_interval(rho, level)
    return float(low), float(high)


def routing_correlation(
    ds: xr.Dataset, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED, models: Sequence[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ΔH against routing entropy for every MoE model of a combined store.

    Args:
        ds: A combined store (lazy is fine); models without routing data are skipped.
        n_boot: Bootstrap replicates of the prompt intervals.
        seed: Seed of the bootstrap.
        models: Models to consider (default: all).

    Returns:
        ``(summary, per_layer)``: one row per MoE model (:data:`SUMMARY_COLUMNS` but
        ``dataset``), and its per-layer means (:data:`LAYER_COLUMNS` but ``dataset``).
    """
    rows, layers = [], []
    if schema.ROUTING_ENTROPY not in ds:
        return _frames(rows, layers, dataset=False)
    for model in model_names(ds, models):
        routing = model_values(ds, model, schema.ROUTING_ENTROPY)
        if not np.isfinite(routing).any():
            continue
        pairs = routing_pairs(model_values(ds, model, schema.ENTROPY), routing)
        means = layer_means(*pairs[:3])
        layers.append(means.assign(model=model, depth=model_depth(ds, model)[means["layer"]]))
        rows.append(_summary_row(ds, model, pairs=pairs, means=means, n_boot=n_boot, seed=seed))
    return _frames(rows, layers, dataset=False)


def _summary_row(
    ds: xr.Dataset,
    model: str,
    *,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    means: pd.DataFrame,
    n_boot: int,
    seed: int,
) -> dict:
    """One model's summary row; ``pairs`` are the ``[n]`` (ΔH, routing entropy, layer, prompt) of its cells
    (:func:`routing_pairs`) and ``means`` their per-layer means."""
    d_h, r, layer, prompt = pairs
    family = str(ds[schema.FAMILY].sel({schema.MODEL: model}).values) if schema.FAMILY in ds.coords else ""
    row = {"model": model, "family": family, "n_layers": model_n_layers(ds, model), "n_moe_layers": len(means)}
    row |= {"n": int(d_h.size), "n_prompts": int(np.unique(prompt).size), "mean_routing_entropy": float(r.mean())}
    row["spearman_layers"], _ = spearman(
        means["mean_delta_entropy"].to_numpy(), means["mean_routing_entropy"].to_numpy()
    )
    row["spearman_cells"], _ = spearman(d_h, r)
    row["ci_low"], row["ci_high"] = (
        layer_spearman_interval(d_h, r, layer, prompt, n_boot=n_boot, seed=seed)
        if np.isfinite(row["spearman_layers"])
        else (math.nan, math.nan)
    )
    row["cells_ci_low"], row["cells_ci_high"] = (
        cluster_bootstrap_correlation(stats.rankdata(d_h), stats.rankdata(r), prompt, n_boot=n_boot, seed=seed)
        if np.isfinite(row["spearman_cells"])
        else (math.nan, math.nan)
    )
    row["note"] = f"fewer than {MIN_LAYERS} MoE layers with a ΔH" if len(means) < MIN_LAYERS else ""
    return row


def _frames(rows: list[dict], layers: list[pd.DataFrame], *, dataset: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    summary_cols = [c for c in SUMMARY_COLUMNS if dataset or c != "dataset"]
    layer_cols = [c for c in LAYER_COLUMNS if dataset or c != "dataset"]
    per_layer = pd.concat(layers, ignore_index=True) if layers else pd.DataFrame(columns=layer_cols)
    return pd.DataFrame(rows, columns=summary_cols), per_layer[layer_cols]


def routing_tables(
    stores: Mapping[str, xr.Dataset], *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`routing_correlation` of every combined store (by dataset name), stacked with a ``dataset`` column.

    Datasets without an MoE model add no row; with none at all both frames are empty (with
    their columns), which the workflow writes as such.
    """
    summaries, layers = [], []
    for dataset, ds in stores.items():
        summary, per_layer = routing_correlation(ds, n_boot=n_boot, seed=seed)
        summaries.append(summary.assign(dataset=dataset))
        layers.append(per_layer.assign(dataset=dataset))
    if not any(len(s) for s in summaries):
        log.info("no model of these stores has mixture-of-experts blocks: the routing tables are empty")
    summary = pd.concat(summaries, ignore_index=True) if summaries else pd.DataFrame()
    per_layer = pd.concat(layers, ignore_index=True) if layers else pd.DataFrame()
    return summary.reindex(columns=list(SUMMARY_COLUMNS)), per_layer.reindex(columns=list(LAYER_COLUMNS))
