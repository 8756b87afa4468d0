"""The Rényi claim: Rényi entropy at other orders leaves the separability conclusions intact, read as the
equivalence of each order's kNN AUC with Shannon's on identical folds
(:mod:`entropy_lens.analysis.separability.equivalence`).

Its record, its row rules, and the paper-table input its rows come from (after the kNN rows it repeats).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis.separability.equivalence import EQUIVALENCE_READING
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import FINDING, POOLED, SHANNON, Claim, Headline
from entropy_lens.verdicts.claims.separability import KNN_CLAIMS, knn_unit, split_of
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, PaperInput
from entropy_lens.verdicts.rows import Record, RowRule, interval, row, rows_of, text
from entropy_lens.verdicts.units import AUC_POINTS

RENYI = Claim(
    id="renyi",
    name="Rényi entropy leaves the separability conclusions intact",
    sentence="Rényi entropy (α = 0.5, 1, 5) leaves the conclusions intact",
    role=FINDING,
    unit="sources of each split",
    dataset="",
    rule=rules.renyi_equivalence,
    figure="renyi",
    headline=Headline(splits=("",)),  # the claim's summary; its per-order rows name a split
    aggregation=POOLED,
)

# The kNN claims by id: the Shannon rows a Rényi order repeats.
KNN_IDS: dict[str, Claim] = {c.id: c for c in KNN_CLAIMS.values()}


def _renyi_key(rec: Record) -> tuple[str, str, str]:
    """(claim id, model, split) of the Shannon row a Rényi record repeats."""
    target = str(rec["target"])
    return KNN_CLAIMS[target].id if target in KNN_CLAIMS else target, str(rec["model"]), split_of(rec)


def _renyi_rule(decided: Mapping[tuple[str, str, str], Any], nulls: Mapping[tuple[str, ...], decision.Null]) -> RowRule:
    def split(rec: Record) -> str:
        claim_id, _, shannon_split = _renyi_key(rec)
        claim = KNN_IDS[claim_id].name if claim_id in KNN_IDS else claim_id
        return f"{claim}{', ' + shannon_split if shannon_split else ''}, α = {float(rec['alpha']):g}"

    return RowRule(
        claim=RENYI,
        unit=AUC_POINTS,
        judge=lambda diff, rec: rules.renyi_equivalence(
            diff, n_groups=int(rec["n_groups"]), unit=knn_unit(str(rec["target"]))
        ),
        note=lambda rec: f"AUC Shannon {100 * rec['shannon_auc']:.1f}, this order {100 * rec['renyi_auc']:.1f}",
        keep=lambda rec: _renyi_key(rec) in decided,
        split=split,
        null=lambda rec: nulls.get((*_renyi_key(rec), str(rec["measure"]))),
    )


def _order_nulls(rows: list[dict[str, Any]]) -> dict[tuple[str, ...], decision.Null]:
    """Each Rényi order's separability row's null (the stratified dummy, paired on its folds), keyed by the
    Shannon row it repeats and the order: equivalence to Shannon means something only where the order's own
    profile beats the dummy."""
    return {
        (r["claim_id"], r["model"], r["split"], r["measure"]): decision.Null(
            f"{r['null']} ({r['measure']} profile)",
            interval(r, "null_estimate", "null_low", "null_high"),
            interval(r, "beyond", "beyond_low", "beyond_high"),
            margin=decision.NULL_MARGINS["AUC"],
        )
        for r in rows
        if r["claim_id"] in KNN_IDS and r["measure"] != SHANNON and text(r.get("beyond_verdict"))
    }


def renyi_rows(rows: list[dict[str, Any]], equivalence: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per decided Shannon separability row and Rényi order, the paired equivalence; then the claim's row,
    whose null is the weakest order's (the one whose profile beats its dummy by least)."""
    if equivalence is None or equivalence.empty:
        return []
    decided = {
        (r["claim_id"], r["model"], r["split"]): r
        for r in rows
        if r["claim_id"] in KNN_IDS
        and r["measure"] == SHANNON
        and r["role"] == FINDING
        and r["verdict"] in (decision.REPRODUCED, decision.NOT_REPRODUCED)
    }
    nulls = _order_nulls(rows)
    out = rows_of(equivalence, _renyi_rule(decided, nulls))
    summary = rules.renyi_summary([r["verdict"] for r in out])
    orders = ", ".join(dict.fromkeys(r["measure"] for r in out))
    with_null = [r for r in out if text(r.get("beyond_verdict"))]
    weakest = min(with_null, key=lambda r: r["beyond_low"]) if with_null else None
    extra: dict[str, Any] = {}
    if weakest is not None:
        extra["null"] = decision.Null(
            f"{weakest['null']}, weakest order",
            interval(weakest, "null_estimate", "null_low", "null_high"),
            interval(weakest, "beyond", "beyond_low", "beyond_high"),
            margin=decision.NULL_MARGINS["AUC"],
        )
        extra["n_sources"] = weakest["n_sources"]
    return [row(RENYI, "all", "", summary, measure=orders, study=study.STUDY_RENYI_CLAIM, **extra), *out]


INPUTS = {
    "renyi": PaperInput(
        "analysis.separability.equivalence.renyi_equivalence",
        EQUIVALENCE_READING,
        lambda b: renyi_rows(b.rows, b.frames["renyi"]),
        from_store=f"{LOGIT_LENS_ONLY}: the Rényi orders",
    ),
}
