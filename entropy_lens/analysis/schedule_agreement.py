"""Do two lenses read one entropy schedule? The Spearman over blocks of the logit lens's ΔH with a fitted lens's,
against a null that permutes the blocks, in the same bootstrap (rules fixed in ``docs/verdicts.md`` first).

Read on the held-out tokens of :mod:`entropy_lens.analysis.schedule`, over every eligible block and over the blocks
whose ΔH is under the fitted lens's KL bar (its reading there counts as the model's): :func:`permutation_agreement`
(the statistic, its interval resampling held-out prompts with the blocks fixed, and its null: each replicate pairs
its resampled Spearman with one under a fresh block permutation) and :func:`agreement_table` (per fitted lens and
block set; where the schedule *cannot be read*, and beside the null the simplest feature, each lens's Spearman with
depth). Its rows under the bar are the extension row "the expansion/pruning schedule survives a fitted lens".
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from entropy_lens.analysis.schedule import CANNOT_BE_READ, LOGIT, MIN_BLOCKS, checked_reading, cluster_draws
from entropy_lens.core.block_spearman import rank_rows, row_correlation
from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, percentile_interval
from entropy_lens.skipping.conditions import ALL_BLOCKS, EXPANSION, PRUNING, eligible_layers

# The block sets an agreement is read over: every eligible block (from 1), and those under the fitted lens's bar.
EVERY, UNDER_BAR = "every block", "under the bar"
BLOCK_SETS = (EVERY, UNDER_BAR)
PERMUTATION_NULL = "block permutation"
AGREEMENT_COLUMNS = (
    "model",
    "lens",
    "blocks",
    "n_blocks",
    "block_list",
    "n_rising",
    "n_falling",
    "rho",
    "ci_low",
    "ci_high",
    *NULL_CONTRACT,
    "p_permutation",
    "depth_rho_logit",
    "depth_rho_fitted",
    "n",
    "n_prompts",
    "convergence_blocks",
    "reading",
)
# The agreement over the blocks under the fitted lens's bar, as a standard frame: one row per model and fitted lens.
AGREEMENT_READING = Reading("rho", sources="n_prompts", split="lens", measure="blocks")


def _row_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman of matching rows of ``[R, B]`` arrays, or of two ``[B]`` vectors (NaN for a constant row)."""
    rho = row_correlation(rank_rows(np.atleast_2d(x)), rank_rows(np.atleast_2d(y)))
    return rho if np.ndim(x) > 1 else rho[0]


def permutation_agreement(
    logit: np.ndarray, fitted: np.ndarray, prompts: np.ndarray, *, n_boot: int, seed: int, level: float = DEFAULT_LEVEL
) -> dict[str, float]:
    """The Spearman over blocks of two lenses' mean ΔH, with its interval and its block-permutation null.

    Each replicate resamples the prompts (the same for both lenses: both are read on the same tokens), takes each
    lens's block means and their Spearman, and the Spearman once more with the fitted lens's blocks under a fresh
    random permutation: the null's interval, and the paired excess (observed - null) of each replicate.

    Args:
        logit, fitted: ``[n_tokens, B]`` each token's ΔH at the blocks read, per lens.
        prompts: ``[n_tokens]`` each token's prompt.
        n_boot, seed: Replicates and seed (the permutations too).
        level: Coverage.

    Returns:
        ``rho, ci_low, ci_high, null_estimate, null_low, null_high, beyond, beyond_low, beyond_high`` and
        ``p_permutation`` (one-sided: the share of permutations of the observed block means at or above ``rho``,
        counting the observed one); NaN with fewer than :data:`MIN_BLOCKS` blocks.
    """
    logit, fitted = np.asarray(logit, dtype=np.float64), np.asarray(fitted, dtype=np.float64)
    keys = ("rho", "ci_low", "ci_high", "null_estimate", "null_low", "null_high", "beyond", "beyond_low")
    out = dict.fromkeys((*keys, "beyond_high", "p_permutation"), np.nan)
    if logit.shape != fitted.shape or logit.ndim != 2:
        raise ValueError(f"both lenses' ΔH must be [n_tokens, B] of one shape, got {logit.shape} and {fitted.shape}")
    n_blocks = logit.shape[1]
    if n_blocks < MIN_BLOCKS:
        return out
    draws = cluster_draws(np.concatenate([logit, fitted], axis=1), prompts, n_boot=n_boot, seed=seed)
    a, b = draws[:, :n_blocks], draws[:, n_blocks:]
    rng = np.random.default_rng(seed)
    permuted = np.take_along_axis(b, rng.permuted(np.tile(np.arange(n_blocks), (n_boot, 1)), axis=1), axis=1)
    observed, resampled, null = (
        _row_spearman(logit.mean(0), fitted.mean(0)),
        _row_spearman(a, b),
        _row_spearman(a, permuted),
    )
    shuffled = np.array([rng.permutation(fitted.mean(0)) for _ in range(n_boot)])
    p_value = (1 + np.sum(_row_spearman(np.broadcast_to(logit.mean(0), shuffled.shape), shuffled) >= observed)) / (
        1 + n_boot
    )
    ci, null_ci, beyond_ci = (percentile_interval(d[:, None], level) for d in (resampled, null, resampled - null))
    out.update(
        rho=float(observed),
        ci_low=float(ci[0][0]),
        ci_high=float(ci[1][0]),
        null_estimate=float(np.nanmean(null)),
        null_low=float(null_ci[0][0]),
        null_high=float(null_ci[1][0]),
        beyond=float(observed - np.nanmean(null)),
        beyond_low=float(beyond_ci[0][0]),
        beyond_high=float(beyond_ci[1][0]),
        p_permutation=float(p_value),
    )
    return out


def _depth_rho(delta: np.ndarray) -> float:
    """Spearman of a lens's mean ΔH with the block index over the blocks read (NaN for fewer than 3)."""
    if delta.shape[1] < MIN_BLOCKS:
        return np.nan
    return float(_row_spearman(delta.mean(0), np.arange(delta.shape[1], dtype=float)))


def _unreadable(n_blocks: int, n_rising: int, n_falling: int) -> str:
    """Why the schedule cannot be read over a block set (``""`` where it can)."""
    if n_blocks < MIN_BLOCKS:
        return f"{CANNOT_BE_READ}: {n_blocks} block(s) under the bar (a Spearman needs {MIN_BLOCKS})"
    missing = [p for p, n in ((EXPANSION, n_rising), (PRUNING, n_falling)) if n == 0]
    if missing:
        return f"{CANNOT_BE_READ}: no block under the bar that the logit lens reads as {' or '.join(missing)}"
    return ""


def agreement_table(
    readings: Mapping[str, tuple[np.ndarray, np.ndarray]],
    prompts: np.ndarray,
    schedule: pd.DataFrame,
    *,
    model: str,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """Per fitted lens and block set (:data:`BLOCK_SETS`), the two lenses' agreement (:data:`AGREEMENT_COLUMNS`).

    The blocks are every block from 1 (the study's variant), or those whose ΔH is under the fitted lens's bar; over
    the latter the schedule *cannot be read* (``reading``) with fewer than :data:`MIN_BLOCKS` blocks, or where none
    of them is one the logit lens reads as expansion (ΔH > 0) or none as pruning (ΔH < 0); the Spearman and its
    null are given wherever there are :data:`MIN_BLOCKS` blocks. Beside them, the simplest feature: each lens's
    Spearman with depth (the block index) over the same blocks (``depth_rho_*``). ``convergence_blocks`` names the
    logit lens's blocks whose ΔH is mostly its convergence (:func:`schedule_table`).

    Args:
        readings: As :func:`schedule_table` (the logit lens under ``"logit"``).
        prompts: Each token's held-out prompt.
        schedule: :func:`schedule_table` of these readings.
        model: The model.
        n_boot, seed: Bootstrap replicates and seed.
    """
    if LOGIT not in readings:
        raise ValueError(f"the agreement compares a fitted lens with the logit lens; {model!r} has none read")
    rows = schedule[schedule["model"] == model]
    logit_rows = rows[rows["lens"] == LOGIT].set_index("block").sort_index()
    logit_dh = np.diff(checked_reading(*readings[LOGIT], prompts)[1], axis=1)  # column j: block j + 1
    convergence = ", ".join(str(b) for b in logit_rows.index[logit_rows["convergence"].astype(bool)]) or "none"
    eligible = [int(b) for b in eligible_layers(len(logit_rows), ALL_BLOCKS)]
    out = []
    for lens, (kl, entropy) in readings.items():
        if lens == LOGIT:
            continue
        fitted_dh = np.diff(checked_reading(kl, entropy, prompts)[1], axis=1)
        under = rows[rows["lens"] == lens].set_index("block")["under_bar"].astype(bool)
        for label in BLOCK_SETS:
            blocks = eligible if label == EVERY else [b for b in eligible if under[b]]
            signs = logit_rows.loc[blocks, "delta_h"].to_numpy()
            n_rising, n_falling = int((signs > 0).sum()), int((signs < 0).sum())
            columns = [b - 1 for b in blocks]
            found = permutation_agreement(
                logit_dh[:, columns], fitted_dh[:, columns], prompts, n_boot=n_boot, seed=seed
            )
            out.append(
                {
                    "model": model,
                    "lens": lens,
                    "blocks": label,
                    "n_blocks": len(blocks),
                    "block_list": " ".join(str(b) for b in blocks),
                    "n_rising": n_rising,
                    "n_falling": n_falling,
                    **found,
                    # the simplest feature beside the null: does each lens's ΔH merely trend with depth there?
                    "depth_rho_logit": _depth_rho(logit_dh[:, columns]),
                    "depth_rho_fitted": _depth_rho(fitted_dh[:, columns]),
                    "null_name": PERMUTATION_NULL,
                    "n": len(prompts),
                    "n_prompts": len(np.unique(prompts)),
                    "convergence_blocks": convergence,
                    "reading": _unreadable(len(blocks), n_rising, n_falling),
                }
            )
    return pd.DataFrame(out, columns=list(AGREEMENT_COLUMNS))
