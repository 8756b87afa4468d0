"""Planted-true data for the Spearman of ``Delta H`` with the nucleus-size change: the claim true by construction.

The study reads a rising entropy as the candidate set expanding and a falling one as it being pruned.  Here that
holds by construction: every prompt (and token slot) keeps **one persistent shortlist**, a logit vector whose
ranking never changes over depth, and each layer reads it at its own inverse temperature, so every layer's top-p
set is a prefix of the same ranking (the sets are nested) and entropy and nucleus size grow and shrink together as
the temperature walks over depth.  **Prompts differ in level** (each its own log inverse temperature, over the
range the planted nulls use: entropies from near ``log V`` to under a nat), as the real cells do.

The cross-prompt null pairs layer ``l`` of a prompt with layer ``l + 1`` of its partner, which keeps those level
differences; where they dominate, the null's Spearman is as high as the observed one even though every prompt
keeps its shortlist.  :func:`spearman_true_rate` reads each draw's excess with the table's own
:func:`~entropy_lens.analysis.expansion.nulls.spearman_null` and counts the draws the verdicts' decision, handed in
(:mod:`entropy_lens.verdicts.mechanical`), shows beyond it.
"""

from __future__ import annotations

import numpy as np

from entropy_lens.analysis.expansion import nulls
from entropy_lens.analysis.expansion.planted import (
    LOG_SCALE,
    PLANTED_LAYERS,
    PLANTED_TOKENS,
    PLANTED_TOP_P,
    PLANTED_VOCAB,
)
from entropy_lens.core.intervals import DEFAULT_N_BOOT
from entropy_lens.core.planted import Excess, Shown, planted_rate

# The log inverse temperature walks over depth by steps of this standard deviation: each prompt's shortlist grows
# and shrinks by a fraction of the spread between prompts' levels (LOG_SCALE).
DEPTH_STEP = 0.3


def planted_true_logits(rng: np.random.Generator, n_prompts: int) -> np.ndarray:
    """``[P, T, L, V]`` float32 logits: one persistent ranking per (prompt, token), read at a temperature that
    walks over depth from the prompt's own level."""
    z = rng.standard_normal((n_prompts, PLANTED_TOKENS, 1, PLANTED_VOCAB))  # the shortlist: one ranking per cell
    level = rng.uniform(*LOG_SCALE, size=(n_prompts, 1, 1, 1))
    walk = np.cumsum(rng.normal(0.0, DEPTH_STEP, size=(n_prompts, PLANTED_TOKENS, PLANTED_LAYERS, 1)), axis=2)
    return (z * np.exp(level + walk)).astype(np.float32)


def spearman_true_rate(
    n_prompts: int, draws: int = 100, seed: int = 0, *, shown: Shown, n_boot: int = DEFAULT_N_BOOT
) -> float:
    """Share of planted-true draws whose Spearman ``shown`` calls beyond its cross-prompt null.

    Args:
        n_prompts: Prompts per draw (the bootstrap's unit), ``>= 2``.
        draws: Planted stores.
        seed: Seed of the logits (draw ``d``'s bootstrap is seeded ``d``).
        shown: ``(beyond, beyond_low, beyond_high) -> bool``: the verdicts' decision on the excess
            (:func:`entropy_lens.core.planted.planted_rate`).
        n_boot: Bootstrap replicates of each interval (:func:`~entropy_lens.analysis.expansion.nulls.spearman_null`,
            the table's own).
    """
    if n_prompts < 2:
        raise ValueError(f"a planted-true draw needs >= 2 prompts (one partner each), got {n_prompts}")
    partner = np.roll(np.arange(n_prompts), -1)  # every prompt is its own source: the next one is another's

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        entropy, size = entropy_and_sizes(planted_true_logits(rng, n_prompts))
        row = nulls.spearman_null(entropy, size, partner, nulls.RECORDED, n_boot=n_boot, seed=draw)
        return float(row["beyond"]), float(row["beyond_low"]), float(row["beyond_high"])

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def entropy_and_sizes(logits: np.ndarray, top_p: float = PLANTED_TOP_P) -> tuple[np.ndarray, np.ndarray]:
    """``([P, T, L], [P, T, L])`` Shannon entropy (nats) and top-p set size of ``[P, T, L, V]`` logits, by the
    lens's own :func:`~entropy_lens.lens.metrics.row_metrics` (torch, imported here: a table job that never draws
    loads none)."""
    import torch

    from entropy_lens.lens import metrics

    *shape, vocab = logits.shape
    rm = metrics.row_metrics(torch.from_numpy(logits.reshape(-1, vocab)), top_p=top_p, alphas=(1.0,))
    return rm.entropy.reshape(shape).numpy(), rm.nucleus_size.reshape(shape).numpy().astype(np.int32)
