"""Paper-table rows of the expansion claims: Spearman ΔH vs Δ nucleus size, and adjacent-layer overlap."""

from __future__ import annotations

import pandas as pd

from entropy_lens.core.frames import SOURCES
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import registry as C
from entropy_lens.verdicts import rules as V
from entropy_lens.verdicts.rows import CONTAINMENT_STATISTIC, Record, RowRule, span
from entropy_lens.verdicts.units import CONTAINMENT, JACCARD, RHO


def _sources(rec: Record) -> int:
    """The unit's count of a record, 0 where the analysis gave none."""
    return int(rec[SOURCES]) if pd.notna(rec[SOURCES]) else 0


def _study_spearman(rec: Record) -> str:
    matched = C.study_model_for(str(rec["model"]))
    if matched in C.STUDY_SPEARMAN:
        return f"{C.STUDY_SPEARMAN[matched]:.3f}"
    return span(C.STUDY_SPEARMAN.values(), ".3f")


SPEARMAN_RULE = RowRule(
    claim="spearman",
    unit=RHO,
    judge=lambda rho, rec: V.above_threshold(rho, threshold=V.SPEARMAN_THRESHOLD, n=_sources(rec), statistic="rho"),
    study=_study_spearman,
    note="n counts (token, layer) pairs; the interval resamples prompts",
    margin=D.NULL_MARGINS["rho"],
    bar=V.SPEARMAN_THRESHOLD,
    instead="it cannot tell whether the same shortlist grows and shrinks; adjacent-set containment is the claim's test",
)


OVERLAP_RULE = RowRule(
    claim="overlap",
    unit=lambda rec: CONTAINMENT if str(rec["measure"]).startswith(CONTAINMENT_STATISTIC) else JACCARD,
    judge=lambda value, rec: V.above_threshold(
        value, threshold=V.CONTAINMENT_THRESHOLD, n=_sources(rec), statistic=str(rec["measure"])
    ),
    note="mean over (token, layer) cells; the interval resamples prompts",
    margin=D.NULL_MARGINS["containment"],
    bar=V.CONTAINMENT_THRESHOLD,
)
