"""The registry: every claim this project tests, in the order a reader meets them, and the topics that hold them.

A claim is one record (:class:`entropy_lens.verdicts.claim.Claim`), written beside its row rule and its
paper-table inputs in its topic's module of :mod:`entropy_lens.verdicts.claims`; this module only lists the
records in reading order (the order of the verdict table) and the topics in the order their inputs are read
(docs/architecture.md, "A claim").
"""

from __future__ import annotations

from types import ModuleType

from entropy_lens.verdicts.claim import SKIP_EXPERIMENT, Claim
from entropy_lens.verdicts.claims import (
    accuracy,
    baselines,
    drop_sets,
    expansion,
    families,
    renyi,
    schedule,
    separability,
    skipping,
)

# Each topic's module declares its claims' records, row rules and INPUTS. Its inputs are read in this order: the
# Rényi rows repeat the kNN rows built before them.
TOPICS: tuple[ModuleType, ...] = (
    separability,
    baselines,
    renyi,
    expansion,
    accuracy,
    skipping,
    drop_sets,
    families,
    schedule,
)

# The claims, in the order a reader meets them.
CLAIMS: tuple[Claim, ...] = (
    separability.TASK,
    separability.SCRAMBLED,
    separability.FORMAT,
    separability.FAMILY,
    separability.FAMILY_HELDOUT,
    separability.MODEL_IDENTITY,
    separability.IMAGE_CLASS,
    expansion.SPEARMAN,
    expansion.OVERLAP,
    separability.MMLU_CORRECT,
    skipping.SKIP_COLLAPSE,
    skipping.SKIP_VS_RANDOM,
    skipping.SKIP_VS_PRUNING,
    skipping.PRUNING_VS_RANDOM,
    skipping.SKIP_RANK,
    schedule.SCHEDULE_SURVIVES,
    renyi.RENYI,
    families.CLUSTERING,
    families.SIZE_RESOLUTION,
    families.SHAPE_GPT,
    families.SHAPE_LLAMA,
    accuracy.ACCURACY,
    separability.MMLU_CORRECT_CALIBRATED,
    drop_sets.DROP_SETS,
)
BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
# Claim ids in reading order, and the ids of the layer-skip claims.
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
