"""Expansion and pruning: how entropy changes track the top-p nucleus across layers.

``Delta H_l = H_l - H_{l-1}`` is compared with the change of the top-p nucleus size
``Delta N_l = N_l - N_{l-1}`` (or of ``log N`` with ``log_nucleus=True``) for every
adjacent pair of real layers, every valid generated token and every prompt: one
Spearman correlation per model with its sample size.  Positive correlation means that
layers that raise entropy widen the candidate set (expansion) and layers that lower it
narrow the set (pruning).  Adjacent-layer nucleus overlap of the top-p sets of layers
``l`` and ``l+1`` is summarized per model, overall and per layer, by two statistics: the
store's Jaccard ``|A & B| / |A | B|`` and the containment (overlap coefficient)
``|A & B| / min(|A|, |B|)``, derived exactly from the Jaccard and the two sizes.  "The
shortlist grows and shrinks" is a containment claim: a nucleus that doubles and keeps
every old token has Jaccard 0.5 but containment 1.  Masked token slots (NaN / -1) and
padded layers never enter.

Intervals.  The (token, layer) rows of one prompt are not independent, so every interval
resamples prompts, not rows (:mod:`entropy_lens.core.intervals`): the Spearman interval is a
prompt-cluster bootstrap of the correlation of the full sample's ranks, and an overlap
mean's interval a prompt-cluster bootstrap of the mean.

Nulls.  Every statistic sits beside its cross-prompt null (layer ``l`` of a prompt against layer
``l + 1`` of its partner, :mod:`~entropy_lens.analysis.expansion_nulls`), on the same cells.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from entropy_lens.analysis import expansion_nulls as nulls
from entropy_lens.analysis.features import metric_array, model_depth, model_n_layers, model_names, model_values
from entropy_lens.core.frames import MEASURE, Reading
from entropy_lens.core.intervals import (
    DEFAULT_N_BOOT,
    cluster_bootstrap_correlation,
    cluster_bootstrap_mean,
    cluster_sums,
    percentile_interval,
)
from entropy_lens.store import schema

log = logging.getLogger(__name__)

DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
DEFAULT_MAX_POINTS = 20_000
DEFAULT_SEED = 0
MIN_SPEARMAN_N = 3
JACCARD, CONTAINMENT, CONTAINMENT_SIZE_CHANGES = nulls.JACCARD, nulls.CONTAINMENT, nulls.CONTAINMENT_SIZE_CHANGES
CONTAINMENT_TOLERANCE = nulls.CONTAINMENT_TOLERANCE


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
        ``n_prompts, spearman, ci_low, ci_high`` (95%, resampling prompts),
        ``p_value`` (scipy's, which treats rows as independent and so overstates
        precision; kept for reference) and the cross-prompt null's columns
        (:data:`~entropy_lens.analysis.expansion_nulls.NULL_COLUMNS`, :mod:`~entropy_lens.analysis.expansion_nulls`;
        with ``log_nucleus`` the null is of the ``log N`` statistic too).
    """
    rows = []
    for model in model_names(ds, models):
        entropy, nucleus = _model_arrays(ds, model, metric, alpha)
        d_h, d_n, _, prompts = layer_deltas(entropy, nucleus, log_nucleus=log_nucleus)
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
    partner, name = nulls.partners(ds, model)
    return nulls.spearman_null(entropy, nucleus, partner, name, log_nucleus=log_nucleus, n_boot=n_boot, seed=seed)


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
    "mean",
    "ci_low",
    "ci_high",
    "std",
    "both_singleton_share",
    *nulls.NULL_COLUMNS,
)
# The spearman and overlap tables as standard frames (entropy_lens.core.frames).
SPEARMAN_READING = Reading("spearman", sources="n_prompts", split="dataset", fixed={MEASURE: "shannon"})
OVERLAP_READING = Reading("mean", sources="n_prompts", split="dataset", measure="statistic")


def _summary(cells: np.ndarray, quantiles: Sequence[float], n_boot: int, seed: int) -> dict[str, float]:
    """Count, mean with its prompt-cluster interval, std and quantiles of the finite ``[P, T, L]`` cells."""
    finite = np.isfinite(cells)
    values = cells[finite]
    prompts = np.broadcast_to(np.arange(cells.shape[0])[:, None, None], cells.shape)[finite]
    row = {"n": int(values.size), "n_prompts": int(np.unique(prompts).size)}
    row["mean"] = float(values.mean()) if values.size else np.nan
    interval = cluster_bootstrap_mean(values, prompts, n_boot=n_boot, seed=seed) if values.size else (np.nan, np.nan)
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
    null (:mod:`~entropy_lens.analysis.expansion_nulls`: layer ``l`` of a prompt against layer
    ``l + 1`` of its batch partner, from the store's ``nucleus_jaccard_cross``), observed and null
    on the cells valid for both; NaN for a store extracted without it.

    Args:
        ds: Combined dataset (lazy is fine; one model is loaded at a time).
        quantiles: Quantiles to report, each in ``[0, 1]``.
        models: Models to include (default: all).
        n_boot: Bootstrap replicates of the prompt-cluster interval.
        seed: Seed of the bootstrap (the same prompt draws for both statistics).

    Returns:
        Long form, three rows per model (``statistic`` ``jaccard``, ``containment``,
        ``containment_size_changes``): ``model, statistic, family, n_layers, n`` (valid cells),
        ``n_prompts, mean, ci_low, ci_high`` (95%, resampling prompts), ``std``,
        ``both_singleton_share`` (share of the row's cells where both sets hold one token), the
        null's columns (:data:`~entropy_lens.analysis.expansion_nulls.NULL_COLUMNS`) and one
        ``qNN`` column per quantile.
    """
    if any(not 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must lie in [0, 1], got {list(quantiles)!r}")
    rows = []
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
                **_model_info(ds, model),
                "statistic": name,
                **_summary(values, quantiles, n_boot, seed),
                "both_singleton_share": shares[name],
                **nulls_of[name],
            }
            for name, values in cells.items()
        ]
    return pd.DataFrame(rows, columns=[*OVERLAP_COLUMNS, *(quantile_column(q) for q in quantiles)])


DEPTH_COLUMNS = ("model", "statistic", "layer", "depth", "mean", "ci_low", "ci_high", "n", "n_prompts")


def _depth_frame(cells: np.ndarray, depth: np.ndarray, n_boot: int, seed: int) -> pd.DataFrame:
    """Per-layer mean of the finite ``[P, T, L]`` cells with a 95% prompt-cluster bootstrap interval.

    One draw of prompts serves every layer: per-prompt sums and counts ``[P, L]`` are summed
    over the drawn prompts (:func:`~entropy_lens.core.intervals.cluster_sums`), and each
    layer's replicate mean is their ratio.  Layers without a valid cell are left out.
    """
    finite = np.isfinite(cells)
    counts = finite.sum(axis=1).astype(np.float64)  # [P, L]
    sums = np.where(finite, cells, 0.0).sum(axis=1)  # [P, L]
    n = counts.sum(axis=0)
    used = counts.sum(axis=1) > 0  # prompts with a valid cell at some layer
    draws = cluster_sums([*counts[used].T, *sums[used].T], np.flatnonzero(used), n_boot=n_boot, seed=seed)
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
        n_boot: Bootstrap replicates of the prompt-cluster interval.
        seed: Seed of the bootstrap.

    Returns:
        ``model, statistic`` (``jaccard``, ``containment``), ``layer, depth`` (normalized
        depth of layer ``l``), ``mean, ci_low, ci_high`` (95%, resampling prompts), ``n``
        (valid cells) and ``n_prompts``; the last layer, which has no successor, is left out.
    """
    frames = [
        _depth_frame(cells, model_depth(ds, model), n_boot, seed).assign(model=model, statistic=name)
        for model in model_names(ds, models)
        for name, cells in _overlap_cells(ds, model).items()
    ]
    return pd.concat(frames, ignore_index=True)[list(DEPTH_COLUMNS)] if frames else pd.DataFrame(columns=DEPTH_COLUMNS)
