"""The Rényi claim: Rényi entropy at other orders leaves the separability conclusions intact, read as the
equivalence of each order's kNN AUC with Shannon's on identical folds
(:mod:`entropy_lens.analysis.separability.equivalence`).

The equivalence is its own null (docs/verdicts.md, "Rényi: the equivalence is its own null"): the null is Shannon
on the same folds, the excess the paired Rényi - Shannon difference (so observed - null = beyond on every row), and
the beyond word the equivalence test itself. The claim's row carries the row that decides it.

Its record, its row rules, the paper-table input its rows come from (after the kNN rows it repeats) and its null,
as one object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis.separability.equivalence import EQUIVALENCE_COLUMNS, EQUIVALENCE_READING
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import FINDING, POOLED, SHANNON, Claim, Headline
from entropy_lens.verdicts.claims.separability import KNN_CLAIMS, KNN_NULL, KNN_TABLE, knn_unit, split_of
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, PaperInput
from entropy_lens.verdicts.readings import CHANCE
from entropy_lens.verdicts.rows import Record, RowRule, interval, row, rows_of
from entropy_lens.verdicts.tested import TestedClaim
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


# The Rényi rows' null: Shannon entropy's AUC on the same samples and folds.
SHANNON_NULL = "Shannon on the same folds"


def shannon_null(rec: Record) -> decision.Null:
    """A Rényi row's null: Shannon's AUC, the paired Rényi - Shannon difference read as an equivalence (±5)."""
    if "shannon_low" in rec:
        shannon = interval(rec, "shannon_auc", "shannon_low", "shannon_high")
    else:  # a table written before the columns existed: the point estimate
        shannon = decision.Interval(float(rec["shannon_auc"]), math.nan, math.nan)
    return decision.Null(
        SHANNON_NULL,
        shannon,
        interval(rec, "difference", "ci_low", "ci_high"),
        margin=rules.RENYI_MARGIN,
        observed=float(rec["renyi_auc"]),
        equivalence=True,
    )


def _renyi_rule(decided: Mapping[tuple[str, str, str], Any]) -> RowRule:
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
        null=lambda rec: shannon_null(rec) if pd.notna(rec.get("difference")) else None,
    )


# Which row decides the claim's beyond word: a row outside the band before an undecided one before one inside.
DECIDING_ORDER = (decision.NOT_SHOWN, decision.UNDECIDED_BEYOND, decision.SHOWN)


def _deciding(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row whose equivalence decides the claim: of the weakest word, the one reaching farthest from 0."""
    read = [r for r in rows if r.get("beyond_verdict") in DECIDING_ORDER]
    if not read:
        return None
    word = min((r["beyond_verdict"] for r in read), key=DECIDING_ORDER.index)
    same = [r for r in read if r["beyond_verdict"] == word]
    return max(same, key=lambda r: max(abs(r["beyond_low"]), abs(r["beyond_high"])))


def renyi_rows(rows: list[dict[str, Any]], equivalence: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per decided Shannon separability row and Rényi order, the paired equivalence; then the claim's row, whose
    null is the row that decides it (:func:`_deciding`): the equivalence read beyond its null is the claim's own."""
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
    out = rows_of(equivalence, _renyi_rule(decided))
    summary = rules.renyi_summary([r["verdict"] for r in out])
    orders = ", ".join(dict.fromkeys(r["measure"] for r in out))
    deciding = _deciding(out)
    extra: dict[str, Any] = {}
    if deciding is not None:
        extra[CHANCE.key] = decision.Null(
            f"{SHANNON_NULL} ({deciding['split']})",
            interval(deciding, "null_estimate", "null_low", "null_high"),
            interval(deciding, "beyond", "beyond_low", "beyond_high"),
            margin=rules.RENYI_MARGIN,
            observed=float(deciding["null_observed"]),
            equivalence=True,
        )
        extra["n_sources"] = deciding["n_sources"]
    summary_row = row(RENYI, "all", AUC_POINTS, summary, measure=orders, study=study.STUDY_RENYI_CLAIM, **extra)
    return [summary_row, *out]


RENYI_TABLE = PaperInput(
    "renyi",
    "analysis.separability.equivalence.renyi_equivalence",
    EQUIVALENCE_READING,
    lambda b: renyi_rows(b.rows, b.frames["renyi"]),
    from_store=f"{LOGIT_LENS_ONLY}: the Rényi orders",
    path="results/tables/renyi_equivalence.csv",
    columns=EQUIVALENCE_COLUMNS,
)

# It reads the kNN rows built before it; its null is the kNN rows' (a permutation of the labels on their folds).
RENYI_TESTED = TestedClaim(RENYI, _renyi_rule, (RENYI_TABLE, KNN_TABLE), KNN_NULL)
