"""Layer-skip outcomes: which skip costs more, and what the study claims for which model.

The study does not say that skipping expansion layers always costs more.  It says that skipping
the layers of largest entropy increase (expansion) or decrease (pruning), against random skips,
has unequal cost, and names a direction for two cases: on Llama, skipping the single
largest-expansion layer collapses MMLU to chance; on Gemma-2-2B-it, pruning layers matter more.
So every comparison first gets one of three outcomes, decided on its own
(:func:`skip_outcome`, :func:`rank_outcome`), and only then a verdict, where the study named a
direction for this model (:func:`against_study`).  For any other model the row is an extension:
it reports the outcome and is counted apart.

Rules, fixed before any result is looked at:

Comparison of two skips (paired interval over questions of the first's accuracy minus the
second's; at ``k >= 2`` against random sets the interval also resamples the sets)
    ``undecided`` when the intact model is not above chance (nothing to lose); else
    ``{first} more critical`` when the interval lies below 0, ``{second} more critical`` when
    it lies above 0, ``no difference`` when it lies inside ``+-`` :data:`SKIP_MARGIN` (accuracy)
    or :data:`LOGPROB_MARGIN` (the gold letter's log-probability), else ``undecided``.
    Random baselines of fewer than :data:`MIN_RANDOM_SETS` sets at ``k >= 2`` are ``undecided``.
    The interval is the one at the row's Holm level (:class:`Family`): the comparisons of one
    claim on one model (every ``k``, variant, letter measure and statistic) are corrected together
    at a family-wise 5% (:mod:`entropy_lens.skipping.corrections`), so a direction is decided only
    where Holm's test rejects; the raw 95% interval is shown beside.

Collapse to chance (Llama: the accuracy with the top expansion block skipped, Wilson interval)
    ``reproduced`` when it rules out keeping :data:`COLLAPSE_MARGIN` above chance, ``not
    reproduced`` when it lies wholly above chance + :data:`COLLAPSE_MARGIN`, else ``inconclusive``.

Rank over blocks (Spearman of each eligible block's Delta H with the drop of the gold letter's
log-probability when it is skipped; bootstrap over evaluation and calibration questions; no claim of
the study's, so an extension row on every model)
    ``expansion more critical`` when the interval lies above 0, ``pruning more critical`` below
    0, ``no relation`` inside ``+-`` :data:`RHO_MARGIN`, else ``undecided``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from entropy_lens.skipping.conditions import EXPANSION, PRUNING, RANDOM
from entropy_lens.skipping.criticality import ACCURACY
from entropy_lens.verdicts import decision

# Accuracy (0-1): two skips whose difference lies inside +- this cost the same.
SKIP_MARGIN = 0.05
# The gold letter's log-probability (nats): the same for the paired log-probability rows.
LOGPROB_MARGIN = 0.10
# A rank correlation inside +- this across blocks is no relation.
RHO_MARGIN = 0.3
# Collapsed to chance: the skipped model keeps less than this above chance (accuracy, 0-1).
COLLAPSE_MARGIN = 0.10
# A random baseline at k >= 2 is a population of at least this many sets.
MIN_RANDOM_SETS = 20

NO_DIFFERENCE = "no difference"
NO_RELATION = "no relation"
UNDECIDED = "undecided"
# A rule that has no reading on this model (the fitted lens's schedule: no block of a phase under the KL bar).
CANNOT_BE_READ = "cannot be read"


def more_critical(kind: str) -> str:
    """The outcome naming ``kind`` as the costlier skip (``"expansion more critical"``)."""
    return f"{kind} more critical"


OUTCOMES = (
    more_critical(EXPANSION),
    more_critical(PRUNING),
    more_critical(RANDOM),
    NO_DIFFERENCE,
    NO_RELATION,
    UNDECIDED,
    CANNOT_BE_READ,
)


@dataclass(frozen=True)
class Family:
    """Where a comparison stands among its claim's comparisons (Holm within the claim, on one model).

    Attributes:
        interval: The estimate with its interval at the row's Holm level (it excludes 0 exactly where
            Holm rejects); not finite when the row has no test (a bootstrap without spread).
        p_holm: Holm-adjusted p-value.
        n_family: Comparisons corrected together.
        level: The interval's coverage.
    """

    interval: decision.Interval
    p_holm: float
    n_family: int
    level: float

    def text(self, scale: float, digits: int) -> str:
        return (
            f"Holm over {self.n_family} comparisons: p = {self.p_holm:.2g}, "
            f"{100 * self.level:.4g}% interval {self.interval.text(scale, digits)}"
        )


@dataclass(frozen=True)
class Outcome:
    """What a comparison found, and why."""

    outcome: str
    why: str

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def decided(self) -> bool:
        return self.outcome != UNDECIDED


def skip_outcome(
    difference: decision.Interval,
    *,
    first: str,
    second: str,
    margin: float,
    unit: str,
    n: int,
    intact: decision.Interval | None = None,
    chance: float = 0.25,
    n_sets: int | None = None,
    family: Family | None = None,
) -> Outcome:
    """Which of two skips costs more: ``difference`` = the first's score minus the second's (paired).

    Args:
        difference: Estimate and interval (accuracy 0-1, or nats).
        first: The first skip's kind (``expansion``, ``pruning``).
        second: The second skip's kind.
        margin: Half-width of "no difference" in the difference's unit.
        unit: How the difference is shown: ``"points"`` (accuracy x 100) or ``"nats"``.
        n: Paired questions.
        intact: The intact model's accuracy; at or below ``chance`` nothing can be lost.
        chance: Chance accuracy.
        n_sets: Random sets behind a random baseline at ``k >= 2`` (``None``: no population).
        family: The row's Holm correction within its claim; its interval decides, ``difference``'s
            (the raw 95%) is quoted beside.  ``None``: ``difference`` decides alone (a lone comparison).
    """
    unreadable = _unreadable(intact, chance, n_sets)
    if unreadable is not None:
        return unreadable
    if not difference.finite:
        return Outcome(UNDECIDED, "no paired difference")
    scale, digits = (100.0, 1) if unit == "points" else (1.0, 3)
    text = f"{first} - {second} {difference.text(scale, digits)} {unit}"
    if family is not None:
        text, difference, stopped = _corrected(text, difference, family, scale, digits)
        if stopped is not None:
            return stopped
    words = {
        more_critical(first): f"{text}: skipping {first} costs more",
        more_critical(second): f"{text}: skipping {second} costs more",
        NO_DIFFERENCE: f"{text} lies inside ±{margin * scale:g}",
        UNDECIDED: f"{text}: the interval includes 0",
    }
    return _three_outcomes(difference, first_below=True, margin=margin, n=n, words=words)


def _three_outcomes(
    value: decision.Interval, *, first_below: bool, margin: float, n: int, words: dict[str, str]
) -> Outcome:
    """One of ``words``' outcomes (outcome -> its ``why``, in this order): the first when ``value`` lies below 0
    (``first_below``; else above it), the second on the other side, the third (no difference) inside
    ``+-margin``, else the fourth (undecided) with the questions that would decide it."""
    names = list(words)
    sign = decision.Test(
        yes=(decision.Side(value, 0.0, above=not first_below),), no=(decision.Side(value, 0.0, above=first_below),)
    )
    band = decision.inside(value, margin)
    answer = sign.answer()
    if answer != decision.INCONCLUSIVE:
        outcome = names[0] if answer == decision.REPRODUCED else names[1]
        return Outcome(outcome, words[outcome])
    if band.answer() == decision.REPRODUCED:
        return Outcome(names[2], words[names[2]])
    # No difference needs both ends inside the band: it is reached at the later of the two (band.units).
    needed = min(sign.units(n), band.units(n))
    return Outcome(names[3], words[names[3]] + decision.undecided_text(needed, n, "questions"))


def _unreadable(intact: decision.Interval | None, chance: float, n_sets: int | None) -> Outcome | None:
    """An undecided outcome when nothing can be lost (intact at chance) or the random baseline is too thin."""
    if intact is not None and (not intact.finite or intact.low <= chance):
        return Outcome(UNDECIDED, f"intact model not above chance: accuracy {intact.text(100.0, 1)}%")
    if n_sets is not None and n_sets < MIN_RANDOM_SETS:
        return Outcome(UNDECIDED, f"random baseline of {n_sets} sets (a population needs {MIN_RANDOM_SETS})")
    return None


def _corrected(
    text: str, raw: decision.Interval, family: Family, scale: float, digits: int
) -> tuple[str, decision.Interval, Outcome | None]:
    """``(why, the interval that decides, an undecided outcome or None)`` of a row corrected within its claim."""
    if not family.interval.finite:
        return text, raw, Outcome(UNDECIDED, f"{text}: no test (the paired bootstrap has no spread)")
    text, corrected = f"{text}; {family.text(scale, digits)}", family.interval
    if raw.high < 0 < corrected.high or raw.low > 0 > corrected.low:
        return text, corrected, Outcome(UNDECIDED, f"{text}: the raw interval excludes 0, the corrected one does not")
    return text, corrected, None


def _value(rec: Mapping[str, Any], key: str) -> float:
    value = rec.get(key)
    return float(value) if value is not None and pd.notna(value) else math.nan


def family_of(rec: Mapping[str, Any]) -> Family | None:
    """A comparison row's Holm correction (:data:`~entropy_lens.skipping.corrections.HOLM_COLUMNS`), or
    ``None`` for a row written without one."""
    if "p_holm" not in rec:
        return None
    corrected = decision.Interval(_value(rec, "difference"), _value(rec, "holm_low"), _value(rec, "holm_high"))
    n_family = _value(rec, "n_family")
    size = int(n_family) if math.isfinite(n_family) else 0
    return Family(corrected, _value(rec, "p_holm"), size, _value(rec, "holm_level"))


def comparison_outcome(rec: Mapping[str, Any]) -> Outcome:
    """The outcome of one row of :func:`~entropy_lens.skipping.comparisons.skip_comparisons` (its raw interval
    quoted, its Holm-level interval deciding)."""
    accuracy, k = rec["statistic"] == ACCURACY, int(rec["k"])
    return skip_outcome(
        decision.Interval(_value(rec, "difference"), _value(rec, "ci_low"), _value(rec, "ci_high")),
        first=str(rec["first"]),
        second=str(rec["second"]),
        margin=SKIP_MARGIN if accuracy else LOGPROB_MARGIN,
        unit="points" if accuracy else "nats",
        n=int(rec["n"]),
        intact=decision.Interval(_value(rec, "intact"), _value(rec, "intact_low"), _value(rec, "intact_high")),
        chance=float(rec["chance"]),
        n_sets=int(rec["n_sets"]) if rec["second"] == RANDOM and k >= 2 else None,
        family=family_of(rec),
    )


def collapse(skipped: decision.Interval, *, intact: decision.Interval, chance: float, n: int) -> decision.Verdict:
    """Verdict on "skipping the single largest-expansion block collapses MMLU to chance"."""
    if not intact.finite or intact.low <= chance:
        return decision.Verdict(
            decision.INCONCLUSIVE, f"intact model not above chance: accuracy {intact.text(100.0, 1)}%"
        )
    if not skipped.finite:
        return decision.Verdict(decision.INCONCLUSIVE, "no skipped accuracy")
    bar = chance + COLLAPSE_MARGIN
    text = f"accuracy skipped {skipped.text(100.0, 1)}% (intact {intact.text(100.0, 1)}%, chance {100 * chance:.0f}%)"
    kept = f"{100 * COLLAPSE_MARGIN:.0f}"
    words = decision.Decision(
        reproduced=f"{{text}} rules out keeping {kept} points above chance",
        not_reproduced=f"{{text}} keeps more than {kept} points above chance",
        inconclusive=f"{{text}} straddles chance + {kept}",
    )
    test = decision.Test(yes=(decision.Side(skipped, bar, above=False),), no=(decision.Side(skipped, bar),))
    return decision.judge(test, n=n, unit="questions", words=words, text=text)


def rank_outcome(rho: decision.Interval, *, n: int, n_blocks: int) -> Outcome:
    """Across blocks: does the cost of skipping a block rise with its Delta H (expansion) or fall (pruning)?"""
    if not rho.finite or n_blocks < 3:
        return Outcome(UNDECIDED, f"not computed: {n_blocks} eligible blocks or no interval")
    text = f"Spearman rho {rho.text(1.0, 3)} over {n_blocks} blocks"
    words = {
        more_critical(EXPANSION): f"{text}: blocks that raise entropy cost more to skip",
        more_critical(PRUNING): f"{text}: blocks that lower entropy cost more to skip",
        NO_RELATION: f"{text} lies inside ±{RHO_MARGIN}",
        UNDECIDED: f"{text} includes 0",
    }
    return _three_outcomes(rho, first_below=False, margin=RHO_MARGIN, n=n, words=words)


def against_study(outcome: Outcome, expected: str) -> decision.Verdict:
    """A finding's verdict: ``reproduced`` when the decided outcome is the study's, ``not reproduced``
    when another outcome was decided, ``inconclusive`` when undecided."""
    if not outcome.decided:
        return decision.Verdict(decision.INCONCLUSIVE, outcome.why)
    if outcome.outcome == expected:
        return decision.Verdict(decision.REPRODUCED, outcome.why)
    return decision.Verdict(
        decision.NOT_REPRODUCED, f"{outcome.outcome}, where the study found {expected}: {outcome.why}"
    )


def drop_set(
    beyond: decision.Interval,
    *,
    margin: float,
    scale: float,
    intact: float | None,
    chance: float,
    n_sets: int,
    text: str,
) -> decision.Verdict:
    """Whether a pruning criterion's drop set keeps more than random ``k``-sets (an extension: holds or not).

    Args:
        beyond: The set's score minus one random set's, per replicate (accuracy 0-1, or nats).
        margin: "No better than random" rules out an excess of this.
        scale: How ``margin`` is shown (100 for accuracy points).
        intact: The intact model's accuracy (``None`` for a log-probability row): at or below ``chance``
            nothing can be kept.
        chance: Chance accuracy.
        n_sets: Random sets behind the baseline; fewer than :data:`MIN_RANDOM_SETS` leave it undecided.
        text: The set and its interval, as the ``why`` shows them.
    """
    if intact is not None and not intact > chance:
        return decision.Verdict(decision.INCONCLUSIVE, f"intact model not above chance: accuracy {100 * intact:.1f}%")
    if n_sets < MIN_RANDOM_SETS:
        return decision.Verdict(decision.INCONCLUSIVE, f"random baseline of {n_sets} sets (needs {MIN_RANDOM_SETS})")
    if reason := decision.degenerate(beyond):
        return decision.Verdict(decision.INCONCLUSIVE, f"not decided: {reason}")
    words = decision.Decision(
        reproduced="{text}: better than random",
        not_reproduced=f"{{text}}: no better than random by {margin * scale:g}",
        inconclusive=f"{{text}}: the interval straddles 0 and +{margin * scale:g}",
    )
    # n=0: its why names no units to decide (the random sets, not only the questions, set the spread).
    return decision.judge(decision.above(beyond, 0.0, margin=margin), n=0, unit="questions", words=words, text=text)
