"""Expansion and pruning under each lens: the model's schedule, or the lens's bias? Per block, ΔH beside the KL.

Read on the held-out questions of the lens corpus, at the tokens the held-out KL is measured on
(:func:`entropy_lens.lens.held_out.read_held_out`), each interval resampling held-out prompts (the unit sampled),
blocks fixed (for this model the blocks are the population). The rules were fixed in ``docs/verdicts.md`` first:

* :func:`schedule_table`: per lens and block, the mean entropy, ΔH_l = H_l - H_{l-1} (block 0 has none), the
  lens's held-out KL and its fall across the block; a block's KL is *under the bar* when its interval's upper end
  lies below :data:`KL_BAR` nats, and ΔH_l is under the bar when blocks ``l - 1`` and ``l`` both are (it reads
  both); a block's ΔH is *mostly convergence* where it is not under the bar and the lens's KL falls across the
  block by more than ``|ΔH|`` nats;
* :func:`choices_table`: each lens's expansion block (largest ΔH, where above 0) and pruning block (smallest,
  where below 0) among its eligible blocks under the bar, per variant of the skip experiment, beside its choice
  among every eligible block (the study's way); a phase none of whose blocks is under the bar *cannot be read*.

The two lenses' agreement over blocks is :mod:`entropy_lens.analysis.schedule_agreement`.
The schedule table is the per-block contract another analysis reads (:data:`SCHEDULE_COLUMNS`, one file per
model: ``results/lenses/{model}/schedule.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.intervals import cluster_sums, percentile_interval
from entropy_lens.skipping.conditions import EXPANSION, PRUNING, SELECTION_KINDS, VARIANTS, eligible_layers

LOGIT = "logit"
# A block's reading counts as the model's under a lens whose held-out KL's interval lies below this (nats).
KL_BAR = 2.0
# A Spearman needs this many blocks.
MIN_BLOCKS = 3
SCHEDULE_COLUMNS = (
    "model",
    "lens",
    "block",
    "depth",
    "entropy",
    "delta_h",
    "delta_h_low",
    "delta_h_high",
    "kl",
    "kl_low",
    "kl_high",
    "kl_drop",
    "block_under_bar",
    "under_bar",
    "convergence",
    "n_prompts",
    "n_tokens",
)
CHOICE_COLUMNS = (
    "model",
    "lens",
    "variant",
    "phase",
    "block",
    "delta_h",
    "delta_h_low",
    "delta_h_high",
    "kl_high",
    "n_under_bar",
    "every_block",
    "logit_block",
    "logit_every_block",
    "reading",
)
CANNOT_BE_READ = "cannot be read"


def checked_reading(kl: np.ndarray, entropy: np.ndarray, prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(kl, entropy)`` as float64 ``[n_tokens, L]`` arrays of one lens read on ``prompts``' tokens.

    Raises:
        ValueError: for other shapes, or non-finite values.
    """
    kl, entropy = np.asarray(kl, dtype=np.float64), np.asarray(entropy, dtype=np.float64)
    if kl.ndim != 2 or kl.shape != entropy.shape or np.shape(prompts) != kl.shape[:1] or kl.shape[1] < 2:
        raise ValueError(
            f"a lens's reading must be kl and entropy [n_tokens, L >= 2] with one prompt per token, got {kl.shape}, "
            f"{entropy.shape} and {np.shape(prompts)}"
        )
    if not (np.isfinite(kl).all() and np.isfinite(entropy).all()):
        raise ValueError("a lens's held-out reading holds non-finite values; read it again")
    return kl, entropy


def cluster_draws(values: np.ndarray, prompts: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot, K]`` bootstrap replicates of the token means of ``[n_tokens, K]`` values, resampling whole prompts
    (:func:`~entropy_lens.core.intervals.cluster_sums`: one resample for every column, so columns pair).

    Raises:
        ValueError: with fewer than two prompts.
    """
    values = np.asarray(values, dtype=np.float64)
    sums = cluster_sums([np.ones(len(values)), *values.T], np.asarray(prompts), n_boot=n_boot, seed=seed)
    if sums is None:
        raise ValueError("an interval over held-out prompts needs at least two of them")
    return (sums[1:] / sums[0]).T


def _lens_rows(
    model: str, lens: str, kl: np.ndarray, entropy: np.ndarray, prompts: np.ndarray, n_boot: int, seed: int
) -> pd.DataFrame:
    n_layers = kl.shape[1]
    delta = np.diff(entropy, axis=1)  # [n, L - 1]: ΔH of blocks 1..L-1
    draws = cluster_draws(np.concatenate([kl, delta], axis=1), prompts, n_boot=n_boot, seed=seed)
    low, high = percentile_interval(draws)
    kl_mean, delta_mean = kl.mean(0), np.concatenate([[np.nan], delta.mean(0)])
    kl_high = high[:n_layers]
    block_under = kl_high < KL_BAR
    under = np.concatenate([[False], block_under[:-1] & block_under[1:]])
    kl_drop = np.concatenate([[np.nan], -np.diff(kl_mean)])
    with np.errstate(invalid="ignore"):
        convergence = ~under & (kl_drop > np.abs(delta_mean))
    convergence[0] = False
    return pd.DataFrame(
        {
            "model": model,
            "lens": lens,
            "block": np.arange(n_layers),
            "depth": (np.arange(n_layers) + 1) / n_layers,
            "entropy": entropy.mean(0),
            "delta_h": delta_mean,
            "delta_h_low": np.concatenate([[np.nan], low[n_layers:]]),
            "delta_h_high": np.concatenate([[np.nan], high[n_layers:]]),
            "kl": kl_mean,
            "kl_low": low[:n_layers],
            "kl_high": kl_high,
            "kl_drop": kl_drop,
            "block_under_bar": block_under,
            "under_bar": under,
            "convergence": convergence,
            "n_prompts": len(np.unique(prompts)),
            "n_tokens": len(kl),
        }
    )


def schedule_table(
    readings: Mapping[str, tuple[np.ndarray, np.ndarray]], prompts: np.ndarray, *, model: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """One row per lens and block (:data:`SCHEDULE_COLUMNS`): ΔH beside the lens's held-out KL, on the same tokens.

    Args:
        readings: Lens name -> ``(kl, entropy)``, each ``[n_tokens, L]`` (nats), read on the same held-out tokens;
            the logit lens first.
        prompts: ``[n_tokens]`` each token's held-out prompt (the resampled unit).
        model: Label of the rows.
        n_boot, seed: Bootstrap replicates and seed.

    Raises:
        ValueError: for readings of other shapes or tokens, non-finite values, or fewer than two prompts.
    """
    n_boot = check_positive_int(n_boot, "n_boot")
    frames = []
    for lens, (kl, entropy) in readings.items():
        kl, entropy = checked_reading(kl, entropy, prompts)
        frames.append(_lens_rows(model, lens, kl, entropy, np.asarray(prompts), n_boot, seed))
    if len({len(f) for f in frames}) > 1:
        raise ValueError(f"the lenses of {model!r} were read on different numbers of blocks")
    return pd.concat(frames, ignore_index=True)[list(SCHEDULE_COLUMNS)]


def _choose(rows: pd.DataFrame, phase: str, blocks: Sequence[int]) -> int | None:
    """The block of largest (expansion) or smallest (pruning) ΔH among ``blocks`` (ties to the lower), or None."""
    pool = rows.set_index("block").loc[list(blocks), "delta_h"].dropna()
    if pool.empty:
        return None
    return int(pool.idxmax() if phase == EXPANSION else pool.idxmin())


def _choice(rows: pd.DataFrame, variant: str, phase: str) -> dict:
    """One lens's choice of one phase under one variant (see :func:`choices_table`)."""
    eligible = [int(b) for b in eligible_layers(len(rows), variant)]
    by_block = rows.set_index("block")
    under = [b for b in eligible if bool(by_block.loc[b, "under_bar"])]
    rising = [b for b in under if by_block.loc[b, "delta_h"] > 0] if phase == EXPANSION else []
    falling = [b for b in under if by_block.loc[b, "delta_h"] < 0] if phase == PRUNING else []
    block = _choose(rows, phase, rising or falling)
    if not under:
        reading = f"{CANNOT_BE_READ}: no block under the bar"
    elif block is None:
        reading = f"{CANNOT_BE_READ}: no block under the bar {'rises' if phase == EXPANSION else 'falls'}"
    else:
        reading = "chosen"
    picked = by_block.loc[block] if block is not None else None
    return {
        "variant": variant,
        "phase": phase,
        "block": block if block is not None else -1,
        **{c: float(picked[c]) if picked is not None else np.nan for c in ("delta_h", "delta_h_low", "delta_h_high")},
        "kl_high": float(picked["kl_high"]) if picked is not None else np.nan,
        "n_under_bar": len(under),
        "every_block": _choose(rows, phase, eligible),
        "reading": reading,
    }


def choices_table(schedule: pd.DataFrame, variants: Sequence[str] = VARIANTS) -> pd.DataFrame:
    """Per model, lens, variant and phase (:data:`CHOICE_COLUMNS`): the lens's block among its eligible blocks under
    the bar (``-1`` where the phase cannot be read), its choice among every eligible block (``every_block``: the
    study's way, the sign not looked at), and the logit lens's two choices beside (``logit_block``,
    ``logit_every_block``: what the skip experiment skips)."""
    rows = []
    for (model, lens), group in schedule.groupby(["model", "lens"], sort=False):
        group = group.sort_values("block")
        rows += [{"model": model, "lens": lens, **_choice(group, v, p)} for v in variants for p in SELECTION_KINDS]
    frame = pd.DataFrame(rows)
    logit = frame[frame["lens"] == LOGIT].set_index(["model", "variant", "phase"])
    keys = pd.MultiIndex.from_frame(frame[["model", "variant", "phase"]])
    frame["logit_block"] = logit["block"].reindex(keys).to_numpy()
    frame["logit_every_block"] = logit["every_block"].reindex(keys).to_numpy()
    return frame[list(CHOICE_COLUMNS)]
