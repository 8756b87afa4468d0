"""The expansion claims: Spearman ΔH vs Δ nucleus size, and adjacent-layer overlap of the top-p sets
(:mod:`entropy_lens.analysis.expansion`: :mod:`~entropy_lens.analysis.expansion.spearman`,
:mod:`~entropy_lens.analysis.expansion.overlap`).

Each claim as one object (:class:`~entropy_lens.verdicts.tested.TestedClaim`): its record, its row rule, the
paper-table input its rows come from and its planted null.
"""

from __future__ import annotations

import pandas as pd
import xarray as xr

from entropy_lens.analysis.expansion.overlap import OVERLAP_COLUMNS, OVERLAP_READING, nucleus_overlap
from entropy_lens.analysis.expansion.spearman import SPEARMAN_COLUMNS, SPEARMAN_READING, expansion_spearman
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW, SOURCES
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import CONTAINMENT_STATISTIC, FINDING, Claim, Headline
from entropy_lens.verdicts.inputs import PaperInput, StoreSettings, given, rule_rows
from entropy_lens.verdicts.rows import Record, RowRule, interval, rows_of, span
from entropy_lens.verdicts.tested import PlantedNull, PlantedTrue, TestedClaim, TwinRule
from entropy_lens.verdicts.units import CONTAINMENT, JACCARD, RHO

SPEARMAN = Claim(
    id="spearman",
    name="Spearman ΔH vs Δ nucleus size",
    sentence="rising entropy is the candidate set expanding, falling entropy pruning",
    role=FINDING,
    unit="sources",
    dataset="tasks",
    rule=rules.above_threshold,
    figure="spearman",
)

OVERLAP = Claim(
    id="overlap",
    name="adjacent layers share most of their top-p sets",
    sentence="adjacent layers share most of their top-p sets",
    role=FINDING,
    unit="sources",
    dataset="tasks",
    rule=rules.above_threshold,
    figure="overlap",
    headline=Headline(measures=(CONTAINMENT_STATISTIC,)),
)


def _sources(rec: Record) -> int:
    """The unit's count of a record, 0 where the analysis gave none."""
    return int(rec[SOURCES]) if pd.notna(rec[SOURCES]) else 0


def _note(first: str):
    """The note of an expansion row: ``first``, the unit the interval resamples, and the prompts left without a
    cross-prompt partner of another source (docs/verdicts.md, "The right units")."""

    def note(rec: Record) -> str:
        text = f"{first}; the interval resamples sources ({_sources(rec)}: stories, topics, questions "
        text += "or blank samples), not prompts"
        unpartnered = rec.get("null_unpartnered")
        if unpartnered is not None and pd.notna(unpartnered) and int(unpartnered):
            text += f"; {int(unpartnered)} prompts have no partner of another source in their batch (not in the null)"
        return text

    return note


def _study_spearman(rec: Record) -> str:
    matched = study.study_model_for(str(rec["model"]))
    if matched in study.STUDY_SPEARMAN:
        return f"{study.STUDY_SPEARMAN[matched]:.3f}"
    return span(study.STUDY_SPEARMAN.values(), ".3f")


SPEARMAN_RULE = RowRule(
    claim=SPEARMAN,
    unit=RHO,
    judge=lambda rho, rec: rules.above_threshold(
        rho, threshold=rules.SPEARMAN_THRESHOLD, n=_sources(rec), statistic="rho"
    ),
    study=_study_spearman,
    note=_note("n counts (token, layer) pairs; containment of adjacent top-p sets is the claim's test"),
    margin=decision.NULL_MARGINS["rho"],
    bar=rules.SPEARMAN_THRESHOLD,
    instead="it cannot tell whether the same shortlist grows and shrinks; containment of adjacent top-p sets is the "
    "claim's test",
)


# Containment replaced Jaccard after the values of the default run were seen (docs/verdicts.md, "Containment and the
# original Jaccard rule"): each containment row carries the original rule's reading beside its own.
ORIGINAL_RULE = "the original Jaccard rule (mean Jaccard of adjacent top-p sets above 0.5)"
ORIGINAL_STATISTIC = "jaccard"


def _with_jaccard(overlap: pd.DataFrame) -> pd.DataFrame:
    """The overlap frame with each row's Jaccard of the same model and dataset beside it (``jaccard_*``; its
    interval from the same prompt draws: the analysis bootstraps every statistic with one seed)."""
    keys = ["model", "split"]
    jaccard = overlap[overlap["measure"] == ORIGINAL_STATISTIC].drop_duplicates(keys)[[*keys, ESTIMATE, LOW, HIGH]]
    jaccard = jaccard.rename(columns={ESTIMATE: "jaccard_mean", LOW: "jaccard_low", HIGH: "jaccard_high"})
    return overlap.merge(jaccard, on=keys, how="left")


def _original(rec: Record) -> dict[str, object]:
    """A containment row's reading under the original Jaccard > 0.5 rule (none on other rows)."""
    if rec["measure"] != CONTAINMENT_STATISTIC or pd.isna(rec.get("jaccard_mean")):
        return {}
    jaccard = interval(rec, "jaccard_mean", "jaccard_low", "jaccard_high")
    verdict = rules.above_threshold(
        jaccard, threshold=rules.CONTAINMENT_THRESHOLD, n=_sources(rec), statistic=ORIGINAL_STATISTIC
    )
    return {
        "original_rule": ORIGINAL_RULE,
        "original": jaccard,
        "original_verdict": verdict.verdict,
        "original_why": verdict.why,
    }


def _overlap_note(rec: Record) -> str:
    note = _note("mean over (token, layer) cells")(rec)
    if rec["measure"] == CONTAINMENT_STATISTIC:
        note += "; containment was chosen after the values of the default run were seen (Jaccard before it)"
    return note


OVERLAP_RULE = RowRule(
    claim=OVERLAP,
    unit=lambda rec: CONTAINMENT if str(rec["measure"]).startswith(CONTAINMENT_STATISTIC) else JACCARD,
    judge=lambda value, rec: rules.above_threshold(
        value, threshold=rules.CONTAINMENT_THRESHOLD, n=_sources(rec), statistic=str(rec["measure"])
    ),
    note=_overlap_note,
    extra=_original,
    margin=decision.NULL_MARGINS["containment"],
    bar=rules.CONTAINMENT_THRESHOLD,
)


def expansion_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """ΔH against the nucleus-size change, with the dataset column of a stacked table."""
    return expansion_spearman(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


def overlap_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """Adjacent-layer overlap of the top-p sets, with the dataset column of a stacked table."""
    return nucleus_overlap(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


EXPANSION_TABLE = PaperInput(
    "expansion",
    "analysis.expansion.spearman.expansion_spearman (a dataset column when stacked)",
    SPEARMAN_READING,
    rule_rows("expansion", SPEARMAN_RULE),
    from_store=expansion_from_store,
    path="results/tables/expansion_{dataset}.csv",
    columns=SPEARMAN_COLUMNS,
)
OVERLAP_TABLE = PaperInput(
    "overlap",
    "analysis.expansion.overlap.nucleus_overlap (a dataset column when stacked)",
    OVERLAP_READING,
    given("overlap", lambda b: rows_of(_with_jaccard(b.frames["overlap"]), OVERLAP_RULE)),
    from_store=overlap_from_store,
    path="results/tables/overlap_{dataset}.csv",
    columns=OVERLAP_COLUMNS,
)

# The Spearman's null reaches its bar: its planted-true simulation says whether the rule can beat it where the
# claim holds (verdicts.mechanical).
SPEARMAN_TRUE = PlantedTrue(
    "entropy_lens.analysis.expansion.planted_true:spearman_true_rate",
    decision.NULL_MARGINS["rho"],
    120,
    "containment of adjacent top-p sets is the claim's test",
)
SPEARMAN_TESTED = TestedClaim(
    SPEARMAN,
    SPEARMAN_RULE,
    (EXPANSION_TABLE,),
    PlantedNull(
        "entropy_lens.analysis.expansion.planted:spearman_planted_rate",
        margin="rho",
        max_units=120,
        planted_true=SPEARMAN_TRUE,
    ),
    twin=TwinRule("spearman", "", "spearman", decision.NULL_MARGINS["rho"], 0.5, split_is_dataset=True),
)
OVERLAP_TESTED = TestedClaim(
    OVERLAP,
    OVERLAP_RULE,
    (OVERLAP_TABLE,),
    PlantedNull("entropy_lens.analysis.expansion.planted:overlap_planted_rate", margin="containment", max_units=120),
    twin=TwinRule("overlap", margin=decision.NULL_MARGINS["containment"], bar=0.5, split_is_dataset=True),
)
