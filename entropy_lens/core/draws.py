"""How many planted draws a rule's rate needs: enough that its Wilson upper bound is small, in batches.

A planted-null rate is the share of draws a rule calls "beyond its null" where the null holds.  Its Wilson 95%
upper bound must be at most :data:`MAX_RATE_HIGH` (docs/verdicts.md, "Planted nulls on the row's own design"):
:data:`MIN_DRAWS` draws first (0 of 45 has the bound 0.079), then batches of as many more while the bound stays
above it, at most :data:`MAX_DRAWS`.  ``core`` judges nothing: the caller hands in the decision on one draw
(``shown``), as :func:`entropy_lens.core.planted.planted_rate` takes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from entropy_lens.core.intervals import wilson_interval

MIN_DRAWS = 45
MAX_DRAWS = 400
MAX_RATE_HIGH = 0.08
# The decision on one draw's row: is it shown beyond its null?
Shown = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class DrawSettings:
    """How many draws a rate takes (see the module docstring).

    Attributes:
        min_draws: Draws of the first batch, and of every further batch.
        max_draws: The most draws of one rate.
        max_rate_high: Stop once the Wilson upper bound of the shown rate is at most this.
        seed: Seed of the draws.
    """

    min_draws: int = MIN_DRAWS
    max_draws: int = MAX_DRAWS
    max_rate_high: float = MAX_RATE_HIGH
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.min_draws <= self.max_draws:
            raise ValueError(f"need 1 <= min_draws <= max_draws, got {self.min_draws} and {self.max_draws}")
        if not 0 < self.max_rate_high < 1:
            raise ValueError(f"max_rate_high must lie in (0, 1), got {self.max_rate_high!r}")


def wilson_high(shown: int, draws: int) -> float:
    """The Wilson 95% upper bound of ``shown`` of ``draws``."""
    return wilson_interval(shown, draws)[1]


def adaptive_draws(
    draw: Callable[[int], Sequence[Mapping[str, Any]]], shown: Shown | None, settings: DrawSettings
) -> Iterator[dict[str, Any]]:
    """Draws ``draw(0), draw(1), ...`` until every rate's bound is met.

    A draw may read several statistics at once (the overlap's Jaccard and containments): ``draw(i)`` gives one
    row per statistic, in the same order every time, and each position has its own rate; the draws go on until
    the bound of every one is met.

    Args:
        draw: One planted draw's rows by its index.
        shown: The decision on a row; ``None`` takes ``settings.min_draws`` draws.
        settings: How many.

    Yields:
        ``{"draw": index, **row}`` per row of each draw.
    """
    taken, n_shown = 0, Counter()
    while taken < settings.max_draws:
        for _ in range(min(settings.min_draws, settings.max_draws - taken)):
            for position, row in enumerate(draw(taken)):
                n_shown[position] += bool(shown(row)) if shown is not None else 0
                yield {"draw": taken, **row}
            taken += 1
        if shown is None or all(wilson_high(n, taken) <= settings.max_rate_high for n in [0, *n_shown.values()]):
            return
