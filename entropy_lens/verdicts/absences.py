"""Paper-table rows of claims the configuration did not measure, each saying why (nothing is dropped
silently).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from entropy_lens.analysis.separability.knn import POOLED_MODEL
from entropy_lens.prompts.datasets import IMAGE, KINDS
from entropy_lens.verdicts import decision, study
from entropy_lens.verdicts.claim import EXTENSION, FINDING, SKIP_EXPERIMENT, Claim
from entropy_lens.verdicts.claims.families import CLUSTERING, SHAPE_ROWS, SIZE_RESOLUTION
from entropy_lens.verdicts.claims.heldout import FAMILY_HELDOUT
from entropy_lens.verdicts.claims.separability import EXTENSION_TARGETS, KNN_CLAIMS, knn_claim
from entropy_lens.verdicts.claims.skipping import SKIP_VS_RANDOM, skip_shortfall
from entropy_lens.verdicts.registry import CLAIMS, SKIP_CLAIMS, TESTED_BY_ID, claim
from entropy_lens.verdicts.rows import Expected, family_shortfall, pair_shortfall, row
from entropy_lens.verdicts.units import AUC, NATS, POINTS, SHARE


def absent_rows(rows: list[dict[str, Any]], expected: Expected) -> list[dict[str, Any]]:
    """A row for every claim and model the configuration did not measure, saying why."""
    seen = {(r["claim_id"], r["model"]) for r in rows}
    models = list(dict.fromkeys(m for ms in expected.datasets.values() for m in ms))
    out = []
    for target, tested in KNN_CLAIMS.items():
        claimed, role = knn_claim(target, expected)
        dataset = tested.dataset
        profiled = list(expected.datasets.get(dataset, ()))
        if target == "family":
            wanted = [POOLED_MODEL]
        elif target in EXTENSION_TARGETS:
            wanted = profiled
        else:
            wanted = [m for m in models if m in profiled or _in_scope(target, dataset, m, expected)]
        out += [
            row(claimed, m, AUC, decision.not_run(_why_absent(dataset, m, profiled, target)), role=role)
            for m in wanted
            if (claimed.id, m) not in seen
        ]
    out += _absent_skip_rows(seen, models, expected) + _absent_pair_rows(seen, expected)
    out += _absent_shape_rows(seen, models, expected)
    return out + unmeasured_claims([*rows, *out], expected)


# kNN findings whose study figures are per family: a model of another family left off their dataset owes no row.
FAMILY_SCOPED = {"mmlu_correct": study.STUDY_MMLU_AUC}


def _in_scope(target: str, dataset: str, model: str, expected: Expected) -> bool:
    """Whether a model left off a kNN finding's dataset still owes it a "not run" row: not where it could not read
    that dataset (an image classifier, profiled on image sets only, and a text set), nor where the study states
    the finding for other families only (MMLU correctness: Llama and Gemma); such a row would be an extension, and
    an extension the configuration did not run has no row."""
    own = [d for d, ms in expected.datasets.items() if model in ms]
    if own and all(_image_set(d) for d in own) != _image_set(dataset):
        return False
    return target not in FAMILY_SCOPED or str(expected.families.get(model, "")).lower() in FAMILY_SCOPED[target]


def _image_set(dataset: str) -> bool:
    return any(column.name == IMAGE for column in KINDS.get(dataset, ()))


def unmeasured_claims(rows: list[dict[str, Any]], expected: Expected) -> list[dict[str, Any]]:
    """One "not run" row for every finding or precondition of the registry with no row in its own role.

    The rows above say why per model where a claim's analysis knows its models; this catches every
    other claim of the study: one whose scope no configured model falls in (the layer-skip findings
    name Llama and Gemma-2-2B-it; rows of other models are extensions), one whose dataset is off, or a
    new one whose analysis gave no rows.  Extensions are not the study's claims: one the
    configuration did not run has no row.
    """
    named = {(r["claim_id"], r["role"]) for r in rows}
    return [
        row(c, "all", "", decision.not_run(_why_unmeasured(c, expected)), role=c.role)
        for c in CLAIMS
        if c.role != EXTENSION and (c.id, c.role) not in named
    ]


def _why_unmeasured(claim: Claim, expected: Expected) -> str:
    """The claim's own reason (its object's ``absence``), else a disabled dataset, else no rows."""
    absence = TESTED_BY_ID[claim.id].absence
    reason = absence(claim, expected) if absence is not None else None
    if reason is not None:
        return reason
    if claim.dataset not in ("", SKIP_EXPERIMENT) and claim.dataset not in expected.datasets:
        return f"dataset {claim.dataset!r} is disabled"
    return "no result: its analysis gave no rows in this configuration"


def _absent_skip_rows(seen: set[tuple[str, str]], models: Sequence[str], expected: Expected) -> list[dict]:
    """A "not run" row per model without layer-skip rows: a finding where the study names its scope."""
    out = []
    scopes = expected.skip_scopes()
    for model in models:
        if any((claim_id, model) in seen for claim_id in SKIP_CLAIMS):
            continue
        reason = skip_shortfall([model], expected, named=False)
        scope = scopes.get(model)
        claims = [claim(i) for i in study.SKIP_EXPECTED.get(scope or "", {})] or [SKIP_VS_RANDOM]
        role = FINDING if scope else EXTENSION
        sentence = study.STUDY_SKIP_SENTENCE[scope] if scope else study.NO_SKIP_CLAIM
        out += [row(c, model, POINTS, decision.not_run(reason), role=role, study=sentence) for c in claims]
    return out


def _absent_pair_rows(seen: set[tuple[str, str]], expected: Expected) -> list[dict]:
    """A "not run" row for each same-family pair claim with no row (no family analysis ran)."""
    blank = list(expected.datasets.get("blank", ()))
    why = family_shortfall(expected) or "no result"
    rows = [
        row(pair_claim, ", ".join(blank) or "all", NATS, decision.not_run(why))
        for pair_claim in (CLUSTERING, SIZE_RESOLUTION)
        if not any(c == pair_claim.id for c, _ in seen)
    ]
    if not any(c == FAMILY_HELDOUT.id for c, _ in seen):
        reason = family_shortfall(expected) or pair_shortfall(blank, expected.families)
        rows.append(row(FAMILY_HELDOUT, ", ".join(blank) or "all", SHARE, decision.not_run(reason)))
    return rows


def _absent_shape_rows(seen: set[tuple[str, str]], profiled: Sequence[str], expected: Expected) -> list[dict]:
    """A "not run" row for each shape claim without a model of its family, or a family model without a result."""
    out = []
    for key, shape_claim in SHAPE_ROWS.items():
        members = [m for m, family in expected.families.items() if study.shape_scope(str(family)) == (key, FINDING)]
        if not members:
            names = " or ".join(study.SHAPE_FAMILIES[key])
            out.append(
                row(shape_claim, "none", NATS, decision.not_run(f"no model of family {names} in this configuration"))
            )
        for model in members:
            if (shape_claim.id, model) not in seen:
                reason = "no result" if model in profiled else f"{model} is profiled on no dataset"
                out.append(row(shape_claim, model, NATS, decision.not_run(reason)))
    return out


def _why_absent(dataset: str, model: str, profiled: Sequence[str], target: str) -> str:
    if not profiled:
        return f"dataset {dataset!r} is disabled"
    if target == "family":
        return f"needs >= 2 models on {dataset!r}, got {len(profiled)}"
    if model not in profiled:
        return f"{model} is not profiled on {dataset!r} (datasets.{dataset}.models)"
    return "no result"
