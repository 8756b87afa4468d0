"""The paper comparison: each claim of the study, our estimate with its interval, and a verdict.

One row per claim, model and split.  Each row carries

* our estimate and its 95% interval over the right unit (kNN AUC: grouped folds,
  corrected resampled t; Spearman and overlap: prompt-cluster bootstrap; accuracy: Wilson over
  questions; layer skip: paired bootstrap over questions, and over random sets where there are),
* the baseline it is judged against (the dummy classifier, chance, the majority letter or the
  intact model), the study-protocol (ungrouped folds) figure beside the grouped one,
* the study's magnitude or sentence, and
* a verdict (:mod:`entropy_lens.analysis.verdicts`, :mod:`entropy_lens.analysis.outcomes`) with
  the reason, in the words of the row's role (:mod:`entropy_lens.analysis.claims`).

Claims the configuration did not measure get a row that says so: nothing is dropped silently.
:func:`headline` picks the rows a reader needs first; :mod:`entropy_lens.analysis.render`
writes them out.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from entropy_lens.analysis import claims as C
from entropy_lens.analysis import outcomes as O
from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.expansion import STUDY_SPEARMAN
from entropy_lens.analysis.knn import GROUPED, POOLED_MODEL, STUDY
from entropy_lens.analysis.pairs import ALIGNMENT_GAP, FAMILY_GAP, NORMALIZED
from entropy_lens.analysis.pairs import NATS as NATS_SCALE
from entropy_lens.analysis.render import (
    ACC,
    AUC,
    AUC_POINTS,
    CONTAINMENT,
    LOG_V,
    LOGPROB,
    NATS,
    NOT_RUN,
    POINTS,
    RHO,
    SHARE,
)
from entropy_lens.analysis.shapes import STATISTICS as SHAPE_STATISTICS
from entropy_lens.analysis.skip_rows import comparison_rows, rank_rows
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE

log = logging.getLogger(__name__)

COLUMNS = (
    "claim",
    "role",
    "model",
    "split",
    "measure",
    "unit",
    "estimate",
    "ci_low",
    "ci_high",
    "baseline",
    "baseline_low",
    "baseline_high",
    "study_protocol",
    "study_protocol_low",
    "study_protocol_high",
    "study",
    "verdict",
    "why",
    "n",
    "n_sources",
    "note",
)
NUMBER_COLUMNS = {c for c in COLUMNS if c.startswith(("estimate", "ci_", "baseline", "study_protocol"))} | {
    "n",
    "n_sources",
}
# The pair scale the verdicts read (entropy / log V: vocabularies differ by more than the gaps).
HEADLINE_SCALE = NORMALIZED
CONTAINMENT_STATISTIC = "containment"


@dataclass(frozen=True)
class Expected:
    """What the configuration asked to measure, so that every absence is explained.

    Attributes:
        datasets: Dataset -> the models profiled on it (a dataset left out is disabled).
        layer_skip: Models in the layer-skip experiment (empty: the experiment is off).
        k_study: The study's kNN ``k``; a row that had to use fewer is inconclusive.
        families: Model -> family.
        sources: Model -> its configured source (a hub id names a study model).
        architectures: Model -> its ``config.json`` ``model_type`` (for architecture extensions).
    """

    datasets: Mapping[str, Sequence[str]] = field(default_factory=dict)
    layer_skip: Sequence[str] = ()
    k_study: int = 29
    families: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    architectures: Mapping[str, str] = field(default_factory=dict)

    def skip_scopes(self) -> dict[str, str | None]:
        """Model -> the layer-skip scope the study names for it (or ``None``)."""
        return {m: C.skip_scope(m, f, self.sources.get(m, "")) for m, f in self.families.items()}

    def one_model_per_family(self, dataset: str = "blank") -> bool:
        """Whether ``dataset`` has two or more models, each the only one of its family (families then equal models)."""
        counts = pd.Series([self.families.get(m, m) for m in self.datasets.get(dataset, ())]).value_counts()
        return counts.size >= 2 and counts.max() < 2


def _range(values: Sequence[float], spec: str = ".2f") -> str:
    return f"{min(values):{spec}}–{max(values):{spec}}"


def _interval(row: Mapping[str, Any] | pd.Series, mean: str, low: str, high: str) -> V.Interval:
    values = [row[c] for c in (mean, low, high)]
    return V.Interval(*(float(v) if v is not None and pd.notna(v) else math.nan for v in values))


def _word(verdict: V.Verdict | O.Outcome, role: str) -> str:
    if isinstance(verdict, O.Outcome):
        return verdict.outcome
    if role == C.PRECONDITION:
        return V.PRECONDITION_WORDS[verdict.verdict]
    if role == C.EXTENSION and not verdict.why.startswith(NOT_RUN):
        return V.EXTENSION_WORDS[verdict.verdict]
    return verdict.verdict


def _row(
    claim: str, model: str, unit: str, verdict: V.Verdict | O.Outcome, *, role: str = C.FINDING, **values: Any
) -> dict[str, Any]:
    """One table row; intervals (:class:`~entropy_lens.analysis.verdicts.Interval`) expand into columns.

    Missing numbers are NaN, missing text ``""``.
    """
    row: dict[str, Any] = {c: math.nan if c in NUMBER_COLUMNS else "" for c in COLUMNS}
    row.update(claim=claim, role=role, model=model, unit=unit, verdict=_word(verdict, role), why=verdict.why)
    for key, value in values.items():
        if isinstance(value, V.Interval):
            prefix = "ci" if key == "ours" else key
            row[key if key != "ours" else "estimate"] = value.estimate
            row[f"{prefix}_low"], row[f"{prefix}_high"] = value.low, value.high
        else:
            row[key] = value
    return row


def _count(value: Any) -> float:
    return int(value) if pd.notna(value) else math.nan


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


# --------------------------------------------------------------------------- separability


def _study_auc(target: str, model: str, family: str, measure: str) -> str:
    if measure != "shannon":
        return C.NO_FIGURE
    matched = C.study_model_for(model)
    if target == "task":
        return f"{C.STUDY_TASK_AUC[matched]:.2f}" if matched in C.STUDY_TASK_AUC else _range(C.STUDY_TASK_AUC.values())
    if target == "format":
        if matched in C.STUDY_FORMAT_AUC:
            return "{:.1f} ± {:.1f}".format(*C.STUDY_FORMAT_AUC[matched])
        return _range([m for m, _ in C.STUDY_FORMAT_AUC.values()])
    if target == "mmlu_correct" and family.lower() in C.STUDY_MMLU_AUC:
        return f"{_range(C.STUDY_MMLU_AUC[family.lower()])} ({family.lower()} family)"
    return C.NO_FIGURE


def _knn_claim(target: str, expected: Expected) -> tuple[str, str]:
    """(claim, role) of a kNN target's rows."""
    if target == "family" and expected.one_model_per_family():
        return C.MODEL_IDENTITY, C.EXTENSION
    role = C.EXTENSION if target in C.EXTENSION_TARGETS else C.FINDING
    return C.KNN_CLAIMS.get(target, target), role


def _split_of(rec: Mapping[str, Any]) -> str:
    split = _text(rec.get("split"))
    return ALL_STYLES if rec["target"] == "mmlu_correct" and not split else split


def _knn_rows(knn: pd.DataFrame, accuracy: pd.DataFrame | None, expected: Expected) -> list[dict[str, Any]]:
    rows = []
    knn = knn.assign(split=knn["split"].fillna("").astype(str), model=knn["model"].astype(str))
    study = knn[knn["protocol"] == STUDY].set_index(["target", "model", "split", "measure"])
    for rec in knn[knn["protocol"] == GROUPED].to_dict("records"):
        key = (rec["target"], rec["model"], rec["split"], rec["measure"])
        ungrouped = study.loc[key] if key in study.index else {"auc_mean": None, "auc_low": None, "auc_high": None}
        claim, role = _knn_claim(str(rec["target"]), expected)
        split = _split_of(rec)
        rows.append(
            _row(
                claim,
                rec["model"],
                AUC,
                _separability(rec, accuracy, split, expected),
                role=role,
                split=split,
                measure=rec["measure"],
                ours=_interval(rec, "auc_mean", "auc_low", "auc_high"),
                baseline=_interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
                study_protocol=_interval(ungrouped, "auc_mean", "auc_low", "auc_high"),
                study=_study_auc(rec["target"], rec["model"], expected.families.get(rec["model"], ""), rec["measure"]),
                n=_count(rec.get("n_samples")),
                n_sources=_count(rec.get("n_groups")),
                note=_text(rec.get("note")),
            )
        )
    return rows


def _separability(rec: Mapping[str, Any], accuracy: pd.DataFrame | None, split: str, expected: Expected) -> V.Verdict:
    if rec["target"] == "family" and "blank" in expected.datasets and (shortfall := _family_shortfall(expected)):
        return V.not_run(shortfall)
    if rec["target"] == "mmlu_correct":
        blocked = _correctness_blocked(accuracy, str(rec["model"]), split)
        if blocked is not None:
            return blocked
    note = _text(rec.get("note"))
    return V.separability(
        _interval(rec, "auc_mean", "auc_low", "auc_high"),
        _interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
        k_used=int(rec["k"]) if pd.notna(rec.get("k")) else None,
        k_study=expected.k_study,
        n_groups=int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0,
        skipped=note if note.startswith("skipped") else "",
        unit=C.KNN_UNITS.get(str(rec["target"]), "sources"),
    )


def _correctness_blocked(accuracy: pd.DataFrame | None, model: str, style: str) -> V.Verdict | None:
    """Inconclusive when the correctness label is letter bias or chance (see :func:`verdicts.answers_at_chance`)."""
    if accuracy is None:
        return None
    hit = accuracy[
        (accuracy["model"] == model) & (accuracy["style"] == style) & (accuracy["measure"] == VERDICT_MEASURE)
    ]
    if hit.empty:
        return None
    rec = hit.iloc[0]
    acc = V.Interval(rec["accuracy"], rec["ci_low"], rec["ci_high"])
    return V.answers_at_chance(acc, float(rec["chance"]), float(rec["top_share"]), str(rec["top_letter"]))


def _heldout_rows(heldout: pd.DataFrame) -> list[dict[str, Any]]:
    """A row per held-out model (a family with two or more models on the blank set)."""
    rows = []
    for rec in heldout.to_dict("records"):
        share = _interval(rec, "share", "ci_low", "ci_high")
        bar = max(float(rec["chance"]), float(rec["majority_share"]))
        note = _text(rec.get("note"))
        verdict = (
            V.Verdict(V.INCONCLUSIVE, f"not scored: {note}")
            if not share.finite
            else V.held_out_family(share, bar=bar, n=int(rec["n"]), family=str(rec["family"]))
        )
        rows.append(
            _row(
                C.FAMILY_HELDOUT,
                str(rec["model"]),
                SHARE,
                verdict,
                split="blank",
                measure="shannon",
                ours=share,
                baseline=V.Interval(bar, math.nan, math.nan),
                study=C.STUDY_FAMILY_CLAIM,
                n=_count(rec["n"]),
                n_sources=_count(rec["n"]),
                note="; ".join(
                    t
                    for t in (
                        f"trained on {int(rec['n_train'])} samples of {int(rec['n_train_families'])} families "
                        f"without this model; predicted: {_text(rec['predicted'])}",
                        note,
                    )
                    if t
                ),
            )
        )
    return rows


# --------------------------------------------------------------------------- Rényi


def _renyi_rows(rows: list[dict[str, Any]], equivalence: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per decided Shannon separability row and Rényi order, the paired equivalence; then the claim's row."""
    if equivalence is None or equivalence.empty:
        return []
    decided = {
        (r["claim"], r["model"], r["split"]): r
        for r in rows
        if r["claim"] in C.KNN_CLAIMS.values()
        and r["measure"] == "shannon"
        and r["role"] == C.FINDING
        and r["verdict"] in (V.REPRODUCED, V.NOT_REPRODUCED)
    }
    out = []
    for rec in equivalence.to_dict("records"):
        target = str(rec["target"])
        key = (C.KNN_CLAIMS.get(target, target), str(rec["model"]), _split_of(rec))
        if key not in decided:
            continue
        diff = _interval(rec, "difference", "ci_low", "ci_high")
        verdict = V.renyi_equivalence(diff, n_groups=int(rec["n_groups"]), unit=C.KNN_UNITS.get(target, "sources"))
        out.append(
            _row(
                C.RENYI,
                key[1],
                AUC_POINTS,
                verdict,
                split=f"{key[0]}{', ' + key[2] if key[2] else ''}, α = {float(rec['alpha']):g}",
                measure=str(rec["measure"]),
                ours=diff,
                study=C.STUDY_RENYI_CLAIM,
                n=_count(rec["n_samples"]),
                n_sources=_count(rec["n_groups"]),
                note=f"AUC Shannon {100 * rec['shannon_auc']:.1f}, this order {100 * rec['renyi_auc']:.1f}",
            )
        )
    summary = V.renyi_summary([r["verdict"] for r in out])
    orders = ", ".join(dict.fromkeys(r["measure"] for r in out))
    return [_row(C.RENYI, "all", "", summary, measure=orders, study=C.STUDY_RENYI_CLAIM), *out]


# --------------------------------------------------------------------------- other claims


def _spearman_rows(expansion: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for rec in expansion.to_dict("records"):
        matched = C.study_model_for(str(rec["model"]))
        study = (
            f"{STUDY_SPEARMAN[matched]:.3f}" if matched in STUDY_SPEARMAN else _range(STUDY_SPEARMAN.values(), ".3f")
        )
        rho = _interval(rec, "spearman", "ci_low", "ci_high")
        n_prompts = int(rec.get("n_prompts", 0) or 0)
        verdict = V.above_threshold(rho, threshold=V.SPEARMAN_THRESHOLD, n=n_prompts, statistic="rho")
        rows.append(
            _row(
                C.SPEARMAN,
                str(rec["model"]),
                RHO,
                verdict,
                split=_text(rec.get("dataset")),
                measure="shannon",
                ours=rho,
                study=study,
                n=_count(rec["n"]),
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


def _accuracy_rows(accuracy: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for rec, n_questions in zip(accuracy.to_dict("records"), _questions(accuracy), strict=True):
        family = families.get(str(rec["model"]), "").lower()
        study = (
            f"{_range(C.STUDY_MMLU_ACCURACY[family])} ({family} family)"
            if family in C.STUDY_MMLU_ACCURACY
            else C.NO_FIGURE
        )
        acc = _interval(rec, "accuracy", "ci_low", "ci_high")
        bar = max(float(rec["chance"]), float(rec["majority_baseline"]))
        note = (
            f"answered {rec['top_letter']} for {100 * rec['top_share']:.0f}%; gold {rec['majority_letter']} "
            f"{100 * rec['majority_baseline']:.0f}%; {int(rec['n_unparsed'])} unparsed"
        )
        rows.append(
            _row(
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


def _overlap_rows(overlap: pd.DataFrame) -> list[dict[str, Any]]:
    """Containment (the verdict's statistic) and Jaccard (beside it) per model and prompt set."""
    rows = []
    for rec in overlap.to_dict("records"):
        value = _interval(rec, "mean", "ci_low", "ci_high")
        statistic = str(rec.get("statistic", "jaccard"))
        n_prompts = int(rec.get("n_prompts", 0) or 0)
        verdict = V.above_threshold(value, threshold=V.CONTAINMENT_THRESHOLD, n=n_prompts, statistic=statistic)
        rows.append(
            _row(
                C.OVERLAP,
                str(rec["model"]),
                CONTAINMENT if statistic == CONTAINMENT_STATISTIC else "Jaccard",
                verdict,
                split=_text(rec.get("dataset")),
                measure=statistic,
                ours=value,
                study=C.STUDY_OVERLAP_CLAIM,
                n=_count(rec["n"]),
                n_sources=n_prompts,
                note="mean over (token, layer) cells; the interval resamples prompts",
            )
        )
    return rows


def _shape_rows(shapes: pd.DataFrame, expected: Expected) -> list[dict[str, Any]]:
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
        stats = {s: _interval(rec, s, f"{s}_low", f"{s}_high") for s in SHAPE_STATISTICS}
        verdict = V.family_shape(key, stats, n_sources=int(rec["n_sources"]), third_layers=int(rec["third_layers"]))
        note = "; ".join(f"{s} {i.text(1.0, 3)}" for s, i in stats.items())
        if role == C.EXTENSION:
            note = (
                f"{expected.architectures.get(model, '')} architecture, family {expected.families.get(model, '')}: "
                + note
            )
        rows.append(
            _row(
                C.SHAPE_ROWS[key],
                model,
                NATS,
                verdict,
                role=role,
                split=_text(rec.get("dataset")),
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


def _pair_rows(pairs: pd.DataFrame | None, clustering: pd.DataFrame | None, expected: Expected) -> list[dict]:
    """A row per same-family pair, pair claim and scale; one "not run" row per claim without pairs."""
    blank = list(expected.datasets.get("blank", ()))
    scores = _clustering_note(clustering)
    rows = []
    for statistic, (claim, judge, study, same) in PAIR_CLAIMS.items():
        mine = pairs[pairs["statistic"] == statistic] if pairs is not None else pd.DataFrame()
        if mine.empty:
            why = _family_shortfall(expected) or _pair_shortfall(blank, expected.families)
            rows.append(_row(claim, ", ".join(blank) or "all", NATS, V.not_run(why), study=study, note=scores))
            continue
        rows += [_pair_row(rec, claim, judge, study, same, scores) for rec in mine.to_dict("records")]
    return rows


def _pair_row(rec: Mapping[str, Any], claim: str, judge, study: str, same: str, scores: str) -> dict[str, Any]:
    gap, n = _interval(rec, "gap", "gap_low", "gap_high"), int(rec["n_samples"])
    scale = _text(rec.get("scale")) or NATS_SCALE
    unit = LOG_V if scale == NORMALIZED else NATS
    verdict = judge(gap, n_samples=n, nearest=_text(rec["nearest"]), unit=unit)
    if rec["statistic"] == FAMILY_GAP and int(rec["n_other"]) == 0:
        verdict = V.not_run(f"only family {rec['family']} on 'blank': no other family to compare with")
    if rec["statistic"] == ALIGNMENT_GAP:
        note = f"aligned on normalized depth {float(rec['same']):.3f}, on absolute layer "
        note += f"{float(rec['nearest_value']):.3f} {unit}"
    else:
        note = f"{same.format(**rec)} = {float(rec['same']):.3f} {unit}"
        if _text(rec["nearest"]):
            note += f"; nearest other family: {rec['nearest']} at {float(rec['nearest_value']):.3f} {unit}"
    return _row(
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


def _pair_shortfall(models: Sequence[str], families: Mapping[str, str]) -> str:
    """Why no same-family pair was compared (more prompts would not change it)."""
    counts = pd.Series([families.get(m, "") for m in models]).value_counts()
    if counts.empty or counts.max() < 2:
        return "one model per family: family and model identity coincide, so size cannot be told apart (make study)"
    if counts.size < 2:
        return f"only family {counts.index[0]} on 'blank': no other family to compare with"
    return "no two models of one family with different layer counts on 'blank'"


def _score(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"


# --------------------------------------------------------------------------- absences


def _absent_rows(rows: list[dict[str, Any]], expected: Expected) -> list[dict[str, Any]]:
    """A row for every claim and model the configuration did not measure, saying why."""
    seen = {(r["claim"], r["model"]) for r in rows}
    models = list(dict.fromkeys(m for ms in expected.datasets.values() for m in ms))
    out = []
    for target in C.KNN_CLAIMS:
        claim, role = _knn_claim(target, expected)
        dataset = C.KNN_DATASETS[target]
        profiled = list(expected.datasets.get(dataset, ()))
        wanted = [POOLED_MODEL] if target == "family" else profiled if target in C.EXTENSION_TARGETS else models
        out += [
            _row(claim, m, AUC, V.not_run(_why_absent(dataset, m, profiled, target)), role=role)
            for m in wanted
            if (claim, m) not in seen
        ]
    return (
        out
        + _absent_skip_rows(seen, models, expected)
        + _absent_pair_rows(seen, expected)
        + _absent_shape_rows(seen, models, expected)
    )


def _absent_skip_rows(seen: set[tuple[str, str]], models: Sequence[str], expected: Expected) -> list[dict]:
    """A "not run" row per model without layer-skip rows: a finding where the study names its scope."""
    out = []
    scopes = expected.skip_scopes()
    for model in models:
        if any((claim, model) in seen for claim in C.SKIP_CLAIMS):
            continue
        if not expected.layer_skip:
            reason = "the layer-skip experiment is off"
        else:
            reason = "not in layer_skip.models" if model not in expected.layer_skip else "no result"
        scope = scopes.get(model)
        claims = list(C.SKIP_EXPECTED.get(scope or "", {})) or [C.SKIP_VS_RANDOM]
        role = C.FINDING if scope else C.EXTENSION
        study = C.STUDY_SKIP_SENTENCE[scope] if scope else C.NO_SKIP_CLAIM
        out += [_row(claim, model, POINTS, V.not_run(reason), role=role, study=study) for claim in claims]
    return out


def _absent_pair_rows(seen: set[tuple[str, str]], expected: Expected) -> list[dict]:
    """A "not run" row for each same-family pair claim with no row (no family analysis ran)."""
    blank = list(expected.datasets.get("blank", ()))
    why = _family_shortfall(expected) or "no result"
    rows = [
        _row(claim, ", ".join(blank) or "all", NATS, V.not_run(why))
        for claim in (C.CLUSTERING, C.SIZE_RESOLUTION)
        if not any(c == claim for c, _ in seen)
    ]
    if not any(c == C.FAMILY_HELDOUT for c, _ in seen):
        reason = _family_shortfall(expected) or _pair_shortfall(blank, expected.families)
        rows.append(_row(C.FAMILY_HELDOUT, ", ".join(blank) or "all", SHARE, V.not_run(reason)))
    return rows


def _absent_shape_rows(seen: set[tuple[str, str]], profiled: Sequence[str], expected: Expected) -> list[dict]:
    """A "not run" row for each shape claim without a model of its family, or a family model without a result."""
    out = []
    for key, claim in C.SHAPE_ROWS.items():
        members = [m for m, family in expected.families.items() if C.shape_scope(str(family)) == (key, C.FINDING)]
        if not members:
            names = " or ".join(C.SHAPE_FAMILIES[key])
            out.append(_row(claim, "none", NATS, V.not_run(f"no model of family {names} in this configuration")))
        for model in members:
            if (claim, model) not in seen:
                reason = "no result" if model in profiled else f"{model} is profiled on no dataset"
                out.append(_row(claim, model, NATS, V.not_run(reason)))
    return out


def _family_shortfall(expected: Expected) -> str:
    """Why the family analyses of blank prompts cannot run, or ``""`` when they can."""
    blank = expected.datasets.get("blank")
    if not blank:
        return "dataset 'blank' is disabled"
    return f"needs >= 2 models on 'blank', got {len(blank)}" if len(blank) < 2 else ""


def _why_absent(dataset: str, model: str, profiled: Sequence[str], target: str) -> str:
    if not profiled:
        return f"dataset {dataset!r} is disabled"
    if target == "family":
        return f"needs >= 2 models on {dataset!r}, got {len(profiled)}"
    if model not in profiled:
        return f"{model} is not profiled on {dataset!r} (datasets.{dataset}.models)"
    return "no result"


# --------------------------------------------------------------------------- the table


def paper_table(
    *,
    knn: pd.DataFrame | None = None,
    renyi: pd.DataFrame | None = None,
    heldout: pd.DataFrame | None = None,
    accuracy: pd.DataFrame | None = None,
    expansion: pd.DataFrame | None = None,
    overlap: pd.DataFrame | None = None,
    clustering: pd.DataFrame | None = None,
    layer_skip: pd.DataFrame | None = None,
    skip_spearman: pd.DataFrame | None = None,
    shapes: pd.DataFrame | None = None,
    family_pairs: pd.DataFrame | None = None,
    expected: Expected | None = None,
) -> pd.DataFrame:
    """Every claim with our estimate, its interval, the study's figure and a verdict.

    Args:
        knn: :func:`~entropy_lens.analysis.knn.knn_table` output (both protocols).
        renyi: :func:`~entropy_lens.analysis.equivalence.renyi_differences` rows.
        heldout: :func:`~entropy_lens.analysis.heldout.family_heldout` rows.
        accuracy: :func:`entropy_lens.answers.accuracy.accuracy_table` output.
        expansion: :func:`~entropy_lens.analysis.expansion.expansion_spearman` rows, with a
            ``dataset`` column when several datasets are stacked.
        overlap: :func:`~entropy_lens.analysis.expansion.nucleus_overlap` rows (``dataset`` as above).
        clustering: :func:`~entropy_lens.analysis.families.clustering_scores` output.
        layer_skip: :func:`entropy_lens.answers.criticality.skip_comparisons` rows.
        skip_spearman: :func:`entropy_lens.answers.criticality.criticality_spearman` rows.
        shapes: :func:`~entropy_lens.analysis.shapes.profile_shapes` rows (``dataset`` as above).
        family_pairs: :func:`~entropy_lens.analysis.pairs.family_pairs` rows.
        expected: What the configuration asked for (absent claims get a "not run" row).

    Returns:
        Frame with :data:`COLUMNS`; estimates in the row's ``unit`` scale of 0-1 (AUC,
        accuracy, shares), -1..1 (rho) or nats; NaN where a number is missing.
    """
    expected = expected or Expected()
    scopes = expected.skip_scopes()
    rows: list[dict[str, Any]] = []
    rows += _knn_rows(knn, accuracy, expected) if knn is not None else []
    rows += _heldout_rows(heldout) if heldout is not None else []
    rows += _renyi_rows(rows, renyi)
    rows += _spearman_rows(expansion) if expansion is not None else []
    rows += _accuracy_rows(accuracy, expected.families) if accuracy is not None else []
    rows += comparison_rows(layer_skip, scopes, _row) if layer_skip is not None else []
    rows += rank_rows(skip_spearman, scopes, _row) if skip_spearman is not None else []
    if clustering is not None or family_pairs is not None:
        rows += _pair_rows(family_pairs, clustering, expected)
    rows += _overlap_rows(overlap) if overlap is not None else []
    rows += _shape_rows(shapes, expected) if shapes is not None else []
    rows += _absent_rows(rows, expected) if expected.datasets else []
    return _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    rank = {claim: i for i, claim in enumerate(C.CLAIM_ORDER)}
    order = table["claim"].map(rank).fillna(len(rank))
    return table.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader needs first, one per claim, model and variant, in claim order: findings
    measured, findings the configuration did not run, then extensions and preconditions.

    Shannon entropy for separability; MMLU pooled over styles (correctness and accuracy) under
    the verdict measure; layer skipping at the smallest ``k``, the accuracy statistic (the
    study's), both selection variants; overlap by containment; the family pairs on the
    normalized scale; the Rényi claim's summary row.  Everything else stays in the full table;
    rows without a verdict and extensions the configuration did not run are left out.
    """
    claim, measure, split, unit = table["claim"], table["measure"], table["split"].astype(str), table["unit"]
    keep = table["verdict"] != ""
    keep &= ~claim.isin(C.KNN_CLAIMS.values()) | claim.eq(C.MODEL_IDENTITY) | measure.isin(["shannon", ""])
    keep &= ~claim.eq(C.MODEL_IDENTITY) | measure.eq("shannon")
    keep &= ~claim.isin([C.MMLU_CORRECT, C.ACCURACY]) | split.isin([ALL_STYLES, ""]) | ~_has_pooled(table)
    keep &= ~claim.isin([C.ACCURACY, *C.SKIP_CLAIMS]) | measure.isin([VERDICT_MEASURE, ""])
    keep &= ~claim.isin(C.SKIP_CLAIMS) | ~unit.eq(LOGPROB)
    keep &= ~claim.eq(C.RENYI) | split.eq("")  # the claim's summary; its per-order rows name a split
    keep &= ~claim.eq(C.OVERLAP) | measure.eq(CONTAINMENT_STATISTIC)
    keep &= ~claim.isin([C.CLUSTERING, C.SIZE_RESOLUTION]) | measure.isin([HEADLINE_SCALE, ""])
    skip_ks = split.where(claim.isin(C.SKIP_CLAIMS) & split.str.startswith("k=")).dropna()
    if not skip_ks.empty:
        smallest = min(skip_ks, key=lambda text: int(text[2:].split(",")[0]))
        keep &= (
            ~claim.isin(C.SKIP_CLAIMS)
            | ~split.str.startswith("k=")
            | split.str.startswith(smallest.split(",")[0] + ",")
        )
    top = table[keep]
    not_run = top["why"].astype(str).str.startswith(NOT_RUN)
    top, not_run = top[~(not_run & (top["role"] == C.EXTENSION))], not_run[~(not_run & (top["role"] == C.EXTENSION))]
    role = top["role"]
    return pd.concat(
        [
            top[~not_run & (role == C.FINDING)],
            top[not_run & (role == C.FINDING)],
            top[role == C.EXTENSION],
            top[role == C.PRECONDITION],
        ],
        ignore_index=True,
    )


def _has_pooled(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row pooled over MMLU styles."""
    pooled = {(c, m) for c, m, s in zip(table["claim"], table["model"], table["split"], strict=True) if s == ALL_STYLES}
    return pd.Series([(c, m) in pooled for c, m in zip(table["claim"], table["model"], strict=True)], index=table.index)


TABLE_INPUTS = (
    "knn",
    "renyi",
    "heldout",
    "accuracy",
    "expansion",
    "overlap",
    "clustering",
    "layer_skip",
    "skip_spearman",
    "shapes",
    "family_pairs",
)


def paper_table_from_files(paths: Mapping[str, str | Sequence[str]], expected: Expected) -> pd.DataFrame:
    """:func:`paper_table` from the analysis tables on disk.

    Args:
        paths: Keyword of :func:`paper_table` -> a CSV path, or several to stack (the
            per-dataset expansion and overlap tables).
        expected: What the configuration asked for.
    """
    unknown = sorted(set(paths) - set(TABLE_INPUTS))
    if unknown:
        raise ValueError(f"unknown paper-table inputs {unknown}; expected some of {list(TABLE_INPUTS)}")
    return paper_table(**{name: _read_csvs(value) for name, value in paths.items()}, expected=expected)


def _read_csvs(value: str | Sequence[str]) -> pd.DataFrame:
    files = [value] if isinstance(value, str) else list(value)
    frames = [pd.read_csv(f, keep_default_na=True) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["ACC", "AUC", "POINTS", "Expected", "headline", "paper_table", "paper_table_from_files"]
