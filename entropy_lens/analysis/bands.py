"""Mean profiles over depth per label value, with a band across prompts: what the profile figures draw."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.features import model_depth, model_profiles, plain, prompt_ids
from entropy_lens.store import schema

BANDS = ("ci95", "std")
# Two-sided normal quantile for a 95% confidence band of a mean.
Z_95 = 1.959964


def prompt_labels(ds: xr.Dataset, label: str) -> np.ndarray:
    """``[P]`` values of a label coordinate on ``prompt`` (e.g. ``task``, ``format``)."""
    if label not in ds.coords or ds[label].dims != (schema.PROMPT,):
        found = [c for c in ds.coords if ds[c].dims == (schema.PROMPT,)]
        raise ValueError(f"label {label!r} is not a coordinate on 'prompt'; prompt labels here: {found}")
    return plain(ds[label].values)


def profile_bands(
    ds: xr.Dataset,
    model: str,
    label: str,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    band: str = "ci95",
    prompts: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mean profile vs depth per label value, with a band across prompts.

    Each prompt's profile is first averaged over its valid tokens (masked slots are
    ignored, not filled); the band is the standard deviation across prompts (``std``) or
    the normal 95% confidence interval of the mean (``ci95``).

    Returns:
        Tidy frame: ``model, label, value, layer, depth, mean, lower, upper, n``.
    """
    if band not in BANDS:
        raise ValueError(f"band must be one of {BANDS}, got {band!r}")
    ids = prompt_ids(ds, prompts)
    values = prompt_labels(ds.sel({schema.PROMPT: ids}), label)
    per_prompt = _nanmean_tokens(model_profiles(ds, model, metric=metric, alpha=alpha, prompts=ids))  # [N, L]
    depth = model_depth(ds, model)
    frames = [
        _band_frame(per_prompt[values == v], depth, band).assign(model=model, label=label, value=v)
        for v in pd.unique(values)
    ]
    cols = ["model", "label", "value", "layer", "depth", "mean", "lower", "upper", "n"]
    return pd.concat(frames, ignore_index=True)[cols]


def all_profile_bands(ds: xr.Dataset, label: str, *, band: str = "ci95") -> pd.DataFrame:
    """:func:`profile_bands` of every model of a combined store, stacked."""
    return pd.concat([profile_bands(ds, str(m), label, band=band) for m in ds.indexes[schema.MODEL]], ignore_index=True)


def _nanmean_tokens(profiles: np.ndarray) -> np.ndarray:
    counts = np.isfinite(profiles).sum(axis=1)
    sums = np.nansum(profiles, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, np.nan)


def _band_frame(rows: np.ndarray, depth: np.ndarray, band: str) -> pd.DataFrame:
    rows = rows[np.isfinite(rows).all(axis=1)]
    n = rows.shape[0]
    mean = rows.mean(axis=0) if n else np.full(depth.size, np.nan)
    std = rows.std(axis=0, ddof=1) if n > 1 else np.zeros(depth.size)
    half = std if band == "std" else Z_95 * std / math.sqrt(max(n, 1))
    lower, upper = mean - half, mean + half
    return pd.DataFrame(
        {"layer": np.arange(depth.size), "depth": depth, "mean": mean, "lower": lower, "upper": upper, "n": n}
    )
