"""MMLU accuracy: a precondition of the correctness and layer-skip claims (:mod:`entropy_lens.answers.accuracy`).

Its record, its row rule, the paper-table input its rows come from and its planted null, as one object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.answers.accuracy import ACCURACY_COLUMNS, ACCURACY_READING, ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import POOLED, PRECONDITION, Claim, Headline
from entropy_lens.verdicts.inputs import FROM_ANSWERS, WITH_MMLU, PaperInput, given
from entropy_lens.verdicts.rows import Record, RowRule, interval, rows_of, span
from entropy_lens.verdicts.tested import PlantedNull, TestedClaim
from entropy_lens.verdicts.units import ACC

ACCURACY = Claim(
    id="accuracy",
    name="MMLU accuracy above chance and the majority letter",
    sentence="precondition: a model must know MMLU before its right and wrong answers can be compared",
    role=PRECONDITION,
    unit="questions",
    dataset="mmlu",
    rule=rules.accuracy,
    figure="mmlu_accuracy",
    headline=Headline(measures=(VERDICT_MEASURE, ""), styles=POOLED),
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

    def study_figure(rec: Record) -> str:
        family = families.get(str(rec["model"]), "").lower()
        if family in study.STUDY_MMLU_ACCURACY:
            return f"{span(study.STUDY_MMLU_ACCURACY[family])} ({family} family)"
        return study.NO_FIGURE

    return RowRule(
        claim=ACCURACY,
        unit=ACC,
        judge=lambda acc, rec: rules.accuracy(
            acc, chance=float(rec["chance"]), majority=float(rec["majority_baseline"]), n=int(rec["n_questions"])
        ),
        study=study_figure,
        note=lambda rec: (
            f"answered {rec['top_letter']} for {100 * rec['top_share']:.0f}%; gold {rec['majority_letter']} "
            f"{100 * rec['majority_baseline']:.0f}%; {int(rec['n_unparsed'])} unparsed"
        ),
        extra=lambda rec: {"baseline": _bar(rec, "majority_baseline")},
        null=lambda rec: decision.fixed_null(
            "chance or the majority letter",
            interval(rec, ESTIMATE, LOW, HIGH),
            _bar(rec, "majority_baseline").estimate,
            margin=decision.NULL_MARGINS["accuracy"],
        ),
    )


def _bar(rec: Record, majority: str) -> decision.Interval:
    """The baseline a share must beat: the larger of chance and the majority's share, without an interval."""
    return decision.Interval(max(float(rec["chance"]), float(rec[majority])), math.nan, math.nan)


def accuracy_rows(accuracy: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    return rows_of(accuracy.assign(n_questions=_questions(accuracy)), accuracy_rule(families))


ACCURACY_TABLE = PaperInput(
    "accuracy",
    "answers.accuracy.accuracy_table",
    ACCURACY_READING,
    given("accuracy", lambda b: accuracy_rows(b.frames["accuracy"], b.expected.families)),
    from_store=FROM_ANSWERS,
    path="results/tables/mmlu_accuracy.csv",
    made=WITH_MMLU,
    columns=ACCURACY_COLUMNS,
)

ACCURACY_TESTED = TestedClaim(
    ACCURACY,
    accuracy_rule,
    (ACCURACY_TABLE,),
    PlantedNull(
        "entropy_lens.verdicts.planted_nulls:planted_share_at_bar",
        at_row="entropy_lens.verdicts.planted_nulls:accuracy_at_row",
    ),
)
