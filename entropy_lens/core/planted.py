"""The planted-null rate: how often a rule shows a statistic beyond its null on data drawn where the null holds.

Every claim's null is checked the same way: ``draws`` synthetic data sets are drawn on the claim's design with the
claim false, each is read by the statistic's own code, and the one decision of the verdicts
(:func:`entropy_lens.verdicts.decision.beyond_null`) says whether it is shown beyond its null; the rate is the
share of draws it is.  ``core`` imports nothing above it, so the caller hands that decision in as ``shown``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from entropy_lens.core.checks import check_positive_int

# What most simulators draw: a statistic's excess over its null with its interval, (estimate, low, high).
Excess = tuple[float, float, float]
# The decision on an excess: shown beyond its null?
Shown = Callable[[Excess], bool]
Drawn = TypeVar("Drawn")


def planted_rate(
    simulate: Callable[[np.random.Generator, int], Drawn], shown: Callable[[Drawn], bool], *, draws: int, seed: int
) -> float:
    """Share of ``draws`` planted data sets whose statistic ``shown`` calls beyond its null.

    Args:
        simulate: ``(rng, draw) -> what shown reads`` for draw ``0 .. draws - 1``; one generator (seeded by
            ``seed``) runs through every draw, and ``draw`` may seed a draw's own bootstrap.
        shown: The decision, e.g. the excess's interval read by ``beyond_null``.
        draws: Planted data sets.
        seed: Seed of the generator.

    Returns:
        The share in ``[0, 1]``.
    """
    draws = check_positive_int(draws, "draws")
    rng = np.random.default_rng(seed)
    return sum(bool(shown(simulate(rng, draw))) for draw in range(draws)) / draws
