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
    count,
    family_shortfall,
    interval,
    pair_shortfall,
    row,
    span,
    text,
)
from entropy_lens.analysis.shapes import STATISTICS as SHAPE_STATISTICS
from entropy_lens.answers.accuracy import ALL_STYLES


def spearman_rows(expansion: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for rec in expansion.to_dict("records"):
        matched = C.study_model_for(str(rec["model"]))
        study = (
            f"{C.STUDY_SPEARMAN[matched]:.3f}"
            if matched in C.STUDY_SPEARMAN
            else span(C.STUDY_SPEARMAN.values(), ".3f")
        )
        rho = interval(rec, "spearman", "ci_low", "ci_high")
        n_prompts = int(rec.get("n_prompts", 0) or 0)
        verdict = V.above_threshold(rho, threshold=V.SPEARMAN_THRESHOLD, n=n_prompts, statistic="rho")
        rows.append(
            row(
                C.SPEARMAN,
                str(rec["model"]),
                RHO,
                verdict,
                split=text(rec.get("dataset")),
                measure="shannon",
                ours=rho,
                study=study,
                n=count(rec["n"]),
                n_sources=n_prompts,
                note="n counts (token, layer) pairs; the interval resamples prompts",
            )
        )
    return rows


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


def accuracy_rows(accuracy: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for rec, n_questions in zip(accuracy.to_dict("records"), _questions(accuracy), strict=True):
        family = families.get(str(rec["model"]), "").lower()
        study = (
            f"{span(C.STUDY_MMLU_ACCURACY[family])} ({family} family)"
            if family in C.STUDY_MMLU_ACCURACY
            else C.NO_FIGURE
        )
        acc = interval(rec, "accuracy", "ci_low", "ci_high")
        bar = max(float(rec["chance"]), float(rec["majority_baseline"]))
        note = (
            f"answered {rec['top_letter']} for {100 * rec['top_share']:.0f}%; gold {rec['majority_letter']} "
            f"{100 * rec['majority_baseline']:.0f}%; {int(rec['n_unparsed'])} unparsed"
        )
        rows.append(
            row(
                C.ACCURACY,
                str(rec["model"]),
                ACC,
                V.accuracy(acc, chance=float(rec["chance"]), majority=float(rec["majority_baseline"]), n=n_questions),
                role=C.PRECONDITION,
                split=str(rec["style"]),
                measure=str(rec["measure"]),
                ours=acc,
                baseline=V.Interval(bar, math.nan, math.nan),
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec["n"]),
                note=note,
            )
        )
    return rows


def overlap_rows(overlap: pd.DataFrame) -> list[dict[str, Any]]:
    """Containment (the verdict's statistic) and Jaccard (beside it) per model and prompt set."""
    rows = []
    for rec in overlap.to_dict("records"):
        value = interval(rec, "mean", "ci_low", "ci_high")
        statistic = str(rec.get("statistic", "jaccard"))
        n_prompts = int(rec.get("n_prompts", 0) or 0)
        verdict = V.above_threshold(value, threshold=V.CONTAINMENT_THRESHOLD, n=n_prompts, statistic=statistic)
        rows.append(
            row(
                C.OVERLAP,
                str(rec["model"]),
                CONTAINMENT if statistic == CONTAINMENT_STATISTIC else "Jaccard",
                verdict,
                split=text(rec.get("dataset")),
                measure=statistic,
                ours=value,
                study=C.STUDY_OVERLAP_CLAIM,
                n=count(rec["n"]),
                n_sources=n_prompts,
                note="mean over (token, layer) cells; the interval resamples prompts",
            )
        )
    return rows


def shape_rows(shapes: pd.DataFrame, expected: Expected) -> list[dict[str, Any]]:
    """A verdict per model (of a family with a shape claim, or of its architecture as an extension) and dataset."""
    rows = []
    for rec in shapes.to_dict("records"):
        model = str(rec["model"])
        scope = C.shape_scope(
            str(expected.families.get(model, rec.get("family", ""))), expected.architectures.get(model, "")
        )
        if scope is None:
            continue
        key, role = scope
        stats = {s: interval(rec, s, f"{s}_low", f"{s}_high") for s in SHAPE_STATISTICS}
        verdict = V.family_shape(key, stats, n_sources=int(rec["n_sources"]), third_layers=int(rec["third_layers"]))
        note = "; ".join(f"{s} {i.text(1.0, 3)}" for s, i in stats.items())
        if role == C.EXTENSION:
            note = (
                f"{expected.architectures.get(model, '')} architecture, family {expected.families.get(model, '')}: "
                + note
            )
        rows.append(
            row(
                C.SHAPE_ROWS[key],
                model,
                NATS,
                verdict,
                role=role,
                split=text(rec.get("dataset")),
                measure="shannon",
                study=C.STUDY_SHAPE_CLAIM,
                n=int(rec["n_prompts"]),
                n_sources=int(rec["n_sources"]),
                note=f"{note}; start {float(rec['start']):.3f}, final {float(rec['final']):.3f} nats",
            )
        )
    return rows


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
        rows += [_pair_row(rec, claim, judge, study, same, scores) for rec in mine.to_dict("records")]
    return rows


def _pair_row(rec: Mapping[str, Any], claim: str, judge, study: str, same: str, scores: str) -> dict[str, Any]:
    gap, n = interval(rec, "gap", "gap_low", "gap_high"), int(rec["n_samples"])
    scale = text(rec.get("scale")) or NATS_SCALE
    unit = LOG_V if scale == NORMALIZED else NATS
    verdict = judge(gap, n_samples=n, nearest=text(rec["nearest"]), unit=unit)
    if rec["statistic"] == FAMILY_GAP and int(rec["n_other"]) == 0:
        verdict = V.not_run(f"only family {rec['family']} on 'blank': no other family to compare with")
    if rec["statistic"] == ALIGNMENT_GAP:
        note = f"aligned on normalized depth {float(rec['same']):.3f}, on absolute layer "
        note += f"{float(rec['nearest_value']):.3f} {unit}"
    else:
        note = f"{same.format(**rec)} = {float(rec['same']):.3f} {unit}"
        if text(rec["nearest"]):
            note += f"; nearest other family: {rec['nearest']} at {float(rec['nearest_value']):.3f} {unit}"
    return row(
        claim,
        f"{rec['small']}, {rec['large']}",
        unit,
        verdict,
        split="blank",
        measure=scale,
        ours=gap,
        study=study,
        n=n,
        n_sources=n,
        note="; ".join(t for t in (note, scores) if t),
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
