"""The registry: every claim this project tests, in the order a reader meets them.

A claim is one object (:class:`entropy_lens.verdicts.tested.TestedClaim`) in its topic's module of
:mod:`entropy_lens.verdicts.claims`: its record, row rule, inputs, null and absence. :data:`TESTED` lists them in
reading order (the order of the verdict table); it is the only list of them, and every other is derived from it:
the records here, the paper table's inputs and their paths (:mod:`entropy_lens.verdicts.table`), the planted nulls
(:mod:`entropy_lens.verdicts.nulls`, :mod:`entropy_lens.verdicts.mechanical`) and the absences
(:mod:`entropy_lens.verdicts.absences`); docs/architecture.md, "A claim".
"""

from __future__ import annotations

from entropy_lens.verdicts.claim import SKIP_EXPERIMENT, Claim
from entropy_lens.verdicts.claims import (
    accuracy,
    drop_sets,
    expansion,
    families,
    heldout,
    renyi,
    schedule,
    separability,
    skipping,
)
from entropy_lens.verdicts.tested import TestedClaim

# The claims, in the order a reader meets them.
TESTED: tuple[TestedClaim, ...] = (
    separability.TASK_TESTED,
    separability.SCRAMBLED_TESTED,
    separability.FORMAT_TESTED,
    separability.FAMILY_TESTED,
    heldout.FAMILY_HELDOUT_TESTED,
    separability.MODEL_IDENTITY_TESTED,
    separability.IMAGE_CLASS_TESTED,
    expansion.SPEARMAN_TESTED,
    expansion.OVERLAP_TESTED,
    separability.MMLU_CORRECT_TESTED,
    skipping.SKIP_COLLAPSE_TESTED,
    skipping.SKIP_VS_RANDOM_TESTED,
    skipping.SKIP_VS_PRUNING_TESTED,
    skipping.PRUNING_VS_RANDOM_TESTED,
    skipping.SKIP_RANK_TESTED,
    schedule.SCHEDULE_TESTED,
    renyi.RENYI_TESTED,
    families.CLUSTERING_TESTED,
    families.SIZE_RESOLUTION_TESTED,
    families.SHAPE_GPT_TESTED,
    families.SHAPE_LLAMA_TESTED,
    accuracy.ACCURACY_TESTED,
    separability.MMLU_CORRECT_CALIBRATED_TESTED,
    drop_sets.DROP_SETS_TESTED,
)
# Their records, by id; the ids in reading order, and those of the layer-skip claims.
CLAIMS: tuple[Claim, ...] = tuple(t.record for t in TESTED)
BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
TESTED_BY_ID: dict[str, TestedClaim] = {t.record.id: t for t in TESTED}
CLAIM_ORDER = tuple(BY_ID)
SKIP_CLAIMS = tuple(c.id for c in CLAIMS if c.dataset == SKIP_EXPERIMENT)


def claim(claim_id: str) -> Claim:
    """The registered claim of an id (a row's ``claim_id``).

    Raises:
        ValueError: naming the unknown id and the registered ones.
    """
    if claim_id not in BY_ID:
        raise ValueError(f"unknown claim id {claim_id!r}; registered: {list(BY_ID)}")
    return BY_ID[claim_id]
