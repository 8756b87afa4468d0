"""Planted nulls the verdicts own: a share at its bar and a statistic with no structure.

A claim whose analysis has a null of its own names that analysis's simulator (kNN, expansion, the layer-skip
experiment); these two serve the claims whose null is a fixed bar (chance, the majority letter, a share of 1/2)
or no structure (a gap of 0).  Each draw is read by the rule's own interval and the one decision
(:func:`entropy_lens.verdicts.decision.shown_beyond`) through :func:`entropy_lens.core.planted.planted_rate`.
"""

from __future__ import annotations

import numpy as np

from entropy_lens.core.intervals import cluster_bootstrap_mean, wilson_interval
from entropy_lens.core.planted import Excess, planted_rate
from entropy_lens.verdicts.decision import NULL_MARGINS, shown_beyond

DEFAULT_DRAWS = 100
# Bootstrap replicates of each planted draw of a mean (fewer than a table's: the rate needs many draws).
PLANTED_N_BOOT = 400


def planted_share_at_bar(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0, *, bar: float = 0.25) -> float:
    """A share (accuracy, held-out share) whose true value is its bar: binomial draws at ``bar``, Wilson
    interval, the fixed-bar null (:func:`~entropy_lens.verdicts.decision.fixed_null`: the share minus the bar)."""
    units = max(n, 1)

    def simulate(rng: np.random.Generator, _: int) -> Excess:
        hits = rng.binomial(units, bar)
        low, high = wilson_interval(int(hits), units)
        return hits / units - bar, low - bar, high - bar

    return planted_rate(
        simulate, lambda excess: shown_beyond(excess, margin=NULL_MARGINS["share"]), draws=draws, seed=seed
    )


def planted_zero_mean(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0) -> float:
    """A gap or shape statistic with no structure: per-unit values of mean 0, the prompt-cluster bootstrap
    of their mean (the interval the gap and shape rules read), null 0."""

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        values = rng.standard_normal(max(n, 2))
        low, high = cluster_bootstrap_mean(values, np.arange(values.size), n_boot=PLANTED_N_BOOT, seed=draw)
        return float(values.mean()), low, high

    return planted_rate(
        simulate, lambda excess: shown_beyond(excess, margin=NULL_MARGINS["gap"]), draws=draws, seed=seed
    )
