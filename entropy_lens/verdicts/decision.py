"""The one decision every verdict rule makes: where does an interval lie against a bar?

A rule (:mod:`entropy_lens.verdicts.rules`, :mod:`entropy_lens.verdicts.outcomes`) states its statistic
and its bars once, as a :class:`Test`: the :class:`Side` s that must all hold for one answer
(``reproduced``) and those of which one suffices for the other (``not reproduced``).  :func:`judge` gives the
answer and its ``why``; where the interval is too wide, the ``why`` gives the units (questions, prompts,
sources, samples) that would decide it at the measured spread (:func:`units_to_decide`).  :func:`decide` is
the common case, an interval above a bar; :func:`beyond_null` reads the same test for a statistic's excess
over its null.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
# The start of the ``why`` of a claim the configuration did not measure.
NOT_RUN = "not run"
# The as-stated words a row's design or its null can force, whatever its interval (docs/verdicts.md, "The words"):
# a statistic its null cannot beat even when the claim holds, and a design that cannot test the claim at all.
MECHANICAL = "mechanical"
CANNOT_TEST = "cannot test"
# How a precondition's verdict reads: it is met or not, not reproduced.
PRECONDITION_WORDS = {REPRODUCED: "met", NOT_REPRODUCED: "not met", INCONCLUSIVE: "undecided"}
# How an extension's verdict reads: the study claims nothing there, so the rule holds or not.
EXTENSION_WORDS = {REPRODUCED: "holds", NOT_REPRODUCED: "does not hold", INCONCLUSIVE: "undecided"}

# Fewest independent sources (stories, topics, questions, samples) a verdict uses.
MIN_GROUPS = 6
# Beyond this many units the estimate is too close to a threshold for a number to mean much.
MAX_UNITS_TO_DECIDE = 10_000_000
# An interval narrower than this (relative to max(1, |estimate|)) has zero width: it decides nothing.
ZERO_WIDTH = 1e-9

# Beyond its null: the observed statistic minus the same statistic under a null computed in the same run.
SHOWN, NOT_SHOWN, UNDECIDED_BEYOND = "shown", "not shown", "undecided"
# An excess whose interval lies above 0 but wholly below the rule's margin.
SHOWN_NEGLIGIBLE = "shown, negligible"
BEYOND_WORDS = (SHOWN, NOT_SHOWN, UNDECIDED_BEYOND)
# Per statistic, the excess over the null below which a statistic shows nothing beyond it (fixed before any
# run read a null; docs/verdicts.md): AUC 5 points (as MIN_AUC_EFFECT), rho 0.1, containment 0.1, shares and
# accuracy 10 points (as MIN_ACCURACY_EFFECT), gaps 0 (their null is no structure: a gap of 0).
NULL_MARGINS = {"AUC": 0.05, "rho": 0.10, "containment": 0.10, "share": 0.10, "accuracy": 0.10, "gap": 0.0}


@dataclass(frozen=True)
class Verdict:
    """A verdict and the reason for it."""

    verdict: str
    why: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval (``low <= estimate <= high`` when finite)."""

    estimate: float
    low: float
    high: float

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.estimate, self.low, self.high))

    def text(self, scale: float = 1.0, digits: int = 1) -> str:
        """``"estimate [low, high]"`` scaled (e.g. by 100 for percent)."""
        if not self.finite:
            return "n/a"
        return f"{self.estimate * scale:.{digits}f} [{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"


def degenerate(value: Interval) -> str:
    """Why ``value``'s interval cannot decide anything (not finite, or of zero width), or ``""`` when it can.

    Two equal fold AUCs give ``50.0 [50.0, 50.0]``; a bootstrap whose every resample agrees gives a point:
    neither says how far the estimate could move, so no rule reads them.
    """
    if not value.finite:
        return "no interval"
    if value.high - value.low <= ZERO_WIDTH * max(1.0, abs(value.estimate)):
        return f"an interval of zero width ({value.text(1.0, 3)}) decides nothing"
    return ""


class Condition(Protocol):
    """Where an interval must lie for an answer, and the units that would put it there."""

    def holds(self) -> bool: ...

    def units(self, n: int) -> float: ...


@dataclass(frozen=True)
class Side:
    """``value`` lies wholly above ``bar`` (``above=True``: its low end) or wholly below it (its high end).

    ``closed``: an end on the bar itself counts (an interval touching ``+-margin`` lies outside the open
    band between them).
    """

    value: Interval
    bar: float
    above: bool = True
    closed: bool = False

    def holds(self) -> bool:
        end = self.value.low if self.above else self.value.high
        if self.closed:
            return end >= self.bar if self.above else end <= self.bar
        return end > self.bar if self.above else end < self.bar

    def units(self, n: int) -> float:
        return units_to_decide(self.value, n, [(self.bar, self.above)])


@dataclass(frozen=True)
class AboveRival:
    """``value`` lies wholly above ``rival``'s interval (a dummy classifier's), both narrowing with more units.

    With ``n'`` units both half-widths shrink by ``sqrt(n / n')``, so the two separate at about
    ``n * ((h_value + h_rival) / (value - rival)) ** 2`` units.
    """

    value: Interval
    rival: Interval

    def holds(self) -> bool:
        return self.value.low > self.rival.high

    def units(self, n: int) -> float:
        value, rival = self.value, self.rival
        if n < 1 or not value.finite or not rival.finite or value.estimate <= rival.estimate:
            return math.inf
        spread = value.estimate - value.low + rival.high - rival.estimate
        return _whole_units(n * (spread / (value.estimate - rival.estimate)) ** 2)


@dataclass(frozen=True)
class Test:
    """A three-way test: ``reproduced`` when every condition of ``yes`` holds, ``not reproduced`` when one of
    ``no`` does, else ``inconclusive``."""

    yes: tuple[Condition, ...]
    no: tuple[Condition, ...]

    def answer(self) -> str:
        if all(c.holds() for c in self.yes):
            return REPRODUCED
        if any(c.holds() for c in self.no):
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def units(self, n: int) -> float:
        """Units that would decide it at the measured spread: ``yes`` needs its slowest condition, ``no`` its
        fastest; the sooner of the two."""
        return min([max(c.units(n) for c in self.yes), *(c.units(n) for c in self.no)])


def above(value: Interval, bar: float, *, margin: float = 0.0) -> Test:
    """``reproduced`` above ``bar``; ``not reproduced`` when the interval's upper end lies below
    ``bar + margin`` (even an effect of ``margin`` is ruled out)."""
    return Test(yes=(Side(value, bar),), no=(Side(value, bar + margin, above=False),))


def inside(value: Interval, margin: float) -> Test:
    """``reproduced`` inside the open band ``+-margin`` (equivalence), ``not reproduced`` wholly outside it."""
    band = (Side(value, -margin), Side(value, margin, above=False))
    outside = (Side(value, margin, closed=True), Side(value, -margin, above=False, closed=True))
    return Test(yes=band, no=outside)


@dataclass(frozen=True)
class Decision:
    """How :func:`judge` words its three answers: ``{text}`` is the statistic with its interval."""

    reproduced: str
    not_reproduced: str
    inconclusive: str


def judge(test: Test, *, n: int, unit: str, words: Decision, text: str = "") -> Verdict:
    """The verdict of ``test`` in ``words``; an undecided one adds the units that would decide it.

    Args:
        test: The statistic's conditions.
        n: Units (prompts, questions, samples) behind the interval.
        unit: Their name.
        words: The ``why`` of each answer, formatted with ``text``.
        text: The statistic with its interval, as the ``why`` shows it.
    """
    answer = test.answer()
    if answer == INCONCLUSIVE:
        return Verdict(answer, words.inconclusive.format(text=text) + undecided_text(test.units(n), n, unit))
    return Verdict(answer, (words.reproduced if answer == REPRODUCED else words.not_reproduced).format(text=text))


def decide(
    value: Interval,
    *,
    bar: float,
    n: int,
    unit: str,
    words: Decision,
    margin: float = 0.0,
    min_n: int = MIN_GROUPS,
    text: str = "",
) -> Verdict:
    """The verdict of an interval that must lie above a bar (:func:`above`).

    ``inconclusive`` when the interval is degenerate (:func:`degenerate`) or rests on fewer than ``min_n``
    units; else :func:`judge` of :func:`above` ``(value, bar, margin=margin)``.

    Args:
        value: The statistic's estimate and 95% interval.
        bar: What the interval must lie above.
        n: Units (prompts, questions, samples) behind the interval.
        unit: Their name.
        words: The ``why`` of each answer, formatted with ``text``.
        margin: The smallest effect worth ruling out (0: the bar itself).
        min_n: Fewest units a verdict reads.
        text: The statistic with its interval, as the ``why`` shows it.
    """
    if reason := degenerate(value):
        return Verdict(INCONCLUSIVE, f"not decided: {reason}")
    if n < min_n:
        return Verdict(INCONCLUSIVE, f"only {n} {unit} (need {min_n})")
    return judge(above(value, bar, margin=margin), n=n, unit=unit, words=words, text=text)


def units_to_decide(value: Interval, n: int, decisions: Sequence[tuple[float, bool]]) -> float:
    """Units (questions, prompts, samples) that would decide a row at the measured spread.

    An interval's half-width shrinks as ``1 / sqrt(n)``: with estimate ``d``, the half ``h``
    of the interval facing a threshold ``t`` (``d - low`` when the interval must lie above
    ``t``, ``high - d`` below) and ``margin = |d - t|``, the row is decided at about
    ``n * (h / margin) ** 2`` units.  The smallest over the decisions reachable from ``d``.

    Args:
        value: Estimate and interval measured on ``n`` units.
        n: Units behind the interval.
        decisions: ``(threshold, above)``: the row is decided when the interval lies above
            (``above=True``) or below ``threshold``.

    Returns:
        Units needed, rounded up; ``inf`` when no decision is reachable (the estimate sits
        on every threshold) or the interval is not finite.
    """
    if n < 1 or not value.finite:
        return math.inf
    needed = []
    for threshold, above in decisions:
        margin = value.estimate - threshold if above else threshold - value.estimate
        half = value.estimate - value.low if above else value.high - value.estimate
        if margin > 0 and half >= 0:
            needed.append(n * (half / margin) ** 2)
    return _whole_units(min(needed)) if needed else math.inf


def _whole_units(units: float) -> float:
    """``units`` rounded up to a whole unit (rounded to 6 places first: 400.0000001 is 400)."""
    return float(math.ceil(round(units, 6)))


def undecided_text(needed: float, n: int, unit: str) -> str:
    """The sentence an interval too wide to decide adds to its ``why``."""
    if n < 1:
        return ""
    if not math.isfinite(needed) or needed > MAX_UNITS_TO_DECIDE:
        return f"; effect too small to decide: no feasible number of {unit} would (now {n})"
    return f"; effect too small to decide with {n} {unit}: about {needed:,.0f} would decide it at the measured spread"


def not_run(reason: str) -> Verdict:
    """An inconclusive verdict for a claim the configuration did not measure."""
    return Verdict(INCONCLUSIVE, f"{NOT_RUN}: {reason}")


@dataclass(frozen=True)
class Null:
    """A statistic under its null, computed in the same run on the same cells, and the excess over it.

    Attributes:
        name: What the null keeps and breaks (``"stratified dummy"``, ``"cross-prompt"``).
        value: The statistic under the null, with its interval (a fixed bar has ``low == high``).
        beyond: Observed minus null, with a paired interval over the claim's unit.
        margin: An excess below this shows nothing beyond the null (:data:`NULL_MARGINS`).
        bar: The study's bar for the statistic as stated (``None``: none): a null at or above it makes the
            stated verdict mechanical.
        instead: What tests the claim where this statistic is mechanical (said only then).
    """

    name: str
    value: Interval
    beyond: Interval
    margin: float = 0.0
    bar: float | None = None
    instead: str = ""


@dataclass(frozen=True)
class Beyond:
    """Beyond its null: :data:`SHOWN`, :data:`NOT_SHOWN` or :data:`UNDECIDED_BEYOND`, and why."""

    word: str
    why: str

    def __post_init__(self) -> None:
        if self.word not in BEYOND_WORDS:
            raise ValueError(f"beyond-null word must be one of {BEYOND_WORDS}, got {self.word!r}")


def beyond_null(null: Null, *, n: int, unit: str, scale: float = 1.0, digits: int = 3) -> Beyond:
    """Does the statistic clear what its null gives? ``shown`` when the paired excess's interval lies above 0,
    ``not shown`` when it rules out an excess of ``null.margin``, else ``undecided`` (also for a degenerate
    interval): :func:`decide`'s test with bar 0. Where the null alone reaches the study's bar, the ``why``
    says the stated verdict is mechanical.

    Args:
        null: The null, its value and the paired excess.
        n: Units behind the paired interval.
        unit: Their name.
        scale, digits: How the numbers are shown (100 and 1 for AUC points).
    """
    excess = f"observed - {null.name} null = {null.beyond.text(scale, digits)}"
    mechanical = ""
    if null.bar is not None and math.isfinite(null.value.estimate) and null.value.estimate >= null.bar:
        mechanical = (
            f"; the null alone gives {null.value.estimate * scale:.{digits}f}, at or above the study's bar "
            f"{null.bar * scale:g}: the stated statistic is mechanical here and cannot support the claim by itself"
        )
        mechanical += f"; {null.instead}" if null.instead else ""
    if reason := degenerate(null.beyond):
        return Beyond(UNDECIDED_BEYOND, f"not decided: {reason}{mechanical}")
    words = Decision(
        reproduced="{text} lies above 0",
        not_reproduced=f"{{text}} rules out an excess of {null.margin * scale:g}",
        inconclusive="{text} includes 0",
    )
    verdict = judge(above(null.beyond, 0.0, margin=null.margin), n=n, unit=unit, words=words, text=excess)
    word = {REPRODUCED: SHOWN, NOT_REPRODUCED: NOT_SHOWN, INCONCLUSIVE: UNDECIDED_BEYOND}[verdict.verdict]
    return Beyond(word, verdict.why + mechanical)


def shown_beyond(excess: tuple[float, float, float], *, margin: float = 0.0) -> bool:
    """Whether :func:`beyond_null` shows a statistic beyond its null, given its excess ``(estimate, low, high)``:
    the decision every planted-null rate counts (:func:`entropy_lens.core.planted.planted_rate`)."""
    null = Null("planted", Interval(0.0, 0.0, 0.0), Interval(*excess), margin=margin)
    return beyond_null(null, n=0, unit="units").word == SHOWN


def fixed_null(name: str, value: Interval, bar: float, *, margin: float) -> Null:
    """The null of a rule whose bar is itself the null (chance, the majority letter, no structure): the
    excess is the statistic's interval shifted by the bar."""
    beyond = Interval(value.estimate - bar, value.low - bar, value.high - bar)
    return Null(name, Interval(bar, bar, bar), beyond, margin=margin)
