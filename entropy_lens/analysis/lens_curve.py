"""The fitted lens's learning curve: held-out KL per block against the tokens it was fitted on, and whether it has
stopped improving.

The linear lens is solved at nested prefixes of its corpus that double in questions
(:func:`entropy_lens.lens.fitting.fit_linear_curve`), each read on the same held-out tokens. Per size,
:func:`curve_table` gives each block's mean KL with its interval over held-out prompts; :func:`plateau_table` the
curve's statistic, the mean over blocks (the final one, the model's own logits, left out), and the improvement of
each doubling, paired on the same tokens, with its interval resampling held-out prompts. The rule, fixed in
``docs/verdicts.md`` before any curve was read: the curve has **stopped improving** (:data:`PLATEAU`) when the
last doubling's improvement lies below :data:`PLATEAU_MARGIN` nats, is :data:`IMPROVING` when it lies above it,
else :data:`UNDECIDED`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.analysis.lens_fit import COLUMNS as KL_COLUMNS
from entropy_lens.analysis.lens_fit import kl_by_block, reading_arrays, sizes
from entropy_lens.core.intervals import cluster_bootstrap_mean

# The last doubling of the corpus improves the mean held-out KL over blocks by less than this (nats): stopped.
PLATEAU_MARGIN = 0.1
PLATEAU, IMPROVING, UNDECIDED = "plateau", "still improving", "undecided"
CURVE_COLUMNS = ("model", "kind", "fit_prompts", "fit_tokens", *KL_COLUMNS[2:])
PLATEAU_COLUMNS = (
    "model",
    "kind",
    "fit_prompts",
    "fit_tokens",
    "mean_kl",
    "mean_low",
    "mean_high",
    "improvement",
    "ci_low",
    "ci_high",
    "n_prompts",
    "reading",
)


def mean_over_blocks(kl: np.ndarray) -> np.ndarray:
    """``[n_tokens]`` each token's mean KL over every block but the final one (the model's own logits)."""
    kl = np.asarray(kl, dtype=np.float64)
    if kl.ndim != 2 or kl.shape[1] < 2:
        raise ValueError(f"kl must be [n_tokens, L] with L >= 2, got shape {kl.shape}")
    return kl[:, :-1].mean(axis=1)


def last_doubling(
    smaller: np.ndarray, larger: np.ndarray, prompts: np.ndarray, *, n_boot: int, seed: int
) -> tuple[float, float, float]:
    """How much a larger corpus improved the mean held-out KL over blocks: ``(estimate, low, high)`` nats of the
    smaller corpus's KL minus the larger's, paired on the same tokens, its interval resampling prompts.

    Raises:
        ValueError: for readings of different tokens or blocks.
    """
    smaller, larger = np.asarray(smaller, dtype=np.float64), np.asarray(larger, dtype=np.float64)
    if smaller.shape != larger.shape or np.shape(prompts) != smaller.shape[:1]:
        raise ValueError(
            f"the two sizes must be read on the same tokens and blocks, got {smaller.shape} and {larger.shape} "
            f"for {np.shape(prompts)} prompt labels"
        )
    gain = mean_over_blocks(smaller) - mean_over_blocks(larger)
    low, high = cluster_bootstrap_mean(gain, np.asarray(prompts), n_boot=n_boot, seed=seed)
    return float(gain.mean()), low, high


def plateau_reading(low: float, high: float, margin: float = PLATEAU_MARGIN) -> str:
    """:data:`PLATEAU` when the improvement's interval lies below ``margin``, :data:`IMPROVING` above it, else
    :data:`UNDECIDED` (also without an interval)."""
    if high < margin:
        return PLATEAU
    return IMPROVING if low > margin else UNDECIDED


def curve_table(
    kls: Sequence[np.ndarray],
    prompts: np.ndarray,
    sizes: Sequence[tuple[int, int]],
    *,
    model: str,
    kind: str,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """One row per corpus size and block: the held-out KL of the lens fitted on that prefix (:func:`kl_by_block`).

    Args:
        kls: Per size, ``[n_tokens, L]`` KL per held-out token and block.
        prompts: ``[n_tokens]`` each token's held-out prompt.
        sizes: Per size, ``(prompts, tokens)`` of the corpus prefix.
        model, kind: Labels of the rows.
        n_boot, seed: Bootstrap replicates and seed.
    """
    if len(kls) != len(sizes):
        raise ValueError(f"one reading per corpus size, got {len(kls)} readings for {len(sizes)} sizes")
    frames = [
        kl_by_block(kl, prompts, model=model, kind=kind, n_boot=n_boot, seed=seed).assign(
            fit_prompts=n_prompts, fit_tokens=n_tokens
        )
        for kl, (n_prompts, n_tokens) in zip(kls, sizes, strict=True)
    ]
    return pd.concat(frames, ignore_index=True)[list(CURVE_COLUMNS)]


def plateau_table(
    kls: Sequence[np.ndarray],
    prompts: np.ndarray,
    sizes: Sequence[tuple[int, int]],
    *,
    model: str,
    kind: str,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """One row per corpus size: the mean held-out KL over blocks with its interval, and the improvement over the
    size before (paired on the same tokens, :func:`last_doubling`) with its :func:`plateau_reading`; the first
    size has no improvement (NaN, :data:`UNDECIDED`). The last row's reading is the curve's.

    Arguments as :func:`curve_table`.
    """
    if len(kls) != len(sizes) or not kls:
        raise ValueError(f"one reading per corpus size, got {len(kls)} readings for {len(sizes)} sizes")
    prompts = np.asarray(prompts)
    rows = []
    for i, (kl, (n_prompts, n_tokens)) in enumerate(zip(kls, sizes, strict=True)):
        mean = mean_over_blocks(kl)
        low, high = cluster_bootstrap_mean(mean, prompts, n_boot=n_boot, seed=seed)
        gain = last_doubling(kls[i - 1], kl, prompts, n_boot=n_boot, seed=seed) if i else (np.nan,) * 3
        rows.append(
            {
                "model": model,
                "kind": kind,
                "fit_prompts": n_prompts,
                "fit_tokens": n_tokens,
                "mean_kl": float(mean.mean()),
                "mean_low": low,
                "mean_high": high,
                "improvement": gain[0],
                "ci_low": gain[1],
                "ci_high": gain[2],
                "n_prompts": len(np.unique(prompts)),
                "reading": plateau_reading(gain[1], gain[2]) if i else UNDECIDED,
            }
        )
    return pd.DataFrame(rows, columns=list(PLATEAU_COLUMNS))


def curve_tables(frame: pd.DataFrame, *, model: str, kind: str, n_boot: int, seed: int) -> tuple[pd.DataFrame, ...]:
    """:func:`curve_table` and :func:`plateau_table` of one fit job's held-out readings
    (:func:`~entropy_lens.analysis.lens_fit.readings_frame` rows of the kind at each corpus size)."""
    found = sizes(frame)[kind]
    arrays = [reading_arrays(frame, kind, n_prompts) for n_prompts, _ in found]
    kls, prompts = [kl for kl, _, _ in arrays], arrays[-1][2]
    boot = {"model": model, "kind": kind, "n_boot": n_boot, "seed": seed}
    return curve_table(kls, prompts, found, **boot), plateau_table(kls, prompts, found, **boot)
