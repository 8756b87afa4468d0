"""Paper-table rows of the claims read from profiles and answers beyond the kNN: Spearman ΔH vs Δ
nucleus size, MMLU accuracy (a precondition), adjacent-layer overlap, family shapes and the
same-family pairs (family, not size; size as resolution).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis import claims as C
from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.pairs import ALIGNMENT_GAP, FAMILY_GAP, NORMALIZED
from entropy_lens.analysis.pairs import NATS as NATS_SCALE
from entropy_lens.analysis.render import (
    ACC,
    CONTAINMENT,
    LOG_V,
    NATS,
    RHO,
)
from entropy_lens.analysis.rows import (
    CONTAINMENT_STATISTIC,
    Expected,
    Record,
    RowRule,
    family_shortfall,
    interval,
    pair_shortfall,
    row,
    rows_of,
    span,
    text,
)
from entropy_lens.analysis.shapes import STATISTICS as SHAPE_STATISTICS
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW, SOURCES


def _sources(rec: Record) -> int:
    """The unit's count of a record, 0 where the analysis gave none."""
    return int(rec[SOURCES]) if pd.notna(rec[SOURCES]) else 0


def _study_spearman(rec: Record) -> str:
    matched = C.study_model_for(str(rec["model"]))
    if matched in C.STUDY_SPEARMAN:
        return f"{C.STUDY_SPEARMAN[matched]:.3f}"
    return span(C.STUDY_SPEARMAN.values(), ".3f")


SPEARMAN_RULE = RowRule(
    claim=C.SPEARMAN,
    unit=RHO,
    judge=lambda rho, rec: V.above_threshold(rho, threshold=V.SPEARMAN_THRESHOLD, n=_sources(rec), statistic="rho"),
    study=_study_spearman,
    note="n counts (token, layer) pairs; the interval resamples prompts",
    margin=V.NULL_MARGINS["rho"],
    bar=V.SPEARMAN_THRESHOLD,
    instead="it cannot tell whether the same shortlist grows and shrinks; adjacent-set containment is the claim's test",
)


def _questions(accuracy: pd.DataFrame) -> list[int]:
    """Questions behind each accuracy row: its ``n``, or for a row pooled over styles (whose ``n``
    counts prompts) the most answered in one style of that model and measure."""
    per_style = accuracy[accuracy["style"] != ALL_STYLES].groupby(["model", "measure"])["n"].max()
    return [
        int(per_style.get((m, measure), n)) if style == ALL_STYLES else int(n)
        for m, style, measure, n in zip(
            accuracy["model"], accuracy["style"], accuracy["measure"], accuracy["n"], strict=True
        )
    ]


def accuracy_rule(families: Mapping[str, str]) -> RowRule:
    """Accuracy against the larger of chance and the majority letter, judged over questions."""

    def study(rec: Record) -> str:
        family = families.get(str(rec["model"]), "").lower()
        if family in C.STUDY_MMLU_ACCURACY:
            return f"{span(C.STUDY_MMLU_ACCURACY[family])} ({family} family)"
        return C.NO_FIGURE

    return RowRule(
        claim=C.ACCURACY,
        unit=ACC,
        judge=lambda acc, rec: V.accuracy(
            acc, chance=float(rec["chance"]), majority=float(rec["majority_baseline"]), n=int(rec["n_questions"])
        ),
        study=study,
        note=lambda rec: (
            f"answered {rec['top_letter']} for {100 * rec['top_share']:.0f}%; gold {rec['majority_letter']} "
            f"{100 * rec['majority_baseline']:.0f}%; {int(rec['n_unparsed'])} unparsed"
        ),
        extra=lambda rec: {"baseline": _bar(rec, "majority_baseline")},
        null=lambda rec: V.fixed_null(
            "chance or the majority letter",
            interval(rec, ESTIMATE, LOW, HIGH),
            _bar(rec, "majority_baseline").estimate,
            margin=V.NULL_MARGINS["accuracy"],
        ),
    )


def _bar(rec: Record, majority: str) -> V.Interval:
    """The baseline a share must beat: the larger of chance and the majority's share, without an interval."""
    return V.Interval(max(float(rec["chance"]), float(rec[majority])), math.nan, math.nan)


def accuracy_rows(accuracy: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    return rows_of(accuracy.assign(n_questions=_questions(accuracy)), accuracy_rule(families))


OVERLAP_RULE = RowRule(
    claim=C.OVERLAP,
    unit=lambda rec: CONTAINMENT if str(rec["measure"]).startswith(CONTAINMENT_STATISTIC) else "Jaccard",
    judge=lambda value, rec: V.above_threshold(
        value, threshold=V.CONTAINMENT_THRESHOLD, n=_sources(rec), statistic=str(rec["measure"])
    ),
    note="mean over (token, layer) cells; the interval resamples prompts",
    margin=V.NULL_MARGINS["containment"],
    bar=V.CONTAINMENT_THRESHOLD,
)


def shape_rule(expected: Expected) -> RowRule:
    """A verdict per model of a family with a shape claim (or of its architecture, as an extension)."""

    def scope(rec: Record) -> tuple[str, str] | None:
        model = str(rec["model"])
        return C.shape_scope(
            str(expected.families.get(model, rec.get("family", ""))), expected.architectures.get(model, "")
        )

    def stats(rec: Record) -> dict[str, V.Interval]:
        return {s: interval(rec, s, f"{s}_low", f"{s}_high") for s in SHAPE_STATISTICS}

    def note(rec: Record) -> str:
        text = "; ".join(f"{s} {i.text(1.0, 3)}" for s, i in stats(rec).items())
        model = str(rec["model"])
        if scope(rec)[1] == C.EXTENSION:
            architecture, family = expected.architectures.get(model, ""), expected.families.get(model, "")
            text = f"{architecture} architecture, family {family}: " + text
        return f"{text}; start {float(rec['start']):.3f}, final {float(rec['final']):.3f} nats"

    return RowRule(
        claim=lambda rec: C.SHAPE_ROWS[scope(rec)[0]],
        unit=NATS,
        judge=lambda _, rec: V.family_shape(
            scope(rec)[0], stats(rec), n_sources=int(rec["n_sources"]), third_layers=int(rec["third_layers"])
        ),
        role=lambda rec: scope(rec)[1],
        note=note,
        keep=lambda rec: scope(rec) is not None,
        has_estimate=False,
        null=lambda rec: _flat_null(scope(rec)[0], stats(rec)),
    )


def _flat_null(claim: str, statistics: Mapping[str, V.Interval]) -> V.Null | None:
    """A shape's null is a flat profile, every part at its bar: the excess of the weakest part in its claimed
    direction (the one whose interval comes closest to the bar)."""
    excess = []
    for part in V.SHAPE_CLAIMS[claim]:
        value = statistics[part.statistic]
        sign = 1.0 if part.above else -1.0
        low, high = sorted((sign * (value.low - part.bar), sign * (value.high - part.bar)))
        excess.append(V.Interval(sign * (value.estimate - part.bar), low, high))
    finite = [e for e in excess if e.finite]
    if not finite:
        return None
    weakest = min(finite, key=lambda e: e.low)
    return V.Null("flat profile (weakest part)", V.Interval(0.0, 0.0, 0.0), weakest, margin=V.NULL_MARGINS["gap"])


# Pair statistic (:mod:`entropy_lens.analysis.pairs`) -> its claim, verdict rule, study text and note.
PAIR_CLAIMS = {
    FAMILY_GAP: (C.CLUSTERING, V.family_not_size, C.STUDY_FAMILY_CLAIM, "d({small}, {large})"),
    ALIGNMENT_GAP: (
        C.SIZE_RESOLUTION,
        V.size_resolution,
        C.STUDY_RESOLUTION_CLAIM,
        "r({small}, {large} at its depths)",
    ),
}


def pair_rows(pairs: pd.DataFrame | None, clustering: pd.DataFrame | None, expected: Expected) -> list[dict]:
    """A row per same-family pair, pair claim and scale; one "not run" row per claim without pairs."""
    blank = list(expected.datasets.get("blank", ()))
    scores = _clustering_note(clustering)
    rows = []
    for statistic, (claim, judge, study, same) in PAIR_CLAIMS.items():
        mine = pairs[pairs["statistic"] == statistic] if pairs is not None else pd.DataFrame()
        if mine.empty:
            why = family_shortfall(expected) or pair_shortfall(blank, expected.families)
            rows.append(row(claim, ", ".join(blank) or "all", NATS, V.not_run(why), study=study, note=scores))
            continue
        rows += rows_of(mine, _pair_rule(claim, judge, study, same, scores))
    return rows


def _scale(rec: Record) -> str:
    return str(rec["measure"]) or NATS_SCALE


def _pair_unit(rec: Record) -> str:
    return LOG_V if _scale(rec) == NORMALIZED else NATS


def _pair_rule(claim: str, judge, study: str, same: str, scores: str) -> RowRule:
    def verdict(gap: V.Interval, rec: Record) -> V.Verdict:
        if rec["statistic"] == FAMILY_GAP and int(rec["n_other"]) == 0:
            return V.not_run(f"only family {rec['family']} on 'blank': no other family to compare with")
        # the alignment gap compares the pair with itself: no other family to name
        nearest = {"nearest": text(rec["nearest"])} if rec["statistic"] == FAMILY_GAP else {}
        return judge(gap, n_samples=int(rec["n"]), unit=_pair_unit(rec), **nearest)

    def note(rec: Record) -> str:
        unit = _pair_unit(rec)
        if rec["statistic"] == ALIGNMENT_GAP:
            text_ = f"aligned on normalized depth {float(rec['same']):.3f}, on absolute layer "
            text_ += f"{float(rec['nearest_value']):.3f} {unit}"
        else:
            text_ = f"{same.format(**rec)} = {float(rec['same']):.3f} {unit}"
            if text(rec["nearest"]):
                text_ += f"; nearest other family: {rec['nearest']} at {float(rec['nearest_value']):.3f} {unit}"
        return "; ".join(t for t in (text_, scores) if t)

    return RowRule(
        claim=claim,
        unit=_pair_unit,
        judge=verdict,
        study=study,
        note=note,
        model=lambda rec: f"{rec['small']}, {rec['large']}",
        measure=_scale,
        null=lambda rec: V.fixed_null(
            "no family structure (gap 0)",
            interval(rec, ESTIMATE, LOW, HIGH),
            V.GAP_THRESHOLD,
            margin=V.NULL_MARGINS["gap"],
        ),
    )


def _clustering_note(clustering: pd.DataFrame | None) -> str:
    """The clustering scores (ARI, silhouette), descriptive: they carry no interval."""
    if clustering is None or clustering.empty:
        return ""
    by = clustering.set_index("grouping")
    return "; ".join(
        f"{g}: ARI {_score(by.loc[g, 'ari_models'])}, silhouette {_score(by.loc[g, 'silhouette_samples'])}"
        for g in by.index
    )


def _score(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"
