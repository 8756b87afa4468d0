"""Verdict rules: does a claim of the study hold on these models, given our intervals?

Every finding gets one of :data:`VERDICTS` and a sentence saying why; a precondition reads the
same rule as ``met`` / ``not met`` / ``undecided`` (:data:`PRECONDITION_WORDS`); an extension (a
model or family the study made no claim about) reports what the rule found in words of its own
(:data:`EXTENSION_WORDS`, or a three-way outcome of :mod:`entropy_lens.verdicts.outcomes`).  The
rules are fixed here, before any result is looked at, and written out in the README:

Separability (task, scrambled control, format, MMLU correctness; kNN AUC under grouped folds
with its corrected resampled-t 95% interval)
    * ``inconclusive`` when the row could not be scored, or the study's ``k`` had to be
      capped (too few prompts), or the number of independent sources is below
      :data:`MIN_GROUPS`;
    * ``reproduced`` when the interval lies above both the dummy's interval and 0.5;
    * ``not reproduced`` when the interval's upper end is below
      ``0.5 + MIN_AUC_EFFECT``: even a small separability is ruled out;
    * ``inconclusive`` otherwise: the interval is too wide to decide.

Family held out across size (a leave-one-model-out kNN on blank prompts; :func:`held_out_family`)
    the share of the held-out model's samples classified as its own family (Wilson interval
    over samples) against the best a classifier without signal reaches.  With one model per
    family, the pooled blank-prompt kNN measures model identity, an extension.

Spearman of Delta H vs Delta nucleus size (prompt-cluster bootstrap 95% interval) and
adjacent-layer overlap (the mean overlap coefficient of adjacent top-p sets, prompt-cluster
bootstrap): :func:`above_threshold` with :data:`SPEARMAN_THRESHOLD` and
:data:`CONTAINMENT_THRESHOLD`.

MMLU accuracy, a precondition (Wilson 95% interval over questions) against the better of
chance and the majority-letter baseline
    ``met`` above it, ``not met`` when the interval rules out beating it by
    :data:`MIN_ACCURACY_EFFECT`, otherwise ``undecided``.

Rényi leaves the conclusions intact (:func:`renyi_equivalence`, :func:`renyi_summary`)
    per separability row decided under Shannon and per order, the paired fold-AUC
    difference from Shannon on identical folds: equivalent when its interval lies inside
    ``+-`` :data:`RENYI_MARGIN`.

Layer skipping: :mod:`entropy_lens.verdicts.outcomes` (three outcomes, the direction the study
states for the family it names).

Family shapes (:data:`SHAPE_CLAIMS`; statistics of the mean entropy profile against
normalized depth, each with a bootstrap 95% interval over sources)
    Each claim is a list of parts, each a statistic on one side of a bar.  A part
    *holds* when its interval lies on the claimed side, *fails* when it lies on the
    other side.  ``reproduced`` when every part holds; ``not reproduced`` when a part
    fails; otherwise ``inconclusive``; also ``inconclusive`` with fewer than
    :data:`MIN_GROUPS` sources or fewer than :data:`MIN_THIRD_LAYERS` layers in the first or
    middle third of depth.

Family, not size (per same-family pair; RMS distances of mean blank-prompt profiles on the
common depth grid, entropy divided by log V, bootstrap 95% interval over blank samples,
resampled within each model)
    ``gap`` = min over the pair's models and every model of another family of their distance,
    minus the pair's own distance.  ``reproduced`` above 0 (the pair is closer than any
    cross-family pair), ``not reproduced`` below 0, otherwise ``inconclusive``.

Size as resolution (per same-family pair)
    ``gap`` = the RMS difference of the two sizes aligned on absolute layer index minus the
    one aligned on normalized depth.  Same rule as above: above 0, normalized depth aligns
    them better.

An interval too wide to decide
    the ``why`` gives the number of units (questions, prompts, sources, samples) that would
    decide the row at the measured spread (:func:`units_to_decide`; for separability the
    dummy's interval narrows with the sources too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
# The start of the ``why`` of a claim the configuration did not measure.
NOT_RUN = "not run"
# How a precondition's verdict reads: it is met or not, not reproduced.
PRECONDITION_WORDS = {REPRODUCED: "met", NOT_REPRODUCED: "not met", INCONCLUSIVE: "undecided"}
# How an extension's verdict reads: the study claims nothing there, so the rule holds or not.
EXTENSION_WORDS = {REPRODUCED: "holds", NOT_REPRODUCED: "does not hold", INCONCLUSIVE: "undecided"}

CHANCE_AUC = 0.5
# A separability below 0.5 + this AUC is too small to call the claim reproduced.
MIN_AUC_EFFECT = 0.05
# Fewest independent sources (stories, topics, questions, samples) a separability verdict uses.
MIN_GROUPS = 6
# A "strong positive" rank correlation of Delta H with the nucleus-size change.
SPEARMAN_THRESHOLD = 0.5
# Rényi leaves a separability intact when its paired AUC difference from Shannon lies inside +- this.
RENYI_MARGIN = 0.05
# Beating the best constant answer by less than this is not knowing the subject.
MIN_ACCURACY_EFFECT = 0.10
# "Adjacent layers share most of their top-p sets": on average more than half of the smaller set
# lies in the other (the overlap coefficient |A & B| / min(|A|, |B|), which a growing set keeps at 1).
CONTAINMENT_THRESHOLD = 0.5
# A plateau: across the middle third of depth the mean profile's fitted line moves by less than
# this share of the profile's whole range (a straight line moves by about a third of it).
PLATEAU_DRIFT = 0.25
# Fewest layers in the first and in the middle third of depth for a shape to be read.
MIN_THIRD_LAYERS = 2
# A family gap (nats) above this is a same-family pair closer than every cross-family pair.
GAP_THRESHOLD = 0.0
# Beyond this many units the estimate is too close to a threshold for a number to mean much.
MAX_UNITS_TO_DECIDE = 10_000_000
# An interval narrower than this (relative to max(1, |estimate|)) has zero width: it decides nothing.
ZERO_WIDTH = 1e-9

# Beyond its null: the observed statistic minus the same statistic under a null computed in the same run.
SHOWN, NOT_SHOWN, UNDECIDED_BEYOND = "shown", "not shown", "undecided"
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


def _pct(interval: Interval) -> str:
    return interval.text(100.0, 1)


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


@dataclass(frozen=True)
class Decision:
    """How :func:`decide` words its three answers: ``{text}`` is the statistic with its interval."""

    above: str
    below: str
    between: str


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
    """The one three-way test of an interval against a bar that every "lies above" rule shares.

    ``inconclusive`` when the interval is degenerate (:func:`degenerate`) or rests on fewer than ``min_n``
    units; ``reproduced`` when it lies above ``bar``; ``not reproduced`` when its upper end lies below
    ``bar + margin`` (even an effect of ``margin`` is ruled out); else ``inconclusive`` with the units that
    would decide it at the measured spread.

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
    if value.low > bar:
        return Verdict(REPRODUCED, words.above.format(text=text))
    if value.high < bar + margin:
        return Verdict(NOT_REPRODUCED, words.below.format(text=text))
    decisions = [(bar, True), (bar + margin, False)]
    return Verdict(
        INCONCLUSIVE, words.between.format(text=text) + undecided_text(units_to_decide(value, n, decisions), n, unit)
    )


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
    interval). Where the null alone reaches the study's bar, the ``why`` says the stated verdict is mechanical.

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
    if null.beyond.low > 0:
        return Beyond(SHOWN, f"{excess} lies above 0{mechanical}")
    if null.beyond.high < null.margin:
        return Beyond(NOT_SHOWN, f"{excess} rules out an excess of {null.margin * scale:g}{mechanical}")
    needed = units_to_decide(null.beyond, n, [(0.0, True), (null.margin, False)])
    return Beyond(UNDECIDED_BEYOND, f"{excess} includes 0" + undecided_text(needed, n, unit) + mechanical)


def fixed_null(name: str, value: Interval, bar: float, *, margin: float) -> Null:
    """The null of a rule whose bar is itself the null (chance, the majority letter, no structure): the
    excess is the statistic's interval shifted by the bar."""
    beyond = Interval(value.estimate - bar, value.low - bar, value.high - bar)
    return Null(name, Interval(bar, bar, bar), beyond, margin=margin)


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


def separability(
    auc: Interval,
    dummy: Interval,
    *,
    k_used: int | None,
    k_study: int,
    n_groups: int,
    skipped: str = "",
    unit: str = "sources",
) -> Verdict:
    """Verdict on a kNN separability row (AUCs in 0-1; see the module docstring).

    ``unit`` names the independent sources (stories, questions, ...) in the ``why`` of an
    interval too wide to decide.
    """
    if skipped or not auc.finite or not dummy.finite:
        return Verdict(INCONCLUSIVE, f"not scored: {skipped or 'no interval'}")
    if k_used is not None and k_used < k_study:
        return Verdict(INCONCLUSIVE, f"too few prompts for the study's k={k_study} (k capped to {k_used})")
    if n_groups < MIN_GROUPS:
        return Verdict(INCONCLUSIVE, f"only {n_groups} independent sources (need {MIN_GROUPS})")
    if reason := degenerate(auc):
        return Verdict(INCONCLUSIVE, f"not decided: AUC {reason}")
    bar, effect = max(CHANCE_AUC, dummy.high), CHANCE_AUC + MIN_AUC_EFFECT
    if auc.low > bar:
        return Verdict(REPRODUCED, f"AUC {_pct(auc)} lies above the dummy {_pct(dummy)} and 50")
    if auc.high < effect:
        return Verdict(NOT_REPRODUCED, f"AUC {_pct(auc)} rules out AUC >= {100 * effect:.0f}")
    needed = _separability_units(auc, dummy, n_groups, effect)
    return Verdict(
        INCONCLUSIVE,
        f"AUC {_pct(auc)} overlaps the dummy {_pct(dummy)} or 50 and cannot rule out AUC >= {100 * effect:.0f}"
        + undecided_text(needed, n_groups, unit),
    )


def _separability_units(auc: Interval, dummy: Interval, n: int, effect: float) -> float:
    """Sources that would decide a separability row: :func:`units_to_decide`, with the dummy's
    interval narrowing too.

    ``reproduced`` needs ``auc.low`` above both 0.5 and ``dummy.high``.  With ``n'`` sources
    both half-widths shrink by ``sqrt(n / n')``, so the dummy bar is met at about
    ``n * ((h_auc + h_dummy) / (auc - dummy)) ** 2`` sources and the 0.5 bar as in
    :func:`units_to_decide`; the row needs the larger.  ``not reproduced`` needs the upper end
    below ``effect``; the smaller of the two decisions is returned.
    """
    if n < 1 or not auc.finite or not dummy.finite:
        return math.inf
    below = units_to_decide(auc, n, [(effect, False)])
    if auc.estimate <= max(dummy.estimate, CHANCE_AUC):
        return below
    over_dummy = n * ((auc.estimate - auc.low + dummy.high - dummy.estimate) / (auc.estimate - dummy.estimate)) ** 2
    above = max(_whole_units(over_dummy), units_to_decide(auc, n, [(CHANCE_AUC, True)]))
    return min(above, below)


def answers_at_chance(accuracy: Interval, chance: float, majority_share: float, majority_letter: str) -> Verdict | None:
    """Why MMLU correctness cannot be read from profiles, or ``None`` when it can.

    Correctness is only a label about knowledge when the model beats chance and does not
    answer one letter almost always.
    """
    if majority_share >= LETTER_BIAS_SHARE:
        return Verdict(
            INCONCLUSIVE,
            f"letter bias: '{majority_letter}' answered for {100 * majority_share:.0f}% of prompts, so correctness "
            "is where the gold letter falls",
        )
    if accuracy.finite and accuracy.low <= chance:
        return Verdict(INCONCLUSIVE, f"model at chance: accuracy {_pct(accuracy)} (chance {100 * chance:.0f})")
    return None


# A model answering one letter for at least this share of prompts is letter-biased.
LETTER_BIAS_SHARE = 0.75


def above_threshold(value: Interval, *, threshold: float, n: int, statistic: str, unit: str = "prompts") -> Verdict:
    """``reproduced`` when the interval lies above ``threshold``, ``not reproduced`` below it, else
    ``inconclusive``; also ``inconclusive`` with fewer than :data:`MIN_GROUPS` units or a degenerate interval.

    The rule of the Spearman row (``rho`` above :data:`SPEARMAN_THRESHOLD`) and of the overlap row
    (containment above :data:`CONTAINMENT_THRESHOLD`).
    """
    if not value.finite:
        return Verdict(INCONCLUSIVE, f"not computed: no {statistic} or too few {unit}")
    words = Decision(
        above=f"{{text}} lies above {threshold}",
        below=f"{{text}} lies below {threshold}",
        between=f"{{text}} straddles {threshold}",
    )
    return decide(value, bar=threshold, n=n, unit=unit, words=words, text=f"{statistic} {value.text(1.0, 3)}")


def accuracy(acc: Interval, *, chance: float, majority: float, n: int = 0) -> Verdict:
    """Verdict on MMLU accuracy against chance and the majority-letter baseline (0-1).

    ``n`` (questions behind the interval) sizes the questions needed when undecided.
    """
    if not acc.finite:
        return Verdict(INCONCLUSIVE, "no scored questions")
    bar = max(chance, majority)
    name = "chance" if chance >= majority else "the majority-letter baseline"
    words = Decision(
        above=f"accuracy {{text}} lies above {name} ({100 * bar:.1f})",
        below=f"accuracy {{text}} rules out beating {name} ({100 * bar:.1f}) by {100 * MIN_ACCURACY_EFFECT:.0f}",
        between=f"accuracy {{text}} overlaps {name} ({100 * bar:.1f})",
    )
    return decide(acc, bar=bar, margin=MIN_ACCURACY_EFFECT, n=n, unit="questions", words=words, min_n=0, text=_pct(acc))


def renyi_equivalence(difference: Interval, *, n_groups: int, unit: str = "sources") -> Verdict:
    """Verdict on one separability row under one Rényi order: is its AUC equivalent to Shannon's?

    ``difference`` is the paired fold-AUC difference (Rényi minus Shannon, 0-1) on identical
    folds, with its corrected resampled-t interval.  ``reproduced`` when the interval lies
    inside ``+-`` :data:`RENYI_MARGIN`, ``not reproduced`` when it lies wholly outside, else
    ``inconclusive`` (with the sources that would decide it).
    """
    if not difference.finite:
        return Verdict(INCONCLUSIVE, "not scored: no paired difference")
    if reason := degenerate(difference):
        return Verdict(INCONCLUSIVE, f"not decided: {reason}")
    text = f"Rényi - Shannon {difference.text(100.0, 1)} AUC points"
    margin = 100 * RENYI_MARGIN
    if difference.low > -RENYI_MARGIN and difference.high < RENYI_MARGIN:
        return Verdict(REPRODUCED, f"{text} lies inside ±{margin:.0f}")
    if difference.low >= RENYI_MARGIN or difference.high <= -RENYI_MARGIN:
        return Verdict(NOT_REPRODUCED, f"{text} lies outside ±{margin:.0f}")
    needed = _equivalence_units(difference, n_groups, RENYI_MARGIN)
    return Verdict(INCONCLUSIVE, f"{text} reaches ±{margin:.0f}" + undecided_text(needed, n_groups, unit))


def _equivalence_units(value: Interval, n: int, margin: float) -> float:
    """Units that would put the interval inside ``+-margin`` (or wholly outside it) at the measured spread."""
    inside = math.inf
    if abs(value.estimate) < margin:
        inside = max(units_to_decide(value, n, [(-margin, True)]), units_to_decide(value, n, [(margin, False)]))
    return min(inside, units_to_decide(value, n, [(margin, True), (-margin, False)]))


def renyi_summary(rows: Sequence[str]) -> Verdict:
    """The Rényi claim over every decided separability row and order (``rows``: their equivalence verdicts)."""
    if not rows:
        return Verdict(INCONCLUSIVE, "no separability row decided under Shannon entropy to compare with")
    counts = {v: sum(r == v for r in rows) for v in VERDICTS}
    text = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
    if counts[REPRODUCED] == len(rows):
        return Verdict(REPRODUCED, f"every order is equivalent to Shannon on all {len(rows)} rows ({text})")
    if counts[NOT_REPRODUCED]:
        return Verdict(NOT_REPRODUCED, f"some order differs from Shannon by more than the margin ({text})")
    return Verdict(INCONCLUSIVE, f"equivalence not shown on every row ({text})")


def not_run(reason: str) -> Verdict:
    """An inconclusive verdict for a claim the configuration did not measure."""
    return Verdict(INCONCLUSIVE, f"{NOT_RUN}: {reason}")


def held_out_family(share: Interval, *, bar: float, n: int, family: str) -> Verdict:
    """Verdict on a held-out model classified by a kNN trained on the other models: is it its own family?

    ``share`` is the share of its blank samples classified as ``family`` (Wilson interval over
    samples); ``bar`` the best a classifier without signal reaches (the larger of ``1 / families``
    and the majority family's share of the training samples).  ``reproduced`` above the bar,
    ``not reproduced`` when the interval lies below it, else ``inconclusive``.
    """
    if not share.finite:
        return Verdict(INCONCLUSIVE, "not scored: no held-out samples")
    words = Decision(
        above=f"{{text}}, above the no-signal bar {100 * bar:.1f}%",
        below=f"{{text}}, below the no-signal bar {100 * bar:.1f}%",
        between=f"{{text}} overlaps the bar {100 * bar:.1f}%",
    )
    text = f"{share.text(100.0, 1)}% classified as {family}"
    return decide(share, bar=bar, n=n, unit="blank samples", words=words, text=text)


@dataclass(frozen=True)
class ShapePart:
    """One part of a shape claim: ``statistic`` lies above (or below) ``bar``.

    Statistics (of :mod:`entropy_lens.analysis.shapes`): ``rise`` = mean of the middle
    third minus mean of the first third of depth (nats); ``refine`` = mean of the middle
    third minus the mean of the last third (nats); ``drift`` = change of a line fitted across the
    middle third over the range of the whole profile (absolute value).
    """

    statistic: str
    above: bool
    bar: float
    text: str

    def judge(self, value: Interval) -> str:
        """``"holds"``, ``"fails"`` or ``"open"`` for the interval ``value``."""
        low, high = (value.low, value.high) if self.above else (-value.high, -value.low)
        bar = self.bar if self.above else -self.bar
        return "holds" if low > bar else "fails" if high < bar else "open"

    def on_failing_side(self, value: Interval) -> bool:
        """Whether the estimate lies on the side of :attr:`bar` that the claim rules out."""
        return value.estimate < self.bar if self.above else value.estimate > self.bar


def _shape_units(parts: Sequence[ShapePart], statistics: Mapping[str, Interval], n: int) -> float:
    """Sources that would decide a shape claim: the first part to fail, else the last part to hold."""
    failing = [p for p in parts if p.on_failing_side(statistics[p.statistic])]
    if failing:
        return min(units_to_decide(statistics[p.statistic], n, [(p.bar, not p.above)]) for p in failing)
    return max(units_to_decide(statistics[p.statistic], n, [(p.bar, p.above)]) for p in parts)


GPT_SHAPE = "gpt"
LLAMA_SHAPE = "llama"
# The study's family shape claims, each a conjunction of parts.
SHAPE_CLAIMS: dict[str, tuple[ShapePart, ...]] = {
    GPT_SHAPE: (
        ShapePart("rise", False, 0.0, "starts high (first third above the middle third)"),
        ShapePart("refine", True, 0.0, "sharpens (last third below the middle third)"),
    ),
    LLAMA_SHAPE: (
        ShapePart("rise", True, 0.0, "starts low (first third below the middle third)"),
        ShapePart("drift", False, PLATEAU_DRIFT, f"plateaus (middle third drifts < {PLATEAU_DRIFT:.0%} of the range)"),
        ShapePart("refine", True, 0.0, "refines (last third below the middle third)"),
    ),
}


def family_shape(claim: str, statistics: Mapping[str, Interval], *, n_sources: int, third_layers: int) -> Verdict:
    """Verdict on a family shape claim of :data:`SHAPE_CLAIMS` for one model's mean profile.

    Args:
        claim: A key of :data:`SHAPE_CLAIMS`.
        statistics: Statistic name -> its estimate and 95% interval.
        n_sources: Independent sources (stories, topics, questions, samples) behind the profile.
        third_layers: Layers in the smaller of the first and middle thirds of depth.
    """
    if claim not in SHAPE_CLAIMS:
        raise ValueError(f"unknown shape claim {claim!r}; use one of {list(SHAPE_CLAIMS)}")
    parts = SHAPE_CLAIMS[claim]
    if third_layers < MIN_THIRD_LAYERS:
        return Verdict(INCONCLUSIVE, f"too few layers: {third_layers} in a third of depth (need {MIN_THIRD_LAYERS})")
    if n_sources < MIN_GROUPS:
        return Verdict(INCONCLUSIVE, f"only {n_sources} independent sources (need {MIN_GROUPS})")
    missing = [p.statistic for p in parts if p.statistic not in statistics or not statistics[p.statistic].finite]
    if missing:
        return Verdict(INCONCLUSIVE, f"not computed: no interval for {missing}")
    flat = [p.statistic for p in parts if degenerate(statistics[p.statistic])]
    if flat:
        return Verdict(INCONCLUSIVE, f"not decided: zero-width interval for {flat}")
    judged = [p.judge(statistics[p.statistic]) for p in parts]
    why = "; ".join(
        f"{part.text}: {part.statistic} {statistics[part.statistic].text(1.0, 3)} {judgement}"
        for part, judgement in zip(parts, judged, strict=True)
    )
    if all(j == "holds" for j in judged):
        return Verdict(REPRODUCED, why)
    if "fails" in judged:
        return Verdict(NOT_REPRODUCED, why)
    return Verdict(INCONCLUSIVE, why + undecided_text(_shape_units(parts, statistics, n_sources), n_sources, "sources"))


def _gap_verdict(gap: Interval, *, n_samples: int, closer: str, farther: str, unit: str = "nats") -> Verdict:
    """Reproduced when the gap's interval lies above :data:`GAP_THRESHOLD`, not when below."""
    if not gap.finite:
        return Verdict(INCONCLUSIVE, "not computed: no interval for the gap")
    words = Decision(
        above=f"{{text}} lies above 0: {closer}",
        below=f"{{text}} lies below 0: {farther}",
        between="{text} straddles 0",
    )
    return decide(
        gap,
        bar=GAP_THRESHOLD,
        n=n_samples,
        unit="blank samples per model",
        words=words,
        text=f"gap {gap.text(1.0, 3)} {unit}",
    )


def family_not_size(gap: Interval, *, n_samples: int, nearest: str = "", unit: str = "nats") -> Verdict:
    """Verdict on "family, not size" for one same-family (small, large) pair.

    Args:
        gap: Min over the pair's two models and every model of another family of their RMS
            profile distance, minus the pair's own distance, with its interval.
        n_samples: Blank samples of the model with the fewest, among those compared.
        nearest: The other-family model nearest to the pair, named in the ``why``.
        unit: The gap's unit (nats, or a fraction of log V on the normalized scale).
    """
    other = f" ({nearest})" if nearest else ""
    return _gap_verdict(
        gap,
        n_samples=n_samples,
        closer=f"the pair is closer than it is to any model of another family{other}",
        farther=f"a model of another family{other} is closer to the pair than its two sizes are to each other",
        unit=unit,
    )


def size_resolution(gap: Interval, *, n_samples: int, unit: str = "nats") -> Verdict:
    """Verdict on "size as resolution" for one same-family (small, large) pair.

    Args:
        gap: The RMS difference of the two sizes aligned on absolute layer index minus the one
            aligned on normalized depth (the larger model read at the smaller one's depths), with
            its interval.
        n_samples: Blank samples of the model with the fewer.
        unit: The gap's unit.
    """
    return _gap_verdict(
        gap,
        n_samples=n_samples,
        closer="normalized depth aligns the two sizes better than absolute layer index",
        farther="absolute layer index aligns the two sizes better than normalized depth",
        unit=unit,
    )
