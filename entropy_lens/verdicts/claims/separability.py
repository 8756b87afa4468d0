"""Paper-table rows of the separability claims: kNN AUC per target (:mod:`entropy_lens.analysis.separability.knn`),
the held-out family, and Rényi as equivalence with the Shannon rows it repeats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis.separability.folds import GROUPED, STUDY
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import registry as C
from entropy_lens.verdicts import rules as V
from entropy_lens.verdicts.rows import Expected, Record, RowRule, family_shortfall, interval, row, rows_of, span, text
from entropy_lens.verdicts.units import AUC, AUC_POINTS, SHARE


def _study_auc(target: str, model: str, family: str, measure: str) -> str:
    if measure != "shannon":
        return C.NO_FIGURE
    matched = C.study_model_for(model)
    if target == "task":
        return f"{C.STUDY_TASK_AUC[matched]:.2f}" if matched in C.STUDY_TASK_AUC else span(C.STUDY_TASK_AUC.values())
    if target == "format":
        if matched in C.STUDY_FORMAT_AUC:
            return "{:.1f} ± {:.1f}".format(*C.STUDY_FORMAT_AUC[matched])
        return span([m for m, _ in C.STUDY_FORMAT_AUC.values()])
    if target == "mmlu_correct" and family.lower() in C.STUDY_MMLU_AUC:
        return f"{span(C.STUDY_MMLU_AUC[family.lower()])} ({family.lower()} family)"
    return C.NO_FIGURE


def knn_claim(target: str, expected: Expected) -> tuple[str, str]:
    """(claim id, role) of a kNN target's rows."""
    if target == "family" and expected.one_model_per_family():
        return "model_identity", C.EXTENSION
    role = C.EXTENSION if target in C.EXTENSION_TARGETS else C.FINDING
    return C.KNN_CLAIMS.get(target, target), role


# The answer measure whose correctness each MMLU target labels (entropy_lens.answers.letters.MEASURES): the greedy
# letter, whose generation's profile is read, and the calibrated variant.
CORRECTNESS_MEASURES = {"mmlu_correct": "ll", "mmlu_correct_calibrated": VERDICT_MEASURE}


def split_of(rec: Mapping[str, Any]) -> str:
    split = text(rec.get("split"))
    return ALL_STYLES if rec["target"] in CORRECTNESS_MEASURES and not split else split


def knn_rule(accuracy: pd.DataFrame | None, expected: Expected) -> RowRule:
    """The grouped protocol's AUC against the dummy classifier, the study protocol's beside it."""
    return RowRule(
        claim=lambda rec: knn_claim(str(rec["target"]), expected)[0],
        unit=AUC,
        judge=lambda auc, rec: _separability(rec, accuracy, split_of(rec), expected),
        role=lambda rec: knn_claim(str(rec["target"]), expected)[1],
        study=lambda rec: _study_auc(
            rec["target"], rec["model"], expected.families.get(rec["model"], ""), rec["measure"]
        ),
        note=lambda rec: text(rec.get("note")),
        split=split_of,
        extra=lambda rec: {
            "baseline": interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
            "study_protocol": interval(rec, "study_mean", "study_low", "study_high"),
        },
        margin=D.NULL_MARGINS["AUC"],
    )


def knn_rows(knn: pd.DataFrame, accuracy: pd.DataFrame | None, expected: Expected) -> list[dict[str, Any]]:
    return rows_of(_with_study_protocol(knn), knn_rule(accuracy, expected))


def _with_study_protocol(knn: pd.DataFrame) -> pd.DataFrame:
    """The grouped protocol's rows, each with the study protocol's (ungrouped folds) AUC and interval."""
    keys = ["target", "model", "split", "measure"]
    study = knn[knn["protocol"] == STUDY].drop_duplicates(keys)[[*keys, "auc_mean", "auc_low", "auc_high"]]
    study = study.rename(columns={"auc_mean": "study_mean", "auc_low": "study_low", "auc_high": "study_high"})
    return knn[knn["protocol"] == GROUPED].merge(study, on=keys, how="left")


def _separability(rec: Mapping[str, Any], accuracy: pd.DataFrame | None, split: str, expected: Expected) -> D.Verdict:
    if rec["target"] == "family" and "blank" in expected.datasets and (shortfall := family_shortfall(expected)):
        return D.not_run(shortfall)
    if rec["target"] in CORRECTNESS_MEASURES:
        blocked = _correctness_blocked(accuracy, str(rec["model"]), split, CORRECTNESS_MEASURES[str(rec["target"])])
        if blocked is not None:
            return blocked
    note = text(rec.get("note"))
    return V.separability(
        interval(rec, ESTIMATE, LOW, HIGH),
        interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
        k_used=int(rec["k"]) if pd.notna(rec.get("k")) else None,
        k_study=expected.k_study,
        n_groups=int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0,
        skipped=note if note.startswith("skipped") else "",
        unit=C.KNN_UNITS.get(str(rec["target"]), "sources"),
    )


def _correctness_blocked(
    accuracy: pd.DataFrame | None, model: str, style: str, measure: str = VERDICT_MEASURE
) -> D.Verdict | None:
    """Inconclusive when the correctness label is letter bias or chance (see :func:`verdicts.answers_at_chance`)."""
    if accuracy is None:
        return None
    hit = accuracy[(accuracy["model"] == model) & (accuracy["style"] == style) & (accuracy["measure"] == measure)]
    if hit.empty:
        return None
    rec = hit.iloc[0]
    acc = D.Interval(rec["accuracy"], rec["ci_low"], rec["ci_high"])
    return V.answers_at_chance(acc, float(rec["chance"]), float(rec["top_share"]), str(rec["top_letter"]))


def _heldout_bar(rec: Record) -> float:
    """The share a held-out model's samples must beat: chance or the training majority's share."""
    return max(float(rec["chance"]), float(rec["majority_share"]))


def _heldout_verdict(share: D.Interval, rec: Record) -> D.Verdict:
    if not share.finite:
        return D.Verdict(D.INCONCLUSIVE, f"not scored: {text(rec.get('note'))}")
    return V.held_out_family(share, bar=_heldout_bar(rec), n=int(rec["n"]), family=str(rec["family"]))


def _heldout_note(rec: Record) -> str:
    trained = (
        f"trained on {int(rec['n_train'])} samples of {int(rec['n_train_families'])} families "
        f"without this model; predicted: {text(rec['predicted'])}"
    )
    return "; ".join(t for t in (trained, text(rec.get("note"))) if t)


HELDOUT_RULE = RowRule(
    claim="family_heldout",
    unit=SHARE,
    judge=_heldout_verdict,
    note=_heldout_note,
    extra=lambda rec: {"baseline": D.Interval(_heldout_bar(rec), math.nan, math.nan)},
    null=lambda rec: D.fixed_null(
        "no-signal classifier", interval(rec, ESTIMATE, LOW, HIGH), _heldout_bar(rec), margin=D.NULL_MARGINS["share"]
    ),
)


# --------------------------------------------------------------------------- baselines (issue 36)

# kNN target -> the extension claim of its profile-minus-baseline rows (entropy_lens.analysis.separability.baselines).
BASELINE_CLAIMS = {
    "task": "task_beyond_baselines",
    "task_scrambled": "task_beyond_baselines",
    "format": "format_beyond_baselines",
    "mmlu_correct": "correct_beyond_confidence",
}


def _baseline_split(rec: Record) -> str:
    split = split_of(rec)
    return f"scrambled{', ' + split if split else ''}" if rec["target"] == "task_scrambled" else split


def _baseline_verdict(diff: D.Interval, rec: Record) -> D.Verdict:
    n_groups = int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0
    statistic = f"AUC profile − {rec['baseline']}"
    return V.above_threshold(
        diff, threshold=0.0, n=n_groups, statistic=statistic, unit=C.KNN_UNITS.get(str(rec["target"]), "sources")
    )


def _baseline_note(rec: Record) -> str:
    aucs = ""
    if pd.notna(rec.get("auc_mean")) and pd.notna(rec.get("null_estimate")):
        aucs = f"AUC profile {100 * rec['auc_mean']:.1f}, {rec['baseline']} {100 * rec['null_estimate']:.1f}"
    return "; ".join(t for t in (aucs, text(rec.get("note"))) if t)


# The profile's AUC minus a baseline's on the same folds: an extension row per (target, split, model, baseline);
# its paper-table input is baselines.BASELINE_READING's frame of knn_baselines.csv.
BASELINE_RULE = RowRule(
    claim=lambda rec: BASELINE_CLAIMS[str(rec["target"])],
    unit=AUC_POINTS,
    judge=_baseline_verdict,
    note=_baseline_note,
    keep=lambda rec: str(rec["target"]) in BASELINE_CLAIMS,
    split=_baseline_split,
    measure=lambda rec: str(rec["baseline"]),
    extra=lambda rec: {"baseline": interval(rec, "null_estimate", "null_low", "null_high")},
    margin=D.NULL_MARGINS["AUC"],
)


# --------------------------------------------------------------------------- Rényi


def _renyi_key(rec: Record) -> tuple[str, str, str]:
    """(claim id, model, split) of the Shannon row a Rényi record repeats."""
    target = str(rec["target"])
    return C.KNN_CLAIMS.get(target, target), str(rec["model"]), split_of(rec)


def _renyi_rule(decided: Mapping[tuple[str, str, str], Any], nulls: Mapping[tuple[str, ...], D.Null]) -> RowRule:
    def split(rec: Record) -> str:
        claim_id, _, shannon_split = _renyi_key(rec)
        claim = C.BY_ID[claim_id].name if claim_id in C.BY_ID else claim_id
        return f"{claim}{', ' + shannon_split if shannon_split else ''}, α = {float(rec['alpha']):g}"

    return RowRule(
        claim="renyi",
        unit=AUC_POINTS,
        judge=lambda diff, rec: V.renyi_equivalence(
            diff, n_groups=int(rec["n_groups"]), unit=C.KNN_UNITS.get(str(rec["target"]), "sources")
        ),
        note=lambda rec: f"AUC Shannon {100 * rec['shannon_auc']:.1f}, this order {100 * rec['renyi_auc']:.1f}",
        keep=lambda rec: _renyi_key(rec) in decided,
        split=split,
        null=lambda rec: nulls.get((*_renyi_key(rec), str(rec["measure"]))),
    )


def _order_nulls(rows: list[dict[str, Any]]) -> dict[tuple[str, ...], D.Null]:
    """Each Rényi order's separability row's null (the stratified dummy, paired on its folds), keyed by the
    Shannon row it repeats and the order: equivalence to Shannon means something only where the order's own
    profile beats the dummy."""
    return {
        (r["claim_id"], r["model"], r["split"], r["measure"]): D.Null(
            f"{r['null']} ({r['measure']} profile)",
            interval(r, "null_estimate", "null_low", "null_high"),
            interval(r, "beyond", "beyond_low", "beyond_high"),
            margin=D.NULL_MARGINS["AUC"],
        )
        for r in rows
        if r["claim_id"] in C.KNN_CLAIMS.values() and r["measure"] != "shannon" and text(r.get("beyond_verdict"))
    }


def renyi_rows(rows: list[dict[str, Any]], equivalence: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per decided Shannon separability row and Rényi order, the paired equivalence; then the claim's row,
    whose null is the weakest order's (the one whose profile beats its dummy by least)."""
    if equivalence is None or equivalence.empty:
        return []
    decided = {
        (r["claim_id"], r["model"], r["split"]): r
        for r in rows
        if r["claim_id"] in C.KNN_CLAIMS.values()
        and r["measure"] == "shannon"
        and r["role"] == C.FINDING
        and r["verdict"] in (D.REPRODUCED, D.NOT_REPRODUCED)
    }
    nulls = _order_nulls(rows)
    out = rows_of(equivalence, _renyi_rule(decided, nulls))
    summary = V.renyi_summary([r["verdict"] for r in out])
    orders = ", ".join(dict.fromkeys(r["measure"] for r in out))
    with_null = [r for r in out if text(r.get("beyond_verdict"))]
    weakest = min(with_null, key=lambda r: r["beyond_low"]) if with_null else None
    extra: dict[str, Any] = {}
    if weakest is not None:
        extra["null"] = D.Null(
            f"{weakest['null']}, weakest order",
            interval(weakest, "null_estimate", "null_low", "null_high"),
            interval(weakest, "beyond", "beyond_low", "beyond_high"),
            margin=D.NULL_MARGINS["AUC"],
        )
        extra["n_sources"] = weakest["n_sources"]
    return [row("renyi", "all", "", summary, measure=orders, study=C.STUDY_RENYI_CLAIM, **extra), *out]
