"""Planted nulls the verdicts own: a share at its bar, an accuracy at its bar, a statistic with no structure, and
the decision every planted draw is counted by.

A claim whose analysis has a null of its own names that analysis's draws or simulator (kNN, expansion, the
layer-skip experiment); these serve the claims whose null is a fixed bar (chance, the majority letter, the
no-signal classifier) or no structure (a gap of 0), each at the row's own bar and through the row's own interval.
Each draw is read by the one decision (:func:`shown_excess`: :func:`entropy_lens.verdicts.decision.beyond_null`)
through :func:`entropy_lens.core.planted.planted_rate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.core.intervals import cluster_bootstrap_mean, wilson_interval
from entropy_lens.core.planted import Excess, planted_rate
from entropy_lens.verdicts import decision
from entropy_lens.verdicts.decision import NULL_MARGINS

DEFAULT_DRAWS = 100
# Bootstrap replicates of each planted draw of a mean (fewer than a table's: the rate needs many draws).
PLANTED_N_BOOT = 400
# The words a planted draw counts as "beyond its null": an excess called negligible still claims one above 0.
SHOWN_WORDS = (decision.SHOWN, decision.SHOWN_NEGLIGIBLE)


def shown_excess(excess: Excess, *, margin: float) -> bool:
    """Whether the one decision (:func:`~entropy_lens.verdicts.decision.beyond_null` at ``margin``) calls a
    statistic's excess ``(estimate, low, high)`` over its null shown (:data:`SHOWN_WORDS`): what every planted
    rate counts."""
    null = decision.Null("planted", decision.Interval(0.0, 0.0, 0.0), decision.Interval(*excess), margin=margin)
    return decision.beyond_null(null, n=0, unit="units").word in SHOWN_WORDS


def draw_shown(margin: float) -> Callable[[Mapping[str, Any]], bool]:
    """The decision on one planted draw's row (its ``beyond``, ``beyond_low``, ``beyond_high``) at ``margin``: the
    ``shown`` an analysis job hands :func:`entropy_lens.core.draws.adaptive_draws`."""

    def shown(row: Mapping[str, Any]) -> bool:
        return shown_excess((float(row["beyond"]), float(row["beyond_low"]), float(row["beyond_high"])), margin=margin)

    return shown


def planted_share_at_bar(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0, *, bar: float = 0.25) -> float:
    """A share (accuracy, held-out share) whose true value is its bar: binomial draws at ``bar``, Wilson
    interval, the fixed-bar null (:func:`~entropy_lens.verdicts.decision.fixed_null`: the share minus the bar)."""
    units = max(n, 1)

    def simulate(rng: np.random.Generator, _: int) -> Excess:
        hits = rng.binomial(units, bar)
        low, high = wilson_interval(int(hits), units)
        return hits / units - bar, low - bar, high - bar

    return planted_rate(
        simulate, lambda excess: shown_excess(excess, margin=NULL_MARGINS["share"]), draws=draws, seed=seed
    )


def planted_zero_mean(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0) -> float:
    """A gap or shape statistic with no structure: per-unit values of mean 0, the prompt-cluster bootstrap
    of their mean (the interval the gap and shape rules read), null 0."""

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        values = rng.standard_normal(max(n, 2))
        low, high = cluster_bootstrap_mean(values, np.arange(values.size), n_boot=PLANTED_N_BOOT, seed=draw)
        return float(values.mean()), low, high

    return planted_rate(
        simulate, lambda excess: shown_excess(excess, margin=NULL_MARGINS["gap"]), draws=draws, seed=seed
    )


def planted_accuracy_at_bar(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0, *, bar: float, styles: int = 1) -> float:
    """An MMLU accuracy whose true value is its bar, through the row's own interval: one style, ``n`` questions
    answered right at ``bar`` and the Wilson interval; pooled over ``styles`` styles, each of ``n`` questions'
    prompts right at ``bar`` and the bootstrap over questions (:func:`entropy_lens.answers.accuracy.accuracy_table`'s
    intervals), the fixed-bar null at the accuracy margin."""
    if styles <= 1:
        return planted_share_at_bar(n, draws, seed, bar=bar)
    questions = max(n, 2)

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        right = (rng.uniform(size=(questions, styles)) < bar).astype(float).ravel()
        clusters = np.repeat(np.arange(questions), styles)
        low, high = cluster_bootstrap_mean(right, clusters, n_boot=PLANTED_N_BOOT, seed=draw)
        return float(right.mean()) - bar, low - bar, high - bar

    return planted_rate(
        simulate, lambda excess: shown_excess(excess, margin=NULL_MARGINS["accuracy"]), draws=draws, seed=seed
    )


def planted_models_at_bar(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0, *, bar: float) -> float:
    """The held-out family's claim row where no model falls in its own family beyond the bar: each of ``n``
    held-out models does with probability ``bar``, the exact (Clopper-Pearson) interval over models, the
    fixed-bar null at the share margin."""
    models = max(n, 1)

    def simulate(rng: np.random.Generator, _: int) -> Excess:
        hits = int(rng.binomial(models, bar))
        ci = stats.binomtest(hits, models).proportion_ci(confidence_level=0.95, method="exact")
        return hits / models - bar, float(ci.low) - bar, float(ci.high) - bar

    return planted_rate(
        simulate, lambda excess: shown_excess(excess, margin=NULL_MARGINS["share"]), draws=draws, seed=seed
    )


# A planted-null simulator: (units, draws, seed) -> share of draws shown beyond the null.
Planted = Callable[[int, int, int], float]


def accuracy_at_row(rec: Mapping[str, Any]) -> tuple[Planted, tuple]:
    """MMLU accuracy at the row's own bar (its null's value) through the row's own interval: Wilson per style,
    the bootstrap over questions for the row pooled over styles (``n`` prompts of ``n_sources`` questions)."""
    bar = float(rec["null_estimate"])
    n, questions = (int(rec[c]) if pd.notna(rec[c]) else 0 for c in ("n", "n_sources"))
    styles = max(round(n / questions), 1) if str(rec["split"]) == ALL_STYLES and questions else 1
    return partial(planted_accuracy_at_bar, bar=bar, styles=styles), (bar, styles)


def models_at_row(rec: Mapping[str, Any]) -> tuple[Planted, tuple]:
    """The held-out family's claim row at its own bar (its null's value), over its held-out models."""
    bar = float(rec["null_estimate"])
    return partial(planted_models_at_bar, bar=bar), (bar,)
