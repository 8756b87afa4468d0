"""Fit quality of a lens: where it can be trusted.

Per block, the KL divergence from the model's own final distribution to the lens's distribution, on held-out
prompts the fit never saw (:func:`entropy_lens.lens.held_out.held_out_kls`). The estimate is the mean over
every held-out token; its interval resamples whole prompts (a cluster bootstrap), since a prompt's tokens are
not independent. The final block reads the model's own logits under every kind, so its KL is 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.intervals import cluster_bootstrap_mean

COLUMNS = ("model", "kind", "block", "depth", "kl", "ci_low", "ci_high", "n_prompts", "n_tokens")


def kl_by_block(kl: np.ndarray, prompts: np.ndarray, *, model: str, kind: str, n_boot: int, seed: int) -> pd.DataFrame:
    """One row per block: mean held-out KL (nats) over tokens, its 95% interval over prompts, and the counts.

    Args:
        kl: ``[n_tokens, L]`` KL per token and block.
        prompts: ``[n_tokens]`` the prompt of each token (the resampled unit).
        model, kind: Labels of the rows.
        n_boot, seed: Bootstrap replicates and seed.

    Raises:
        ValueError: for a ``kl`` that is not ``[n_tokens, L]`` with one prompt per token, or holds NaN.
    """
    kl, prompts = np.asarray(kl, dtype=np.float64), np.asarray(prompts)
    if kl.ndim != 2 or prompts.shape != kl.shape[:1] or not len(kl):
        raise ValueError(f"kl must be [n_tokens, L] with one prompt per token, got {kl.shape} and {prompts.shape}")
    if not np.isfinite(kl).all():
        raise ValueError(f"kl of {model!r} ({kind}) holds {int((~np.isfinite(kl)).sum())} non-finite values")
    n_layers = kl.shape[1]
    rows = []
    for block in range(n_layers):
        low, high = cluster_bootstrap_mean(kl[:, block], prompts, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "model": model,
                "kind": kind,
                "block": block,
                "depth": (block + 1) / n_layers,
                "kl": float(kl[:, block].mean()),
                "ci_low": low,
                "ci_high": high,
                "n_prompts": len(np.unique(prompts)),
                "n_tokens": len(kl),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def lens_fit_table(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The fit-quality rows of every model and kind, one row per (model, kind, block), in that order.

    A kind measured by several jobs of one model (the logit lens beside each fitted kind) is kept once;
    the copies must agree.

    Raises:
        ValueError: for a frame without the columns of :func:`kl_by_block`, or copies that disagree.
    """
    for frame in frames:
        missing = set(COLUMNS) - set(frame.columns)
        if missing:
            raise ValueError(f"a fit-quality frame lacks the columns {sorted(missing)}")
    table = pd.concat([frame[list(COLUMNS)] for frame in frames], ignore_index=True)
    keys = ["model", "kind", "block"]
    spread = table.groupby(keys)["kl"].agg(lambda values: values.max() - values.min())
    if (spread > 1e-6 * (1 + table["kl"].abs().max())).any():
        bad = spread[spread > 0].index[0]
        raise ValueError(f"the held-out KL of {bad} differs between the jobs that measured it")
    return table.drop_duplicates(keys).sort_values(keys, kind="stable").reset_index(drop=True)
