"""The paper comparison: each claim of the study, our estimate with its interval, and a verdict.

One row per claim, model and split.  Each row carries

* our estimate and its 95% interval over the right unit (kNN AUC: grouped folds,
  corrected resampled t; Spearman and overlap: prompt-cluster bootstrap; accuracy: Wilson over
  questions; layer skip: paired bootstrap over questions, and over random sets where there are),
* the baseline it is judged against (the dummy classifier, chance, the majority letter or the
  intact model), the study-protocol (ungrouped folds) figure beside the grouped one,
* the study's magnitude or sentence, and
* a verdict (:mod:`entropy_lens.analysis.verdicts`, :mod:`entropy_lens.analysis.outcomes`) with
  the reason, in the words of the row's role (:mod:`entropy_lens.analysis.claims`).

Claims the configuration did not measure get a row that says so: nothing is dropped silently.
:func:`headline` picks the rows a reader needs first; :mod:`entropy_lens.analysis.render`
writes them out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from entropy_lens.analysis import claims as C
from entropy_lens.analysis.absent_rows import absent_rows
from entropy_lens.analysis.baselines import BASELINE_READING
from entropy_lens.analysis.claim_rows import OVERLAP_RULE, SPEARMAN_RULE, accuracy_rows, pair_rows, shape_rule
from entropy_lens.analysis.equivalence import EQUIVALENCE_READING
from entropy_lens.analysis.expansion import OVERLAP_READING, SPEARMAN_READING
from entropy_lens.analysis.heldout import HELDOUT_NORMALIZED_READING, HELDOUT_READING
from entropy_lens.analysis.pairs import NORMALIZED, PAIR_READING
from entropy_lens.analysis.render import (
    ACC,
    AUC,
    LOGPROB,
    NOT_RUN,
    POINTS,
)
from entropy_lens.analysis.rows import COLUMNS, CONTAINMENT_STATISTIC, Expected, rows_of
from entropy_lens.analysis.separability_rows import BASELINE_RULE, HELDOUT_RULE, knn_rows, renyi_rows
from entropy_lens.analysis.shapes import SHAPE_READING
from entropy_lens.analysis.skip_rows import comparison_rows, rank_rule
from entropy_lens.analysis.targets import KNN_READING
from entropy_lens.answers.accuracy import ACCURACY_READING, ALL_STYLES
from entropy_lens.answers.criticality import COMPARISON_READING
from entropy_lens.answers.criticality import SPEARMAN_READING as RANK_READING
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.frames import Reading
from entropy_lens.core.tables import read_csv_table

log = logging.getLogger(__name__)
# The pair scale the verdicts read (entropy / log V: vocabularies differ by more than the gaps).
HEADLINE_SCALE = NORMALIZED


def paper_table(
    *,
    knn: pd.DataFrame | None = None,
    renyi: pd.DataFrame | None = None,
    heldout: pd.DataFrame | None = None,
    heldout_normalized: pd.DataFrame | None = None,
    baselines: pd.DataFrame | None = None,
    accuracy: pd.DataFrame | None = None,
    expansion: pd.DataFrame | None = None,
    overlap: pd.DataFrame | None = None,
    clustering: pd.DataFrame | None = None,
    layer_skip: pd.DataFrame | None = None,
    skip_spearman: pd.DataFrame | None = None,
    shapes: pd.DataFrame | None = None,
    family_pairs: pd.DataFrame | None = None,
    expected: Expected | None = None,
) -> pd.DataFrame:
    """Every claim with our estimate, its interval, the study's figure and a verdict.

    Args:
        knn: :func:`~entropy_lens.analysis.targets.knn_table` output (both protocols).
        renyi: :func:`~entropy_lens.analysis.equivalence.renyi_differences` rows.
        heldout: :func:`~entropy_lens.analysis.heldout.family_heldout` rows.
        heldout_normalized: The same on entropy / log V (``normalize=True``).
        baselines: :func:`~entropy_lens.analysis.baselines.baseline_table` rows (profile minus baseline).
        accuracy: :func:`entropy_lens.answers.accuracy.accuracy_table` output.
        expansion: :func:`~entropy_lens.analysis.expansion.expansion_spearman` rows, with a
            ``dataset`` column when several datasets are stacked.
        overlap: :func:`~entropy_lens.analysis.expansion.nucleus_overlap` rows (``dataset`` as above).
        clustering: :func:`~entropy_lens.analysis.families.clustering_scores` output.
        layer_skip: :func:`entropy_lens.answers.criticality.skip_comparisons` rows.
        skip_spearman: :func:`entropy_lens.answers.criticality.criticality_spearman` rows.
        shapes: :func:`~entropy_lens.analysis.shapes.profile_shapes` rows (``dataset`` as above).
        family_pairs: :func:`~entropy_lens.analysis.pairs.family_pairs` rows.
        expected: What the configuration asked for (absent claims get a "not run" row).

    Returns:
        Frame with :data:`COLUMNS`; estimates in the row's ``unit`` scale of 0-1 (AUC,
        accuracy, shares), -1..1 (rho) or nats; NaN where a number is missing.
    """
    expected = expected or Expected()
    scopes = expected.skip_scopes()
    inputs = dict(knn=knn, renyi=renyi, heldout=heldout, accuracy=accuracy, expansion=expansion, overlap=overlap)
    inputs |= dict(heldout_normalized=heldout_normalized, baselines=baselines)
    inputs |= dict(layer_skip=layer_skip, skip_spearman=skip_spearman, shapes=shapes, family_pairs=family_pairs)
    f = {name: standard_frame(name, table) for name, table in inputs.items()}
    rows: list[dict[str, Any]] = []
    rows += knn_rows(f["knn"], f["accuracy"], expected) if knn is not None else []
    rows += rows_of(f["heldout"], HELDOUT_RULE)
    rows += rows_of(f["heldout_normalized"], HELDOUT_RULE)
    rows += rows_of(f["baselines"], BASELINE_RULE)
    rows += renyi_rows(rows, f["renyi"])
    rows += rows_of(f["expansion"], SPEARMAN_RULE)
    rows += accuracy_rows(f["accuracy"], expected.families) if accuracy is not None else []
    rows += comparison_rows(f["layer_skip"], scopes) if layer_skip is not None else []
    rows += rows_of(f["skip_spearman"], rank_rule(scopes))
    if clustering is not None or family_pairs is not None:
        rows += pair_rows(f["family_pairs"], clustering, expected)
    rows += rows_of(f["overlap"], OVERLAP_RULE)
    rows += rows_of(f["shapes"], shape_rule(expected))
    rows += absent_rows(rows, expected) if expected.datasets else []
    return _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


# Each analysis table's reading as a standard frame (entropy_lens.core.frames), declared beside its analysis.
READINGS: Mapping[str, Reading] = {
    "knn": KNN_READING,
    "renyi": EQUIVALENCE_READING,
    "heldout": HELDOUT_READING,
    "heldout_normalized": HELDOUT_NORMALIZED_READING,
    "baselines": BASELINE_READING,
    "accuracy": ACCURACY_READING,
    "expansion": SPEARMAN_READING,
    "overlap": OVERLAP_READING,
    "layer_skip": COMPARISON_READING,
    "skip_spearman": RANK_READING,
    "shapes": SHAPE_READING,
    "family_pairs": PAIR_READING,
}


def standard_frame(name: str, table: pd.DataFrame | None) -> pd.DataFrame | None:
    """The paper-table input ``name`` as a standard frame (``None`` stays ``None``)."""
    return None if table is None else READINGS[name].frame(table, name)


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    rank = {claim: i for i, claim in enumerate(C.CLAIM_ORDER)}
    order = table["claim"].map(rank).fillna(len(rank))
    return table.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader needs first, one per claim, model and variant, in claim order: findings
    measured, findings the configuration did not run, then extensions and preconditions.

    Shannon entropy for separability; MMLU accuracy pooled over styles under the verdict measure,
    correctness per style where measured (the study reports it per style; the pooled row is a summary
    in the full table); layer skipping at the smallest ``k``, the accuracy statistic (the study's),
    both selection variants; the held-out family on entropy (entropy / log V in the full table);
    overlap by containment; the family pairs on the
    normalized scale; the Rényi claim's summary row.  Everything else stays in the full table;
    rows without a verdict and extensions the configuration did not run are left out.
    """
    claim, measure, split, unit = table["claim"], table["measure"], table["split"].astype(str), table["unit"]
    keep = table["verdict"] != ""
    keep &= ~claim.isin(C.KNN_CLAIMS.values()) | claim.eq(C.MODEL_IDENTITY) | measure.isin(["shannon", ""])
    keep &= ~claim.eq(C.MODEL_IDENTITY) | measure.eq("shannon")
    keep &= ~claim.eq(C.ACCURACY) | split.isin([ALL_STYLES, ""]) | ~_has_pooled(table)
    # correctness: the study reports it per style, so the per-style rows are the findings (pooled: a summary)
    keep &= ~claim.eq(C.MMLU_CORRECT) | ~split.eq(ALL_STYLES) | ~_has_per_style(table)
    keep &= ~claim.eq(C.FAMILY_HELDOUT) | measure.eq("shannon")
    keep &= ~claim.isin([C.ACCURACY, *C.SKIP_CLAIMS]) | measure.isin([VERDICT_MEASURE, ""])
    keep &= ~claim.isin(C.SKIP_CLAIMS) | ~unit.eq(LOGPROB)
    keep &= ~claim.eq(C.RENYI) | split.eq("")  # the claim's summary; its per-order rows name a split
    keep &= ~claim.eq(C.OVERLAP) | measure.eq(CONTAINMENT_STATISTIC)
    keep &= ~claim.isin([C.CLUSTERING, C.SIZE_RESOLUTION]) | measure.isin([HEADLINE_SCALE, ""])
    skip_ks = split.where(claim.isin(C.SKIP_CLAIMS) & split.str.startswith("k=")).dropna()
    if not skip_ks.empty:
        smallest = min(skip_ks, key=lambda text: int(text[2:].split(",")[0]))
        keep &= (
            ~claim.isin(C.SKIP_CLAIMS)
            | ~split.str.startswith("k=")
            | split.str.startswith(smallest.split(",")[0] + ",")
        )
    top = table[keep]
    not_run = top["why"].astype(str).str.startswith(NOT_RUN)
    top, not_run = top[~(not_run & (top["role"] == C.EXTENSION))], not_run[~(not_run & (top["role"] == C.EXTENSION))]
    role = top["role"]
    return pd.concat(
        [
            top[~not_run & (role == C.FINDING)],
            top[not_run & (role == C.FINDING)],
            top[role == C.EXTENSION],
            top[role == C.PRECONDITION],
        ],
        ignore_index=True,
    )


def _has_per_style(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row of one MMLU style."""
    styled = {
        (c, m)
        for c, m, s in zip(table["claim"], table["model"], table["split"], strict=True)
        if s not in (ALL_STYLES, "")
    }
    return pd.Series([(c, m) in styled for c, m in zip(table["claim"], table["model"], strict=True)], index=table.index)


def _has_pooled(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row pooled over MMLU styles."""
    pooled = {(c, m) for c, m, s in zip(table["claim"], table["model"], table["split"], strict=True) if s == ALL_STYLES}
    return pd.Series([(c, m) in pooled for c, m in zip(table["claim"], table["model"], strict=True)], index=table.index)


TABLE_INPUTS = (
    "knn",
    "renyi",
    "heldout",
    "heldout_normalized",
    "baselines",
    "accuracy",
    "expansion",
    "overlap",
    "clustering",
    "layer_skip",
    "skip_spearman",
    "shapes",
    "family_pairs",
)


def paper_table_from_files(paths: Mapping[str, str | Sequence[str]], expected: Expected) -> pd.DataFrame:
    """:func:`paper_table` from the analysis tables on disk.

    Args:
        paths: Keyword of :func:`paper_table` -> a CSV path, or several to stack (the
            per-dataset expansion and overlap tables).
        expected: What the configuration asked for.
    """
    unknown = sorted(set(paths) - set(TABLE_INPUTS))
    if unknown:
        raise ValueError(f"unknown paper-table inputs {unknown}; expected some of {list(TABLE_INPUTS)}")
    return paper_table(**{name: _read_csvs(value) for name, value in paths.items()}, expected=expected)


def _read_csvs(value: str | Sequence[str]) -> pd.DataFrame:
    files = [value] if isinstance(value, str) else list(value)
    frames = [read_csv_table(f, keep_default_na=True) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["ACC", "AUC", "POINTS", "Expected", "headline", "paper_table", "paper_table_from_files"]
