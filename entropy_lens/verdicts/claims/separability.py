"""The separability claims: kNN AUC per target (:mod:`entropy_lens.analysis.separability.knn`) and the held-out family.

Each claim as one object: its record, its row rule, the paper-table inputs it reads, its planted null and, where
the table's generic reasons do not say it, why it was not run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import xarray as xr

from entropy_lens.analysis.separability.folds import GROUPED, STUDY
from entropy_lens.analysis.separability.knn import TABLE_COLUMNS
from entropy_lens.analysis.separability.targets import KNN_READING, knn_table
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import EXTENSION, FINDING, POOLED, SHANNON, SHANNON_ROWS, Claim, Headline
from entropy_lens.verdicts.claims.accuracy import ACCURACY_TABLE
from entropy_lens.verdicts.claims.baselines import BASELINES_TABLE, feature_reading
from entropy_lens.verdicts.inputs import (
    PaperInput,
    StoreSettings,
    given,
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
from entropy_lens.verdicts.tested import SEPARABILITY, Absence, NoNull, PlantedNull, TestedClaim, TwinRule
from entropy_lens.verdicts.units import AUC

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
    return rows_of(with_study_protocol(knn), knn_rule(accuracy, baselines, expected))


def with_study_protocol(knn: pd.DataFrame) -> pd.DataFrame:
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


# --------------------------------------------------------------------------- inputs


def knn_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """kNN separability of the dataset's targets, both fold protocols (Shannon entropy)."""
    return knn_table({dataset: store}, features=s.features, settings=s.knn)


KNN_TABLE = PaperInput(
    "knn",
    "analysis.separability.targets.knn_table (both fold protocols)",
    KNN_READING,
    given("knn", lambda b: knn_rows(b.frames["knn"], b.frames["accuracy"], b.frames["baselines"], b.expected)),
    from_store=knn_from_store,
    path="results/tables/knn_auc.csv",
    columns=TABLE_COLUMNS,
)
# --------------------------------------------------------------------------- the claims, one object each

# A kNN row's null: its labels permuted on its own folds (a draw reruns the kNN; the largest sets capped at 400).
KNN_NULL = PlantedNull("entropy_lens.analysis.separability.nulls:knn_planted_rate", margin="AUC", min_units=8)
KNN_NULL_CAPPED = dataclasses.replace(KNN_NULL, max_units=400)


def _one_model_per_family(claim: Claim, expected: Expected) -> str | None:
    """Family and model identity coincide where each family has one model: the extension reads it."""
    if not expected.one_model_per_family():
        return None
    return "one model per family: family and model identity coincide, so the model-identity extension reads it"


def _knn_tested(
    claim: Claim, null: PlantedNull, twin: TwinRule | NoNull | None, absence: Absence | None = None
) -> TestedClaim:
    """A kNN claim: its rows from the kNN table, read beyond the simplest feature and, for MMLU correctness, only
    where the model answers above chance."""
    inputs = (KNN_TABLE, BASELINES_TABLE, ACCURACY_TABLE)
    return TestedClaim(claim, knn_rule, inputs, null, absence=absence, twin=twin)


def _twin(target: str, dataset: str) -> TwinRule:
    """A kNN claim's twin reading: the twin's grouped-fold AUC of ``target`` on ``dataset``, against chance."""
    return TwinRule(SEPARABILITY, target, "auc", decision.NULL_MARGINS["AUC"], rules.CHANCE_AUC, dataset=dataset)


# The twin's correctness labels are its own answers, at chance.
NO_CORRECTNESS = NoNull("the twin answers at chance, so its correctness labels mean nothing")
TASK_TESTED = _knn_tested(TASK, KNN_NULL_CAPPED, _twin("task", "tasks"))
SCRAMBLED_TESTED = _knn_tested(SCRAMBLED, KNN_NULL_CAPPED, _twin("task_scrambled", "tasks"))
FORMAT_TESTED = _knn_tested(FORMAT, KNN_NULL_CAPPED, _twin("format", "formats"))
FAMILY_TESTED = _knn_tested(FAMILY, KNN_NULL, _twin("family", "blank"), absence=_one_model_per_family)
MODEL_IDENTITY_TESTED = _knn_tested(MODEL_IDENTITY, KNN_NULL, _twin("family", "blank"))
IMAGE_CLASS_TESTED = _knn_tested(IMAGE_CLASS, KNN_NULL, None)
MMLU_CORRECT_TESTED = _knn_tested(MMLU_CORRECT, KNN_NULL_CAPPED, NO_CORRECTNESS)
MMLU_CORRECT_CALIBRATED_TESTED = _knn_tested(MMLU_CORRECT_CALIBRATED, KNN_NULL, NO_CORRECTNESS)
