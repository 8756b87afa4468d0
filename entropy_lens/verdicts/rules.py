"""Verdict rules: does a claim of the study hold on these models, given our intervals?

Every finding gets one of :data:`~entropy_lens.verdicts.decision.VERDICTS` and a sentence saying why; a
precondition reads the same rule as ``met`` / ``not met`` / ``undecided``; an extension (a model or family
the study made no claim about) reports what the rule found in words of its own (or a three-way outcome of
:mod:`entropy_lens.verdicts.outcomes`).  Each rule states its statistic, its bars and its words, and leaves
the test to the one decision of :mod:`entropy_lens.verdicts.decision`.  The rules are fixed here, before any
result is looked at, and written out in ``docs/verdicts.md``:

Separability (task, scrambled control, format, MMLU correctness; kNN AUC under grouped folds
with its corrected resampled-t 95% interval)
    * ``inconclusive`` when the row could not be scored, or the study's ``k`` had to be
      capped (too few prompts), or the number of independent sources is below
      :data:`MIN_GROUPS`;
    * ``reproduced`` when the interval lies above 0.5 and the paired excess over the stratified
      dummy on the same folds (the interval the beyond-chance reading reads) lies above 0;
    * ``not reproduced`` when the interval's upper end is below
      ``0.5 + MIN_AUC_EFFECT``: even a small separability is ruled out;
    * ``inconclusive`` otherwise: the interval is too wide to decide.
    An AUC at the ceiling in every fold carries the exact interval over its sources
    (:func:`entropy_lens.core.folds.ceiling_interval`), and the ``why`` says so.

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

The expansion/pruning schedule survives a fitted lens (an extension): :func:`schedule_survives`.

An interval too wide to decide
    the ``why`` gives the number of units (questions, prompts, sources, samples) that would
    decide the row at the measured spread (:func:`~entropy_lens.verdicts.decision.units_to_decide`; for
    separability the slower of the AUC above 0.5 and the paired excess over the dummy above 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from entropy_lens.verdicts.decision import (
    INCONCLUSIVE,
    MIN_GROUPS,
    NOT_REPRODUCED,
    REPRODUCED,
    VERDICTS,
    Decision,
    Interval,
    Side,
    Test,
    Verdict,
    decide,
    degenerate,
    inside,
    judge,
)
from entropy_lens.verdicts.outcomes import CANNOT_BE_READ, Outcome

CHANCE_AUC = 0.5
# A separability below 0.5 + this AUC is too small to call the claim reproduced.
MIN_AUC_EFFECT = 0.05
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
# A model answering one letter for at least this share of prompts is letter-biased.
LETTER_BIAS_SHARE = 0.75


def _pct(interval: Interval) -> str:
    return interval.text(100.0, 1)


def separability(
    auc: Interval,
    excess: Interval,
    *,
    k_used: int | None,
    k_study: int,
    n_groups: int,
    skipped: str = "",
    unit: str = "sources",
    ceiling: str = "",
) -> Verdict:
    """Verdict on a kNN separability row (AUCs in 0-1; see the module docstring).

    Args:
        auc: The mean fold AUC with its interval.
        excess: The paired fold difference AUC - stratified dummy on the same folds, with its interval (the
            interval the beyond-chance reading reads).
        k_used, k_study: The ``k`` the row used and the study's.
        n_groups: Independent sources (stories, questions, ...), named ``unit`` in the ``why`` of an interval too
            wide to decide.
        skipped: Why the row was not scored (``""``: it was).
        unit: The sources' name.
        ceiling: The note of an AUC at the ceiling in every fold (its exact interval over the sources).
    """
    if skipped or not auc.finite or not excess.finite:
        return Verdict(INCONCLUSIVE, f"not scored: {skipped or 'no interval'}")
    if k_used is not None and k_used < k_study:
        return Verdict(INCONCLUSIVE, f"too few prompts for the study's k={k_study} (k capped to {k_used})")
    if n_groups < MIN_GROUPS:
        return Verdict(INCONCLUSIVE, f"only {n_groups} independent sources (need {MIN_GROUPS})")
    if reason := degenerate(auc):
        return Verdict(INCONCLUSIVE, f"not decided: AUC {reason}")
    effect = CHANCE_AUC + MIN_AUC_EFFECT
    test = Test(yes=(Side(auc, CHANCE_AUC), Side(excess, 0.0)), no=(Side(auc, effect, above=False),))
    paired = f"the paired excess over the dummy {_pct(excess)}"
    words = Decision(
        reproduced=f"{{text}} lies above 50 and {paired} above 0",
        not_reproduced=f"{{text}} rules out AUC >= {100 * effect:.0f}",
        inconclusive=f"{{text}} or {paired} reaches 50 or 0 and cannot rule out AUC >= {100 * effect:.0f}",
    )
    text = f"AUC {_pct(auc)}" + (f" ({ceiling})" if ceiling else "")
    return judge(test, n=n_groups, unit=unit, words=words, text=text)


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


def above_threshold(value: Interval, *, threshold: float, n: int, statistic: str, unit: str = "prompts") -> Verdict:
    """``reproduced`` when the interval lies above ``threshold``, ``not reproduced`` below it, else
    ``inconclusive``; also ``inconclusive`` with fewer than :data:`MIN_GROUPS` units or a degenerate interval.

    The rule of the Spearman row (``rho`` above :data:`SPEARMAN_THRESHOLD`) and of the overlap row
    (containment above :data:`CONTAINMENT_THRESHOLD`).
    """
    if not value.finite:
        return Verdict(INCONCLUSIVE, f"not computed: no {statistic} or too few {unit}")
    words = Decision(
        reproduced=f"{{text}} lies above {threshold}",
        not_reproduced=f"{{text}} lies below {threshold}",
        inconclusive=f"{{text}} straddles {threshold}",
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
        reproduced=f"accuracy {{text}} lies above {name} ({100 * bar:.1f})",
        not_reproduced=f"accuracy {{text}} rules out beating {name} ({100 * bar:.1f}) by "
        + f"{100 * MIN_ACCURACY_EFFECT:.0f}",
        inconclusive=f"accuracy {{text}} overlaps {name} ({100 * bar:.1f})",
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
    margin = 100 * RENYI_MARGIN
    words = Decision(
        reproduced=f"{{text}} lies inside ±{margin:.0f}",
        not_reproduced=f"{{text}} lies outside ±{margin:.0f}",
        inconclusive=f"{{text}} reaches ±{margin:.0f}",
    )
    text = f"Rényi - Shannon {difference.text(100.0, 1)} AUC points"
    return judge(inside(difference, RENYI_MARGIN), n=n_groups, unit=unit, words=words, text=text)


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


def held_out_family(share: Interval, *, bar: float, n_models: int, to_decide: int) -> Verdict:
    """Verdict on the held-out family over models: does an unseen model fall in its own family?

    ``share`` is the share of the ``n_models`` held-out models whose own family takes most of their blank samples
    (one observation per model), with its exact (Clopper-Pearson) interval over models; ``bar`` the best a
    classifier without signal reaches (the largest of ``1 / families`` and the training majority's share).
    ``reproduced`` above the bar, ``not reproduced`` when the interval lies below it, else ``inconclusive``, and
    with fewer models than could decide it (``to_decide``: even all of them in their family would not clear the
    bar) it says how many would.
    """
    if not share.finite:
        return Verdict(INCONCLUSIVE, "not scored: no held-out model")
    words = Decision(
        reproduced=f"{{text}}, above the no-signal bar {100 * bar:.1f}%",
        not_reproduced=f"{{text}}, below the no-signal bar {100 * bar:.1f}%",
        inconclusive=f"{{text}} overlaps the bar {100 * bar:.1f}%",
    )
    text = f"{share.text(100.0, 1)}% of {n_models} held-out models fall in their own family"
    verdict = decide(share, bar=bar, n=n_models, unit="held-out models", words=words, min_n=1, text=text)
    if verdict.verdict == INCONCLUSIVE and n_models < to_decide:
        why = f"{text}: {n_models} held-out models cannot clear the bar {100 * bar:.1f}% even if every one falls in "
        return Verdict(INCONCLUSIVE, why + f"its family (exact interval); {to_decide} would decide it")
    return verdict


@dataclass(frozen=True)
class ShapePart:
    """One part of a shape claim: ``statistic`` lies above (or below) ``bar``.

    Statistics (of :mod:`entropy_lens.analysis.families.shapes`): ``rise`` = mean of the middle
    third minus mean of the first third of depth (nats); ``refine`` = mean of the middle
    third minus the mean of the last third (nats); ``drift`` = change of a line fitted across the
    middle third over the range of the whole profile (absolute value).
    """

    statistic: str
    above: bool
    bar: float
    text: str

    def side(self, value: Interval, *, claimed: bool = True) -> Side:
        """``value`` lies on the claimed side of :attr:`bar` (or, ``claimed=False``, on the side it rules out)."""
        return Side(value, self.bar, above=self.above == claimed)

    def judgement(self, value: Interval) -> str:
        """``"holds"``, ``"fails"`` or ``"open"`` for the interval ``value``."""
        return "holds" if self.side(value).holds() else "fails" if self.side(value, claimed=False).holds() else "open"


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
    values = [statistics[p.statistic] for p in parts]
    test = Test(
        yes=tuple(p.side(v) for p, v in zip(parts, values, strict=True)),
        no=tuple(p.side(v, claimed=False) for p, v in zip(parts, values, strict=True)),
    )
    why = "; ".join(
        f"{p.text}: {p.statistic} {v.text(1.0, 3)} {p.judgement(v)}" for p, v in zip(parts, values, strict=True)
    )
    return judge(test, n=n_sources, unit="sources", words=Decision("{text}", "{text}", "{text}"), text=why)


def _gap_verdict(gap: Interval, *, n_samples: int, closer: str, farther: str, unit: str = "nats") -> Verdict:
    """Reproduced when the gap's interval lies above :data:`GAP_THRESHOLD`, not when below."""
    if not gap.finite:
        return Verdict(INCONCLUSIVE, "not computed: no interval for the gap")
    words = Decision(
        reproduced=f"{{text}} lies above 0: {closer}",
        not_reproduced=f"{{text}} lies below 0: {farther}",
        inconclusive="{text} straddles 0",
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


# The expansion/pruning schedule survives a fitted lens (an extension; docs/verdicts.md): the Spearman of the two
# lenses' ΔH over the blocks under the fitted lens's KL bar. An upper end below this rules out even a moderate
# agreement (the "no relation" band of the rank over blocks).
SCHEDULE_MARGIN = 0.3


def schedule_survives(rho: Interval, *, n: int, n_blocks: int, unreadable: str = "") -> Verdict | Outcome:
    """Does a fitted lens rank the logit lens's ΔH alike where its own reading counts as the model's (its ΔH under
    its KL bar)? ``holds`` when the Spearman's interval (held-out questions resampled, blocks fixed) lies above 0,
    ``does not hold`` when its upper end lies below :data:`SCHEDULE_MARGIN`, else undecided (also with fewer than
    :data:`MIN_GROUPS` questions or a degenerate interval); ``unreadable`` (no expansion or no pruning block of the
    logit lens's under the bar, fewer than three blocks) gives the outcome ``cannot be read``, counted apart."""
    if unreadable:
        return Outcome(CANNOT_BE_READ, unreadable)
    if not rho.finite:
        return Verdict(INCONCLUSIVE, f"not computed: no Spearman over {n_blocks} blocks")
    words = Decision(
        reproduced="{text} lies above 0: the fitted lens ranks these blocks as the logit lens does",
        not_reproduced=f"{{text}} rules out a Spearman of {SCHEDULE_MARGIN}: the fitted lens does not read the logit "
        "lens's schedule there",
        inconclusive=f"{{text}} includes 0 and {SCHEDULE_MARGIN}",
    )
    text = f"Spearman {rho.text(1.0, 3)} over {n_blocks} blocks under the bar"
    return decide(rho, bar=0.0, margin=SCHEDULE_MARGIN, n=n, unit="held-out questions", words=words, text=text)
