"""The baseline extensions: does a profile separate tasks, formats or right from wrong answers beyond what a
trivial reading of the same samples already separates (:mod:`entropy_lens.analysis.separability.baselines`)?

Each claim's record, its row rule, and the paper-table input its rows come from.
"""

from __future__ import annotations

import pandas as pd

from entropy_lens.analysis.separability.baselines import BASELINE_READING
from entropy_lens.verdicts import decision, rules
from entropy_lens.verdicts.claim import EXTENSION, Claim
from entropy_lens.verdicts.claims.separability import knn_unit, split_of
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, PaperInput, rule_rows
from entropy_lens.verdicts.rows import Record, RowRule, interval, text
from entropy_lens.verdicts.units import AUC_POINTS

CORRECT_BEYOND_CONFIDENCE = Claim(
    id="correct_beyond_confidence",
    name="MMLU correctness: the profile beyond the model's confidence",
    sentence="does the profile carry correctness beyond the final-layer entropy and the top-letter probability?",
    role=EXTENSION,
    unit="questions",
    dataset="mmlu",
    rule=rules.above_threshold,
)

TASK_BEYOND_BASELINES = Claim(
    id="task_beyond_baselines",
    name="task separability beyond the first token and the prompt text",
    sentence="does the profile tell tasks apart beyond its first token and a bag of words on the prompt?",
    role=EXTENSION,
    unit="stories",
    dataset="tasks",
    rule=rules.above_threshold,
)

FORMAT_BEYOND_BASELINES = Claim(
    id="format_beyond_baselines",
    name="format separability beyond the first token and the prompt text",
    sentence="does the profile tell formats apart beyond its first token and a bag of words on the prompt?",
    role=EXTENSION,
    unit="topics",
    dataset="formats",
    rule=rules.above_threshold,
)


# kNN target -> the extension claim of its profile-minus-baseline rows (entropy_lens.analysis.separability.baselines).
BASELINE_CLAIMS = {
    "task": TASK_BEYOND_BASELINES,
    "task_scrambled": TASK_BEYOND_BASELINES,
    "format": FORMAT_BEYOND_BASELINES,
    "mmlu_correct": CORRECT_BEYOND_CONFIDENCE,
}


def _baseline_split(rec: Record) -> str:
    split = split_of(rec)
    return f"scrambled{', ' + split if split else ''}" if rec["target"] == "task_scrambled" else split


def _baseline_verdict(diff: decision.Interval, rec: Record) -> decision.Verdict:
    n_groups = int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0
    statistic = f"AUC profile − {rec['baseline']}"
    return rules.above_threshold(
        diff, threshold=0.0, n=n_groups, statistic=statistic, unit=knn_unit(str(rec["target"]))
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
    margin=decision.NULL_MARGINS["AUC"],
)

INPUTS = {
    "baselines": PaperInput(
        "analysis.separability.baselines.baseline_table",
        BASELINE_READING,
        rule_rows("baselines", BASELINE_RULE),
        from_store=f"{LOGIT_LENS_ONLY}: the profile against its first token and the prompt text",
    ),
}
