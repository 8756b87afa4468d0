"""The separability claims: kNN AUC per target (:mod:`entropy_lens.analysis.separability.knn`) and the held-out family.

Each claim's record, its row rule, and the inputs of the paper table its rows come from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import xarray as xr

from entropy_lens.analysis.separability.folds import GROUPED, STUDY
from entropy_lens.analysis.separability.heldout import (
    HELDOUT_NORMALIZED_READING,
    HELDOUT_READING,
    OVER_MODELS,
    family_heldout,
)
from entropy_lens.analysis.separability.targets import KNN_READING, knn_table
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import EXTENSION, FINDING, POOLED, SHANNON, SHANNON_ROWS, Claim, Headline
from entropy_lens.verdicts.claims.baselines import feature_reading
from entropy_lens.verdicts.inputs import (
    LOGIT_LENS_ONLY,
    PaperInput,
    StoreSettings,
    families_read,
    given,
    rule_rows,
)
from entropy_lens.verdicts.readings import FEATURE, NotRead
from entropy_lens.verdicts.rows import (
    Expected,
    Record,
    RowRule,
    family_shortfall,
    interval,
    rows_of,
    span,
    table_null,
    text,
)
from entropy_lens.verdicts.units import AUC, SHARE

# --------------------------------------------------------------------------- the claims

TASK = Claim(
    id="task",
    name="task separability (intact prompts)",
    sentence="entropy profiles separate the task (continue, count words, extract gist)",
    role=FINDING,
    unit="stories",
    dataset="tasks",
    rule=rules.separability,
    figure="task_auc",
    knn_target="task",
    headline=SHANNON_ROWS,
)

SCRAMBLED = Claim(
    id="scrambled",
    name="task separability (scrambled control)",
    sentence="the task is still told apart when the story's words are scrambled (control)",
    role=FINDING,
    unit="stories",
    dataset="tasks",
    rule=rules.separability,
    figure="task_auc",
    knn_target="task_scrambled",
    headline=SHANNON_ROWS,
)

FORMAT = Claim(
    id="format",
    name="format separability",
    sentence="entropy profiles separate the output format (poem, scientific blurb, chat log)",
    role=FINDING,
    unit="topics",
    dataset="formats",
    rule=rules.separability,
    figure="format_auc",
    knn_target="format",
    headline=SHANNON_ROWS,
)

FAMILY = Claim(
    id="family",
    name="family separability (blank prompts)",
    sentence="blank-prompt profiles tell model families apart",
    role=FINDING,
    unit="blank samples",
    dataset="blank",
    rule=rules.separability,
    figure="family",
    knn_target="family",
    headline=SHANNON_ROWS,
    aggregation=POOLED,
)

FAMILY_HELDOUT = Claim(
    id="family_heldout",
    name="family held out across size: an unseen model's blank profiles fall in its own family",
    sentence="profiles cluster by family, not size: a model left out falls in its family",
    role=FINDING,
    unit="held-out models",
    dataset="blank",
    rule=rules.held_out_family,
    figure="family",
    headline=Headline(measures=(SHANNON,)),
    aggregation=POOLED,
)

MODEL_IDENTITY = Claim(
    id="model_identity",
    name="model identity (blank prompts; one model per family)",
    sentence="with one model per family, family separability is model identity",
    role=EXTENSION,
    unit="blank samples",
    dataset="blank",
    rule=rules.separability,
    headline=Headline(measures=(SHANNON,)),
    aggregation=POOLED,
)

IMAGE_CLASS = Claim(
    id="image_class",
    name="image class separability (image classifiers)",
    sentence="beyond the study: image classes from image classifiers' profiles",
    role=EXTENSION,
    unit="images",
    dataset="images",
    rule=rules.separability,
    figure="",
    knn_target="image_class",
    headline=SHANNON_ROWS,
)

MMLU_CORRECT = Claim(
    id="mmlu_correct",
    name="MMLU correctness separability",
    sentence="entropy profiles separate right from wrong MMLU answers",
    role=FINDING,
    unit="questions",
    dataset="mmlu",
    rule=rules.separability,
    figure="mmlu_auc",
    knn_target="mmlu_correct",
    headline=Headline(measures=(SHANNON, ""), styles=POOLED),  # the three styles are one question's prompts
)

MMLU_CORRECT_CALIBRATED = Claim(
    id="mmlu_correct_calibrated",
    name="MMLU correctness separability (calibrated letter)",
    sentence="variant: right from wrong by the calibrated letter, an answer the greedy generation need not give",
    role=EXTENSION,
    unit="questions",
    dataset="mmlu",
    rule=rules.separability,
    knn_target="mmlu_correct_calibrated",
    headline=SHANNON_ROWS,
)

# kNN target -> the claim its rows test, and the extension targets (beyond the study's claims).
KNN_CLAIMS: dict[str, Claim] = {
    c.knn_target: c for c in (TASK, SCRAMBLED, FORMAT, FAMILY, IMAGE_CLASS, MMLU_CORRECT, MMLU_CORRECT_CALIBRATED)
}
EXTENSION_TARGETS = tuple(target for target, c in KNN_CLAIMS.items() if c.role == EXTENSION)


def knn_unit(target: str) -> str:
    """What a kNN target's intervals resample (its claim's unit)."""
    return KNN_CLAIMS[target].unit if target in KNN_CLAIMS else "sources"


def _study_auc(target: str, model: str, family: str, measure: str) -> str:
    if measure != SHANNON:
        return study.NO_FIGURE
    matched = study.study_model_for(model)
    if target == "task":
        return (
            f"{study.STUDY_TASK_AUC[matched]:.2f}"
            if matched in study.STUDY_TASK_AUC
            else span(study.STUDY_TASK_AUC.values())
        )
    if target == "format":
        if matched in study.STUDY_FORMAT_AUC:
            return "{:.1f} ± {:.1f}".format(*study.STUDY_FORMAT_AUC[matched])
        return span([m for m, _ in study.STUDY_FORMAT_AUC.values()])
    if target == "mmlu_correct" and family.lower() in study.STUDY_MMLU_AUC:
        return f"{span(study.STUDY_MMLU_AUC[family.lower()])} ({family.lower()} family)"
    return study.NO_FIGURE


def knn_claim(target: str, expected: Expected) -> tuple[Claim, str]:
    """(claim, role) of a kNN target's rows.

    Raises:
        ValueError: naming a target no claim tests.
    """
    if target == "family" and expected.one_model_per_family():
        return MODEL_IDENTITY, EXTENSION
    if target not in KNN_CLAIMS:
        raise ValueError(f"no claim tests kNN target {target!r}; claimed targets: {list(KNN_CLAIMS)}")
    return KNN_CLAIMS[target], EXTENSION if target in EXTENSION_TARGETS else FINDING


# The answer measure whose correctness each MMLU target labels (entropy_lens.answers.letters.MEASURES): the greedy
# letter, whose generation's profile is read, and the calibrated variant.
CORRECTNESS_MEASURES = {"mmlu_correct": "ll", "mmlu_correct_calibrated": VERDICT_MEASURE}


def split_of(rec: Mapping[str, Any]) -> str:
    split = text(rec.get("split"))
    return ALL_STYLES if rec["target"] in CORRECTNESS_MEASURES and not split else split


def knn_rule(accuracy: pd.DataFrame | None, baselines: pd.DataFrame | None, expected: Expected) -> RowRule:
    """The grouped protocol's AUC and its paired excess over the dummy classifier, the study protocol's beside it,
    read beyond chance and beyond the simplest feature (none on a model that answers MMLU at chance)."""
    feature = feature_reading(baselines)

    def gate(rec: Record) -> decision.Verdict | None:
        return _correctness_gate(accuracy, rec)

    def chance(rec: Record) -> decision.Null | NotRead | None:
        blocked = gate(rec)
        return NotRead(_reason(blocked)) if blocked else table_null(rec, margin=decision.NULL_MARGINS["AUC"])

    def readings(rec: Record) -> dict[str, decision.Null | NotRead | None]:
        blocked = gate(rec)
        return {FEATURE.key: NotRead(_reason(blocked)) if blocked else feature(rec)}

    return RowRule(
        claim=lambda rec: knn_claim(str(rec["target"]), expected)[0],
        unit=AUC,
        judge=lambda auc, rec: gate(rec) or _separability(rec, expected),
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
        null=chance,
        margin=decision.NULL_MARGINS["AUC"],
        readings=readings,
    )


def knn_rows(
    knn: pd.DataFrame, accuracy: pd.DataFrame | None, baselines: pd.DataFrame | None, expected: Expected
) -> list[dict[str, Any]]:
    return rows_of(_with_study_protocol(knn), knn_rule(accuracy, baselines, expected))


def _with_study_protocol(knn: pd.DataFrame) -> pd.DataFrame:
    """The grouped protocol's rows, each with the study protocol's (ungrouped folds) AUC and interval."""
    keys = ["target", "model", "split", "measure"]
    protocol = knn[knn["protocol"] == STUDY].drop_duplicates(keys)[[*keys, "auc_mean", "auc_low", "auc_high"]]
    protocol = protocol.rename(columns={"auc_mean": "study_mean", "auc_low": "study_low", "auc_high": "study_high"})
    return knn[knn["protocol"] == GROUPED].merge(protocol, on=keys, how="left")


def _separability(rec: Mapping[str, Any], expected: Expected) -> decision.Verdict:
    if rec["target"] == "family" and "blank" in expected.datasets and (shortfall := family_shortfall(expected)):
        return decision.not_run(shortfall)
    note = text(rec.get("note"))
    return rules.separability(
        interval(rec, ESTIMATE, LOW, HIGH),
        interval(rec, "beyond", "beyond_low", "beyond_high"),
        k_used=int(rec["k"]) if pd.notna(rec.get("k")) else None,
        k_study=expected.k_study,
        n_groups=int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0,
        skipped=note if note.startswith("skipped") else "",
        unit=knn_unit(str(rec["target"])),
        ceiling=match.group(0) if (match := CEILING_NOTE.search(note)) else "",
    )


# The kNN table's note where an AUC sat at a bound in every fold (analysis.separability.knn.ceiling_note).
CEILING_NOTE = re.compile(r"(ceiling|floor): every fold \d+; exact interval over \d+ sources")
# The start of the why of a correctness row whose model answers at chance (docs/verdicts.md).
AT_CHANCE = "not read: the model answers at chance"


def _reason(blocked: decision.Verdict | None) -> str:
    """Why a gated row is not read, without the shared prefix."""
    return (blocked.why if blocked else "").removeprefix("not read: ")


def _correctness_gate(accuracy: pd.DataFrame | None, rec: Record) -> decision.Verdict | None:
    """A correctness row whose model fails the MMLU precondition (accuracy not above chance and the majority
    letter), or answers one letter (:func:`~entropy_lens.verdicts.rules.answers_at_chance`), is not read: no
    as-stated reading, no reading beyond chance or beyond its simplest feature; ``None`` for any other row."""
    if accuracy is None or rec["target"] not in CORRECTNESS_MEASURES:
        return None
    model, style, measure = str(rec["model"]), split_of(rec), CORRECTNESS_MEASURES[str(rec["target"])]
    hit = accuracy[(accuracy["model"] == model) & (accuracy["style"] == style) & (accuracy["measure"] == measure)]
    if hit.empty:
        return None
    row = hit.iloc[0]
    acc = decision.Interval(row["accuracy"], row["ci_low"], row["ci_high"])
    biased = rules.answers_at_chance(acc, float(row["chance"]), float(row["top_share"]), str(row["top_letter"]))
    if biased is not None:
        return decision.Verdict(decision.INCONCLUSIVE, f"{AT_CHANCE} ({biased.why})")
    majority = float(row["majority_baseline"])
    precondition = rules.accuracy(acc, chance=float(row["chance"]), majority=majority, n=int(row["n"]))
    if precondition.verdict != decision.REPRODUCED:
        word = decision.PRECONDITION_WORDS[precondition.verdict]
        return decision.Verdict(decision.INCONCLUSIVE, f"{AT_CHANCE} (precondition {word}: {precondition.why})")
    return None


def _heldout_bar(rec: Record) -> float:
    """The share a held-out model's samples must beat: chance or the training majority's share."""
    return max(float(rec["chance"]), float(rec["majority_share"]))


def _heldout_verdict(share: decision.Interval, rec: Record) -> decision.Verdict:
    if not share.finite:
        return decision.Verdict(decision.INCONCLUSIVE, f"not scored: {text(rec.get('note'))}")
    to_decide = int(rec["models_to_decide"]) if pd.notna(rec.get("models_to_decide")) else 0
    return rules.held_out_family(share, bar=_heldout_bar(rec), n_models=int(rec["n"]), to_decide=to_decide)


def _heldout_note(rec: Record) -> str:
    seen = f"held-out models, own family's samples of theirs: {text(rec['predicted'])}"
    return "; ".join(t for t in (seen, text(rec.get("note"))) if t)


# The claim's row is the one over the held-out models (one observation each, analysis.separability.heldout); each
# model's own share stays in family_heldout.md, and in this row's note.
HELDOUT_RULE = RowRule(
    claim=FAMILY_HELDOUT,
    unit=SHARE,
    judge=_heldout_verdict,
    note=_heldout_note,
    keep=lambda rec: str(rec["model"]) == OVER_MODELS,
    extra=lambda rec: {"baseline": decision.Interval(_heldout_bar(rec), math.nan, math.nan)},
    null=lambda rec: decision.fixed_null(
        "no-signal classifier",
        interval(rec, ESTIMATE, LOW, HIGH),
        _heldout_bar(rec),
        margin=decision.NULL_MARGINS["share"],
    ),
)


# --------------------------------------------------------------------------- inputs


def knn_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """kNN separability of the dataset's targets, both fold protocols (Shannon entropy)."""
    return knn_table({dataset: store}, features=s.features, settings=s.knn)


def heldout_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame | None:
    """The held-out family on the blank set, as the run's own table decides it (``None`` elsewhere)."""
    if not families_read(store, dataset):
        return None
    return family_heldout({dataset: store}, features=s.features, settings=s.knn)


INPUTS = {
    "knn": PaperInput(
        "analysis.separability.targets.knn_table (both fold protocols)",
        KNN_READING,
        given("knn", lambda b: knn_rows(b.frames["knn"], b.frames["accuracy"], b.frames["baselines"], b.expected)),
        from_store=knn_from_store,
    ),
    "heldout": PaperInput(
        "analysis.separability.heldout.family_heldout",
        HELDOUT_READING,
        rule_rows("heldout", HELDOUT_RULE),
        from_store=heldout_from_store,
    ),
    "heldout_normalized": PaperInput(
        "analysis.separability.heldout.family_heldout on entropy / log V",
        HELDOUT_NORMALIZED_READING,
        rule_rows("heldout_normalized", HELDOUT_RULE),
        from_store=f"{LOGIT_LENS_ONLY}: under a fitted lens the held-out family is read on entropy",
    ),
}
