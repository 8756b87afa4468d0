"""Paper-table rows of the separability claims: kNN AUC per target (:mod:`entropy_lens.analysis.knn`),
the held-out family, and Rényi as equivalence with the Shannon rows it repeats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis import claims as C
from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.knn import GROUPED, STUDY
from entropy_lens.analysis.render import (
    AUC,
    AUC_POINTS,
    SHARE,
)
from entropy_lens.analysis.rows import Expected, count, family_shortfall, interval, row, span, text
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE


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
    """(claim, role) of a kNN target's rows."""
    if target == "family" and expected.one_model_per_family():
        return C.MODEL_IDENTITY, C.EXTENSION
    role = C.EXTENSION if target in C.EXTENSION_TARGETS else C.FINDING
    return C.KNN_CLAIMS.get(target, target), role


def split_of(rec: Mapping[str, Any]) -> str:
    split = text(rec.get("split"))
    return ALL_STYLES if rec["target"] == "mmlu_correct" and not split else split


def knn_rows(knn: pd.DataFrame, accuracy: pd.DataFrame | None, expected: Expected) -> list[dict[str, Any]]:
    rows = []
    knn = knn.assign(split=knn["split"].fillna("").astype(str), model=knn["model"].astype(str))
    study = knn[knn["protocol"] == STUDY].set_index(["target", "model", "split", "measure"])
    for rec in knn[knn["protocol"] == GROUPED].to_dict("records"):
        key = (rec["target"], rec["model"], rec["split"], rec["measure"])
        ungrouped = study.loc[key] if key in study.index else {"auc_mean": None, "auc_low": None, "auc_high": None}
        claim, role = knn_claim(str(rec["target"]), expected)
        split = split_of(rec)
        rows.append(
            row(
                claim,
                rec["model"],
                AUC,
                _separability(rec, accuracy, split, expected),
                role=role,
                split=split,
                measure=rec["measure"],
                ours=interval(rec, "auc_mean", "auc_low", "auc_high"),
                baseline=interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
                study_protocol=interval(ungrouped, "auc_mean", "auc_low", "auc_high"),
                study=_study_auc(rec["target"], rec["model"], expected.families.get(rec["model"], ""), rec["measure"]),
                n=count(rec.get("n_samples")),
                n_sources=count(rec.get("n_groups")),
                note=text(rec.get("note")),
            )
        )
    return rows


def _separability(rec: Mapping[str, Any], accuracy: pd.DataFrame | None, split: str, expected: Expected) -> V.Verdict:
    if rec["target"] == "family" and "blank" in expected.datasets and (shortfall := family_shortfall(expected)):
        return V.not_run(shortfall)
    if rec["target"] == "mmlu_correct":
        blocked = _correctness_blocked(accuracy, str(rec["model"]), split)
        if blocked is not None:
            return blocked
    note = text(rec.get("note"))
    return V.separability(
        interval(rec, "auc_mean", "auc_low", "auc_high"),
        interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
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


def heldout_rows(heldout: pd.DataFrame) -> list[dict[str, Any]]:
    """A row per held-out model (a family with two or more models on the blank set)."""
    rows = []
    for rec in heldout.to_dict("records"):
        share = interval(rec, "share", "ci_low", "ci_high")
        bar = max(float(rec["chance"]), float(rec["majority_share"]))
        note = text(rec.get("note"))
        verdict = (
            V.Verdict(V.INCONCLUSIVE, f"not scored: {note}")
            if not share.finite
            else V.held_out_family(share, bar=bar, n=int(rec["n"]), family=str(rec["family"]))
        )
        rows.append(
            row(
                C.FAMILY_HELDOUT,
                str(rec["model"]),
                SHARE,
                verdict,
                split="blank",
                measure="shannon",
                ours=share,
                baseline=V.Interval(bar, math.nan, math.nan),
                study=C.STUDY_FAMILY_CLAIM,
                n=count(rec["n"]),
                n_sources=count(rec["n"]),
                note="; ".join(
                    t
                    for t in (
                        f"trained on {int(rec['n_train'])} samples of {int(rec['n_train_families'])} families "
                        f"without this model; predicted: {text(rec['predicted'])}",
                        note,
                    )
                    if t
                ),
            )
        )
    return rows


# --------------------------------------------------------------------------- Rényi


def renyi_rows(rows: list[dict[str, Any]], equivalence: pd.DataFrame | None) -> list[dict[str, Any]]:
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
        key = (C.KNN_CLAIMS.get(target, target), str(rec["model"]), split_of(rec))
        if key not in decided:
            continue
        diff = interval(rec, "difference", "ci_low", "ci_high")
        verdict = V.renyi_equivalence(diff, n_groups=int(rec["n_groups"]), unit=C.KNN_UNITS.get(target, "sources"))
        out.append(
            row(
                C.RENYI,
                key[1],
                AUC_POINTS,
                verdict,
                split=f"{key[0]}{', ' + key[2] if key[2] else ''}, α = {float(rec['alpha']):g}",
                measure=str(rec["measure"]),
                ours=diff,
                study=C.STUDY_RENYI_CLAIM,
                n=count(rec["n_samples"]),
                n_sources=count(rec["n_groups"]),
                note=f"AUC Shannon {100 * rec['shannon_auc']:.1f}, this order {100 * rec['renyi_auc']:.1f}",
            )
        )
    summary = V.renyi_summary([r["verdict"] for r in out])
    orders = ", ".join(dict.fromkeys(r["measure"] for r in out))
    return [row(C.RENYI, "all", "", summary, measure=orders, study=C.STUDY_RENYI_CLAIM), *out]
