"""The Spearman across blocks of a mean cost and a mean score, bootstrapped over the units (and the blocks).

Both layer-skip readings rank blocks this way: each pruning criterion against the measured cost of skipping a
block (:mod:`entropy_lens.skipping.criteria`: criterion and cost read off the same questions, resampled
together) and the calibration questions' Delta H against the evaluation questions' cost
(:mod:`entropy_lens.skipping.criticality`: two samples of questions, each resampled on its own).  A replicate
resamples the units (questions) with replacement: they carry the measurement noise.  Where the statement is
about one model's blocks, those blocks are the whole population and stay fixed (``blocks_fixed``); where it is
about blocks in general, a replicate also resamples the blocks, independently, for the chance that a handful
of blocks decides a rank correlation.

A block every unit scores ``+inf`` (a block a criterion never prunes, EntroDrop's early stage) ranks above every
other in each replicate.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.intervals import DEFAULT_LEVEL, percentile_interval

# Fewest blocks a rank correlation over blocks reads (fewer: NaN).
MIN_BLOCKS = 3


def rank_rows(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share theirs) of each row of a ``[R, n]`` array."""
    return stats.rankdata(values, axis=1)


def row_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[R]`` Pearson correlations of matching rows of ``[R, n]`` arrays (NaN for a constant row)."""
    x, y = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x * y).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))


def unit_means(values: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """``[R, B]`` means over the units of ``values`` ``[N, B]`` under resample ``counts`` ``[R, N]`` (``None``: the
    sample itself, ``R = 1``); a block every unit scores ``+inf`` stays ``+inf``, other infinite cells count 0."""
    values = np.asarray(values, dtype=np.float64)
    protected = np.isposinf(values).all(axis=0)
    finite = np.where(np.isinf(values), 0.0, values)
    means = finite.mean(axis=0)[None] if counts is None else counts @ finite / values.shape[0]
    means[:, protected] = np.inf
    return means


def block_spearman_draws(
    cost: np.ndarray, score: np.ndarray, *, n_boot: int, seed: int, paired: bool, blocks_fixed: bool = False
) -> tuple[float, np.ndarray]:
    """Spearman across blocks of the mean ``score`` with the mean ``cost``, and ``[n_boot]`` bootstrap replicates.

    Each replicate draws the units of ``cost`` with replacement (``paired``: the same draw for ``score``,
    whose rows are the same units; else an independent draw of ``score``'s own units) and, unless
    ``blocks_fixed``, independently the blocks.  The draws depend only on ``seed`` and the shapes, so two scores
    read against one cost with one seed are resampled alike: their replicates pair, and their difference has an
    interval of its own.

    Args:
        cost: ``[N, B]`` each unit's cost of each block.
        score: ``[M, B]`` each unit's score of each block (``M == N`` when ``paired``).
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        paired: Whether ``score``'s rows are ``cost``'s units.
        blocks_fixed: Keep the blocks (the statement is about these blocks, e.g. one model's): resample the
            units only.

    Returns:
        ``(rho, draws)``; NaN where undefined (fewer than :data:`MIN_BLOCKS` blocks, no units, a constant mean).

    Raises:
        ValueError: for arrays that are not 2-D over the same blocks (and, paired, the same units).
    """
    cost, score = np.asarray(cost, dtype=np.float64), np.asarray(score, dtype=np.float64)
    if paired and (cost.ndim != 2 or cost.shape != score.shape):
        raise ValueError(f"need cost and score [N, B] of one shape, got {cost.shape} and {score.shape}")
    if cost.ndim != 2 or score.ndim != 2 or cost.shape[1] != score.shape[1]:
        raise ValueError(f"need cost [N, B] and score [M, B] over the same blocks, got {cost.shape} and {score.shape}")
    n_boot = check_positive_int(n_boot, "n_boot")
    n_blocks = cost.shape[1]
    if n_blocks < MIN_BLOCKS or cost.shape[0] == 0 or score.shape[0] == 0:
        return np.nan, np.full(n_boot, np.nan)
    rho = row_correlation(rank_rows(unit_means(score)), rank_rows(unit_means(cost)))[0]
    rng = np.random.default_rng(seed)
    drawn = (cost,) if paired else (cost, score)  # cost's units first: the draws of a seed stay those of its cost
    units = [rng.multinomial(m.shape[0], np.full(m.shape[0], 1 / m.shape[0]), n_boot) for m in drawn]
    counts = units * 2 if paired else units  # [R, N] unit counts of cost, and [R, M] of score
    means = [unit_means(m, c) for c, m in zip(counts, (cost, score), strict=True)]
    if not blocks_fixed:
        blocks = rng.integers(0, n_blocks, size=(n_boot, n_blocks))
        means = [np.take_along_axis(m, blocks, axis=1) for m in means]
    return float(rho), row_correlation(rank_rows(means[1]), rank_rows(means[0]))


def spearman_interval(rho: float, draws: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float, float]:
    """``(rho, low, high)``: the percentile interval of the finite replicates; NaN where ``rho`` or every
    replicate is undefined."""
    draws = np.asarray(draws, dtype=np.float64)
    draws = draws[np.isfinite(draws)]
    if not np.isfinite(rho) or draws.size == 0:
        return np.nan, np.nan, np.nan
    low, high = percentile_interval(draws, level)
    return float(rho), float(low), float(high)
