"""The statistics of one same-family pair ``(small, large)``: its family, resolution and alignment gaps.

Each is computed on mean profiles (``[B, L_m]``: ``B`` bootstrap replicates, or one estimate) of
one scale (:mod:`~entropy_lens.analysis.families.scales`); the table over every pair is
:func:`entropy_lens.analysis.families.pairs.family_pairs`.

* ``family_gap`` = min over ``m`` in {small, large} and every model ``o`` of another family
  of ``d(m, o)``, minus ``d(small, large)``.  ``d`` is the RMS distance of two models' mean
  profiles on one normalized-depth grid for every model of the store
  (:func:`~entropy_lens.analysis.depth.depth_grid`), so that every distance covers the same
  depths and distances compare.  Above 0: the two sizes of the family are closer to each
  other than either is to any other family (the worse of the two models counts).
* ``resolution_gap`` = min over ``o`` of another family of ``r(small, o) - r(small, large)``.
  ``r(small, x)`` is the RMS difference between the smaller model's profile at its own
  layer depths and ``x``'s profile read (linearly interpolated) at those depths; both terms
  of a difference use the smaller model's depths that ``o`` covers (``>= 1 / L_o``, no
  extrapolation).  Above 0: the larger model of the family, sampled at the smaller one's
  depths, matches the smaller model better than any other family does: the smaller model
  looks like a coarser sampling of its family's schedule.
* ``alignment_gap`` = ``r_abs - r_norm``, the pair alone (no other family enters).
  ``r_norm`` = ``r(small, large)`` on every depth of the smaller model (the ``same`` of
  ``resolution_gap``): the two aligned on normalized depth.  ``r_abs`` is the RMS difference
  of the smaller model's layer ``l`` and the larger model's layer ``l``, ``l = 0 .. L_small -
  1``: the two aligned on absolute layer index.  Above 0: normalized depth aligns the two
  sizes better than layer index does, so the smaller model is the family's schedule sampled
  more coarsely, not its first layers.  "Smaller" here is the model with fewer layers.

``r(small, large)`` on every depth of the smaller model is ``rmse_subsampled``
(:func:`subsampled_rmse`, the RMS of :func:`subsampled_error`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from entropy_lens.analysis.depth import resample_depth

FAMILY_GAP = "family_gap"
RESOLUTION_GAP = "resolution_gap"
ALIGNMENT_GAP = "alignment_gap"
STATISTICS = (FAMILY_GAP, RESOLUTION_GAP, ALIGNMENT_GAP)
# Depth is (l + 1) / L in float32 in the stores: coverage of a depth is decided within this.
DEPTH_TOLERANCE = 1e-6


def subsampled_rmse(
    small: np.ndarray, small_depth: np.ndarray, large: np.ndarray, large_depth: np.ndarray
) -> np.ndarray:
    """``rmse_subsampled``: the RMS difference of the smaller model's profile and the larger one read (linearly
    interpolated) at the smaller one's depths; exact subsampling where those are layer depths of the larger.

    Args:
        small: ``[..., L_small]`` the smaller model's profile(s) at ``small_depth`` ``[L_small]``.
        large: ``[..., L_large]`` the larger model's, at ``large_depth`` ``[L_large]``.

    Returns:
        ``[...]`` in the profiles' unit (nats, or fractions of log V on the normalized scale).
    """
    return rms_of(subsampled_error(small, small_depth, large, large_depth))


def subsampled_error(
    small: np.ndarray, small_depth: np.ndarray, large: np.ndarray, large_depth: np.ndarray
) -> np.ndarray:
    """The larger model's profile(s) read at the smaller one's depths, minus the smaller one's: ``[..., L_small]``
    (the differences :func:`subsampled_rmse` summarises)."""
    return resample_depth(large, large_depth, small_depth) - small


def rms_of(differences: np.ndarray) -> np.ndarray:
    """The root mean square over the last axis."""
    return np.sqrt(np.mean(differences**2, axis=-1))


def family_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The family gap of one pair against ``others`` (see the module docstring).

    Args:
        means: Model -> ``[B, L_m]`` mean profiles (``B`` replicates, or one estimate).
        depths: Model -> ``[L_m]`` depths.
        grid: ``[G]`` common depth grid.
        pair: ``(small, large)``.
        others: Models of other families.

    Returns:
        ``same [B]`` (the pair's distance), ``[B, O]`` each other model's distance to the
        nearer of the pair, and ``[B, O]`` that distance minus ``same``; the gap is the
        minimum of the last over ``O``.
    """
    on_grid = {m: resample_depth(means[m], depths[m], grid) for m in (*pair, *others)}
    same = rms_of(on_grid[pair[0]] - on_grid[pair[1]])
    cross = [np.minimum(*(rms_of(on_grid[m] - on_grid[o]) for m in pair)) for o in others]
    values = np.stack(cross, axis=1) if cross else np.empty((same.size, 0))
    return same, values, values - same[:, None]


def resolution_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The resolution gap of one pair against ``others`` (see the module docstring; ``grid`` unused).

    Returns:
        ``same [B]`` (the larger model read at every depth of the smaller one:
        ``rmse_subsampled`` of :func:`~entropy_lens.analysis.families.pairs.size_pairs`), ``[B, O]``
        each ``r(small, o)`` on the depths ``o`` covers, and ``[B, O]`` ``r(small, o) -
        r(small, large)`` on those depths; the gap is the minimum of the last over ``O``.
    """
    small, large = pair
    at = depths[small]
    read_large = resample_depth(means[large], depths[large], at)
    same = rms_of(read_large - means[small])  # rmse_subsampled (subsampled_rmse), read once
    values, gaps = [], []
    for other in others:
        covered = at >= depths[other][0] - DEPTH_TOLERANCE
        mine = means[small][:, covered]
        values.append(rms_of(resample_depth(means[other], depths[other], at[covered]) - mine))
        gaps.append(values[-1] - rms_of(read_large[:, covered] - mine))
    if not others:
        return same, np.empty((same.size, 0)), np.empty((same.size, 0))
    return same, np.stack(values, axis=1), np.stack(gaps, axis=1)


def alignment_gap(
    means: Mapping[str, np.ndarray],
    depths: Mapping[str, np.ndarray],
    grid: np.ndarray,
    pair: tuple[str, str],
    others: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The alignment gap of one pair (see the module docstring; ``grid`` and ``others`` unused).

    Returns:
        ``same [B]`` = ``r_norm`` (the deeper model read at the shallower one's depths),
        ``[B, 1]`` ``r_abs`` (the deeper model's first ``L_small`` layers, layer for layer)
        and ``[B, 1]`` ``r_abs - r_norm``.
    """
    coarse, fine = sorted(pair, key=lambda m: depths[m].size)
    r_norm = rms_of(resample_depth(means[fine], depths[fine], depths[coarse]) - means[coarse])
    r_abs = rms_of(means[fine][:, : depths[coarse].size] - means[coarse])
    return r_norm, r_abs[:, None], (r_abs - r_norm)[:, None]


STATISTIC_FUNCTIONS = {FAMILY_GAP: family_gap, RESOLUTION_GAP: resolution_gap, ALIGNMENT_GAP: alignment_gap}
