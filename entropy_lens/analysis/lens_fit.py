"""Fit quality of a lens: where it can be trusted, and what it read on the held-out tokens.

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


# What a fit job read on the held-out tokens, one row per lens, corpus size, token and block: the learning curve and
# the schedule under both lenses are computed from it (entropy_lens.analysis.lens_curve, .schedule).
READING_COLUMNS = ("lens", "fit_prompts", "fit_tokens", "token", "prompt", "block", "kl", "entropy")


def readings_frame(
    kl: np.ndarray, entropy: np.ndarray, prompts: Sequence[str], *, lens: str, fit_prompts: int, fit_tokens: int
) -> pd.DataFrame:
    """One lens's held-out reading as tidy rows (:data:`READING_COLUMNS`; the logit lens has a size of 0).

    Args:
        kl, entropy: ``[n_tokens, L]`` nats.
        prompts: ``[n_tokens]`` each token's held-out prompt (its id).
        lens: The lens kind.
        fit_prompts, fit_tokens: The corpus prefix it was fitted on.
    """
    kl, entropy = np.asarray(kl, dtype=np.float64), np.asarray(entropy, dtype=np.float64)
    if kl.ndim != 2 or kl.shape != entropy.shape or len(prompts) != len(kl):
        raise ValueError(f"need kl and entropy [n_tokens, L] and one prompt per token, got {kl.shape}, {entropy.shape}")
    n, n_layers = kl.shape
    return pd.DataFrame(
        {
            "lens": lens,
            "fit_prompts": fit_prompts,
            "fit_tokens": fit_tokens,
            "token": np.repeat(np.arange(n), n_layers),
            "prompt": np.repeat(np.asarray(prompts).astype(str), n_layers),
            "block": np.tile(np.arange(n_layers), n),
            "kl": kl.ravel(),
            "entropy": entropy.ravel(),
        }
    )[list(READING_COLUMNS)]


def reading_arrays(frame: pd.DataFrame, lens: str, fit_prompts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(kl, entropy, prompts)`` of one lens and size back from :func:`readings_frame`'s rows (tokens in order).

    Raises:
        ValueError: naming the lens and size where the rows hold none, or not every block of every token.
    """
    rows = frame[(frame["lens"] == lens) & (frame["fit_prompts"] == fit_prompts)]
    if rows.empty:
        raise ValueError(f"no held-out reading of the {lens} lens on {fit_prompts} prompts; it has {sizes(frame)}")
    wide = rows.pivot(index="token", columns="block", values=["kl", "entropy"]).sort_index()
    if wide.isna().any().any():
        raise ValueError(f"the {lens} lens's reading ({fit_prompts} prompts) lacks some token's block")
    prompts = rows.drop_duplicates("token").set_index("token").loc[wide.index, "prompt"].to_numpy()
    return wide["kl"].to_numpy(float), wide["entropy"].to_numpy(float), prompts


def sizes(frame: pd.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """Per lens, the ``(fit_prompts, fit_tokens)`` of its readings, increasing."""
    found = frame[["lens", "fit_prompts", "fit_tokens"]].drop_duplicates().sort_values(["lens", "fit_prompts"])
    return {str(lens): list(zip(g["fit_prompts"].astype(int), g["fit_tokens"].astype(int), strict=True))
            for lens, g in found.groupby("lens", sort=False)}  # fmt: skip


def final_readings(
    frames: Sequence[pd.DataFrame],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Each lens's reading fitted on its whole corpus (its largest size), from one model's fit jobs: the logit lens
    once (every job reads it on the same tokens; the copies must agree), then each fitted kind.

    Returns:
        ``({lens: (kl, entropy)}, prompts)``: ``[n_tokens, L]`` arrays and each token's held-out prompt.

    Raises:
        ValueError: for frames without :data:`READING_COLUMNS`, or logit-lens copies that disagree.
    """
    readings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    prompts = None
    for frame in frames:
        missing = set(READING_COLUMNS) - set(frame.columns)
        if missing:
            raise ValueError(f"a held-out reading lacks the columns {sorted(missing)}; write it with readings_frame")
        for lens, found in sizes(frame).items():
            kl, entropy, owners = reading_arrays(frame, lens, found[-1][0])
            if lens in readings:
                if not np.allclose(readings[lens][0], kl, rtol=1e-6, atol=1e-6):
                    raise ValueError(f"the {lens} lens's held-out KL differs between the jobs that read it")
                continue
            if prompts is not None and not np.array_equal(prompts, owners):
                raise ValueError("the lenses were read on different held-out tokens")
            readings[lens], prompts = (kl, entropy), owners
    if prompts is None:
        raise ValueError("no held-out reading given")
    ordered = dict(sorted(readings.items(), key=lambda item: item[0] != "logit"))  # the logit lens first
    return ordered, prompts
