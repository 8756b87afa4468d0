"""The held-out family: a model left out of the kNN's training falls in its own family
(:mod:`entropy_lens.analysis.separability.heldout`), judged over the held-out models.

The claim as one object: its record, its row rule, the paper-table inputs it reads (entropy, and entropy / log V)
and its planted null at the row's own bar.
"""

from __future__ import annotations

import math

import pandas as pd
import xarray as xr

from entropy_lens.analysis.separability.heldout import (
    HELDOUT_COLUMNS,
    HELDOUT_NORMALIZED_READING,
    HELDOUT_READING,
    OVER_MODELS,
    family_heldout,
)
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision, rules
from entropy_lens.verdicts.claim import FINDING, POOLED, SHANNON, Claim, Headline
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, PaperInput, StoreSettings, families_read, rule_rows
from entropy_lens.verdicts.rows import Record, RowRule, interval, text
from entropy_lens.verdicts.tested import PlantedNull, TestedClaim
from entropy_lens.verdicts.units import SHARE

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


def heldout_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame | None:
    """The held-out family on the blank set, as the run's own table decides it (``None`` elsewhere)."""
    if not families_read(store, dataset):
        return None
    return family_heldout({dataset: store}, features=s.features, settings=s.knn)


HELDOUT_TABLE = PaperInput(
    "heldout",
    "analysis.separability.heldout.family_heldout",
    HELDOUT_READING,
    rule_rows("heldout", HELDOUT_RULE),
    from_store=heldout_from_store,
    path="results/tables/family_heldout.csv",
    columns=HELDOUT_COLUMNS,
)
HELDOUT_NORMALIZED_TABLE = PaperInput(
    "heldout_normalized",
    "analysis.separability.heldout.family_heldout on entropy / log V",
    HELDOUT_NORMALIZED_READING,
    rule_rows("heldout_normalized", HELDOUT_RULE),
    from_store=f"{LOGIT_LENS_ONLY}: under a fitted lens the held-out family is read on entropy",
    path="results/tables/family_heldout_normalized.csv",
    columns=HELDOUT_COLUMNS,
)

FAMILY_HELDOUT_TESTED = TestedClaim(
    FAMILY_HELDOUT,
    HELDOUT_RULE,
    (HELDOUT_TABLE, HELDOUT_NORMALIZED_TABLE),
    PlantedNull(
        "entropy_lens.verdicts.planted_nulls:planted_models_at_bar",
        at_row="entropy_lens.verdicts.planted_nulls:models_at_row",
    ),
)
