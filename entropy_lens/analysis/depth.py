"""The common normalized-depth grid: profiles of models with different layer counts, compared at one depth.

A model's layer ``l`` of ``L`` sits at normalized depth ``(l + 1) / L``.  Profiles of several
models are compared on one grid that every model covers without extrapolation
(:func:`depth_grid`), each read there by linear interpolation (:func:`resample_depth`), never
padded (padding makes deeper models look different only because they are longer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_GRID_POINTS = 32


def depth_grid(n_layers: Sequence[int], n_points: int = DEFAULT_GRID_POINTS) -> np.ndarray:
    """Common normalized-depth grid that every model covers without extrapolation.

    Depth is ``(layer + 1) / L``, so a model's profile spans ``[1/L, 1]``; the grid spans
    ``[1 / min(L), 1]``, the range every model covers.

    Args:
        n_layers: Layer counts of the compared models.
        n_points: Grid size.

    Returns:
        ``[n_points]`` increasing depths.
    """
    if len(n_layers) == 0 or min(n_layers) < 2:
        raise ValueError(f"n_layers must list models with >= 2 layers each, got {list(n_layers)!r}")
    if n_points < 2:
        raise ValueError(f"n_points must be >= 2, got {n_points!r}")
    return np.linspace(1.0 / min(n_layers), 1.0, n_points)


def resample_depth(values: np.ndarray, depth: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Linearly interpolate profiles from their layer depths onto ``grid``.

    Equivalent to ``np.interp(grid, depth, v)`` on every trailing vector ``v``, done as one
    matrix product with the interpolation weights (NaN in a vector makes its result NaN).

    Args:
        values: ``[..., L]`` values at depths ``depth``.
        depth: ``[L]`` strictly increasing depths.
        grid: ``[G]`` target depths (clamped to the end values outside ``depth``, as np.interp).

    Returns:
        ``[..., G]`` resampled values.
    """
    depth = np.asarray(depth, dtype=np.float64)
    if values.shape[-1] != depth.size:
        raise ValueError(f"values have {values.shape[-1]} layers but depth has {depth.size} entries")
    if depth.size < 2 or not np.all(np.diff(depth) > 0):
        raise ValueError("depth must hold >= 2 strictly increasing values (NaN-padded layers removed)")
    basis = np.eye(depth.size)
    weights = np.stack([np.interp(grid, depth, row) for row in basis])  # [L, G]
    return values @ weights
