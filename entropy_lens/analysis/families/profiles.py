"""Mean entropy profiles of each model and of each sample, on its own layers and on the common depth grid.

Models have different layer counts, so profiles are compared on a common normalized-
depth grid (:func:`entropy_lens.analysis.depth.depth_grid`) after linear interpolation,
never after zero-padding (padding makes deeper models look different only because they
are longer).  Every profile here is a mean over valid (unmasked) token slots; masked slots
are ignored, not filled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS, depth_grid, resample_depth
from entropy_lens.analysis.features import model_depth, model_n_layers, model_names, model_profiles, plain, prompt_ids
from entropy_lens.store import schema

log = logging.getLogger(__name__)

N_PARAMS = "n_params"
GRID_DIM = "grid"
SAMPLE_DIM = "sample"


def _model_coords(ds: xr.Dataset, models: list[str]) -> dict[str, tuple[str, np.ndarray]]:
    sub = ds.sel({schema.MODEL: models})
    coords = {schema.N_LAYERS: (schema.MODEL, np.asarray(sub[schema.N_LAYERS].values))}
    for name in (schema.FAMILY, N_PARAMS):
        if name in ds.coords:
            coords[name] = (schema.MODEL, plain(sub[name].values))
    return coords


def _token_mean(profiles: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    counts = np.isfinite(profiles).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, np.nansum(profiles, axis=axis) / counts, np.nan)


def layer_profiles(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    models: Sequence[str] | None = None,
    prompts: Sequence[str] | None = None,
) -> xr.DataArray:
    """Mean profile per model on its own layers (mean over prompts and valid tokens).

    Args:
        ds: Combined dataset, typically the ``blank`` store (lazy is fine).
        metric: ``"entropy"`` or ``"renyi"``.
        alpha: Rényi order for ``renyi``.
        models: Models to include (default: all).
        prompts: Prompt ids to average over (default: all).

    Returns:
        ``(model, layer)`` nats, NaN on padded layers; coords ``depth (model, layer)``,
        ``n_layers``, ``family``, ``n_params`` on ``model``.
    """
    names = model_names(ds, models)
    width = ds.sizes[schema.LAYER]
    values = np.full((len(names), width), np.nan)
    depth = np.full((len(names), width), np.nan)
    for i, model in enumerate(names):
        prof = model_profiles(ds, model, metric=metric, alpha=alpha, prompts=prompts)
        values[i, : prof.shape[2]] = _token_mean(prof, (0, 1))
        depth[i, : prof.shape[2]] = model_depth(ds, model)
    coords = {schema.MODEL: names, schema.LAYER: np.arange(width), schema.DEPTH: ((schema.MODEL, schema.LAYER), depth)}
    return xr.DataArray(values, dims=(schema.MODEL, schema.LAYER), coords={**coords, **_model_coords(ds, names)})


def real_profile(profiles: xr.DataArray, model: str) -> tuple[np.ndarray, np.ndarray]:
    row = schema.real_layers(profiles, model)
    return np.asarray(row[schema.DEPTH].values, dtype=np.float64), np.asarray(row.values, dtype=np.float64)


def mean_profiles(profiles: xr.DataArray, grid_points: int = DEFAULT_GRID_POINTS) -> xr.DataArray:
    """Resample per-model layer profiles onto the common normalized-depth grid.

    Args:
        profiles: ``(model, layer)`` from :func:`layer_profiles`.
        grid_points: Grid size.

    Returns:
        ``(model, grid)`` with coordinate ``depth (grid)`` and the model coords.
    """
    names = list(profiles[schema.MODEL].values)
    grid = depth_grid([int(n) for n in profiles[schema.N_LAYERS].values], grid_points)
    rows = [resample_depth(values, depth, grid) for depth, values in (real_profile(profiles, m) for m in names)]
    model_coords = {k: v for k, v in profiles.coords.items() if v.dims == (schema.MODEL,)}
    return xr.DataArray(
        np.stack(rows), dims=(schema.MODEL, GRID_DIM), coords={**model_coords, schema.DEPTH: (GRID_DIM, grid)}
    )


def sample_profiles(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    grid_points: int = DEFAULT_GRID_POINTS,
    models: Sequence[str] | None = None,
    prompts: Sequence[str] | None = None,
) -> xr.DataArray:
    """Per-sample profiles (each prompt's mean over its valid tokens) on the depth grid.

    Samples with no valid token are dropped with a warning.

    Returns:
        ``(sample, grid)``; coords on ``sample``: ``model``, ``prompt``, ``family``,
        ``n_params``; ``depth (grid)``.
    """
    names = model_names(ds, models)
    grid = depth_grid([model_n_layers(ds, m) for m in names], grid_points)
    ids = prompt_ids(ds, prompts)
    rows = [
        resample_depth(
            _token_mean(model_profiles(ds, m, metric=metric, alpha=alpha, prompts=ids), (1,)), model_depth(ds, m), grid
        )
        for m in names
    ]
    values = np.concatenate(rows)
    keep = np.isfinite(values).all(axis=1)
    if not keep.all():
        log.warning("%d of %d samples have no valid token and are dropped", int((~keep).sum()), keep.size)
    model_col = np.repeat(np.asarray(names, dtype=object), ids.size)[keep]
    coords = {schema.MODEL: (SAMPLE_DIM, model_col), schema.PROMPT: (SAMPLE_DIM, np.tile(ids, len(names))[keep])}
    for name, (_, vals) in _model_coords(ds, names).items():
        coords[name] = (SAMPLE_DIM, np.repeat(vals, ids.size)[keep])
    return xr.DataArray(values[keep], dims=(SAMPLE_DIM, GRID_DIM), coords={**coords, schema.DEPTH: (GRID_DIM, grid)})
