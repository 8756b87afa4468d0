"""The paper comparison: each claim of the study, our estimate with its interval, and a verdict.

One row per claim, model and split.  Each row carries

* our estimate and its 95% interval over the right unit (kNN AUC: grouped folds,
  corrected resampled t; Spearman and overlap: prompt-cluster bootstrap; accuracy: Wilson over
  questions; layer skip: paired bootstrap over questions, and over random sets where there are),
* the baseline it is judged against (the dummy classifier, chance, the majority letter or the
  intact model), the study-protocol (ungrouped folds) figure beside the grouped one,
* the study's magnitude or sentence, and
* a verdict (:mod:`entropy_lens.verdicts.rules`, :mod:`entropy_lens.verdicts.outcomes`) with
  the reason, in the words of the row's role (:mod:`entropy_lens.verdicts.registry`).

Claims the configuration did not measure get a row that says so: nothing is dropped silently.
:func:`headline` picks the rows a reader needs first; :mod:`entropy_lens.verdicts.render`
writes them out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from entropy_lens.analysis.expansion.overlap import OVERLAP_READING
from entropy_lens.analysis.expansion.spearman import SPEARMAN_READING
from entropy_lens.analysis.families.pairs import PAIR_READING
from entropy_lens.analysis.families.shapes import SHAPE_READING
from entropy_lens.analysis.separability.baselines import BASELINE_READING
from entropy_lens.analysis.separability.equivalence import EQUIVALENCE_READING
from entropy_lens.analysis.separability.heldout import HELDOUT_NORMALIZED_READING, HELDOUT_READING
from entropy_lens.analysis.separability.targets import KNN_READING
from entropy_lens.answers.accuracy import ACCURACY_READING, ALL_STYLES
from entropy_lens.answers.criticality import COMPARISON_READING
from entropy_lens.answers.criticality import SPEARMAN_READING as RANK_READING
from entropy_lens.answers.drop_scores import DROP_SCORE_READING
from entropy_lens.core.frames import Reading
from entropy_lens.core.tables import read_csv_table
from entropy_lens.verdicts import recompute as S
from entropy_lens.verdicts import registry as C
from entropy_lens.verdicts.absences import absent_rows
from entropy_lens.verdicts.claims.accuracy import accuracy_rows
from entropy_lens.verdicts.claims.drop_sets import DROP_RULE
from entropy_lens.verdicts.claims.expansion import OVERLAP_RULE, SPEARMAN_RULE
from entropy_lens.verdicts.claims.families import pair_rows, shape_rule
from entropy_lens.verdicts.claims.separability import BASELINE_RULE, HELDOUT_RULE, knn_rows, renyi_rows
from entropy_lens.verdicts.claims.skipping import comparison_rows, rank_rule
from entropy_lens.verdicts.decision import NOT_RUN
from entropy_lens.verdicts.rows import COLUMNS, Expected, RowRule, rows_of
from entropy_lens.verdicts.units import ACC, AUC, POINTS

if TYPE_CHECKING:
    import xarray as xr

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    """What the row builders of :data:`INPUTS` see: the inputs as standard frames, the rows built so far (in
    :data:`INPUTS` order) and what the configuration asked for."""

    frames: Mapping[str, pd.DataFrame | None]
    rows: list[dict[str, Any]]
    expected: Expected

    @property
    def scopes(self) -> Mapping[str, str | None]:
        """The family each layer-skip model's claims are scoped to (:meth:`Expected.skip_scopes`)."""
        return self.expected.skip_scopes()


@dataclass(frozen=True)
class PaperInput:
    """One analysis table the paper table reads.

    Attributes:
        what: The function whose output it is (for readers and error messages).
        reading: How it becomes a standard frame (:mod:`entropy_lens.core.frames`); ``None``: read as it is
            (a table another input's rows consult).
        rows: ``Built -> rows`` of its claims; ``None`` for a table only another input's rows read.
        from_store: How the table is recomputed from one dataset's combined profile store
            (:mod:`entropy_lens.verdicts.recompute`), so its claims are judged again under a fitted lens; or why
            it is not (a sentence).
    """

    what: str
    reading: Reading | None
    rows: Callable[[Built], list[dict[str, Any]]] | None = None
    from_store: S.StoreAnalysis | str = field(kw_only=True)


def _rule(name: str, rule: RowRule) -> Callable[[Built], list[dict[str, Any]]]:
    """Rows of input ``name`` under one row rule."""
    return lambda built: rows_of(built.frames[name], rule)


def _given(name: str, rows: Callable[[Built], list[dict[str, Any]]]) -> Callable[[Built], list[dict[str, Any]]]:
    """``rows`` where input ``name`` was given, none otherwise."""
    return lambda built: rows(built) if built.frames[name] is not None else []


# Why an input is not recomputed from a profile store (PaperInput.from_store).
FROM_ANSWERS = "read from the answers (MMLU scoring, the layer-skip experiment), not from a profile store"
LOGIT_LENS_ONLY = "read under the logit lens only"

# Every input of the paper table, in the order its rows are built (the Rényi summary reads the kNN rows
# before it): adding a claim's table is one entry here (its form on one store in verdicts.recompute, or why
# not) and its path in PAPER_TABLES of rules/common.smk, its Reading beside its analysis and its RowRule beside
# the other rules of its kind. Rows are then ordered by claim (claims.CLAIM_ORDER).
INPUTS: Mapping[str, PaperInput] = {
    "knn": PaperInput(
        "analysis.separability.targets.knn_table (both fold protocols)",
        KNN_READING,
        _given("knn", lambda b: knn_rows(b.frames["knn"], b.frames["accuracy"], b.expected)),
        from_store=S.knn,
    ),
    "heldout": PaperInput(
        "analysis.separability.heldout.family_heldout",
        HELDOUT_READING,
        _rule("heldout", HELDOUT_RULE),
        from_store=S.heldout,
    ),
    "heldout_normalized": PaperInput(
        "analysis.separability.heldout.family_heldout on entropy / log V",
        HELDOUT_NORMALIZED_READING,
        _rule("heldout_normalized", HELDOUT_RULE),
        from_store=f"{LOGIT_LENS_ONLY}: under a fitted lens the held-out family is read on entropy",
    ),
    "baselines": PaperInput(
        "analysis.separability.baselines.baseline_table",
        BASELINE_READING,
        _rule("baselines", BASELINE_RULE),
        from_store=f"{LOGIT_LENS_ONLY}: the profile against its first token and the prompt text",
    ),
    "renyi": PaperInput(
        "analysis.separability.equivalence.renyi_equivalence",
        EQUIVALENCE_READING,
        lambda b: renyi_rows(b.rows, b.frames["renyi"]),
        from_store=f"{LOGIT_LENS_ONLY}: the Rényi orders",
    ),
    "expansion": PaperInput(
        "analysis.expansion.spearman.expansion_spearman (a dataset column when stacked)",
        SPEARMAN_READING,
        _rule("expansion", SPEARMAN_RULE),
        from_store=S.expansion,
    ),
    "accuracy": PaperInput(
        "answers.accuracy.accuracy_table",
        ACCURACY_READING,
        _given("accuracy", lambda b: accuracy_rows(b.frames["accuracy"], b.expected.families)),
        from_store=FROM_ANSWERS,
    ),
    "layer_skip": PaperInput(
        "answers.criticality.skip_comparisons",
        COMPARISON_READING,
        _given("layer_skip", lambda b: comparison_rows(b.frames["layer_skip"], b.scopes)),
        from_store=FROM_ANSWERS,
    ),
    "skip_spearman": PaperInput(
        "answers.criticality.criticality_spearman",
        RANK_READING,
        lambda b: rows_of(b.frames["skip_spearman"], rank_rule(b.scopes)),
        from_store=FROM_ANSWERS,
    ),
    "drop_scores": PaperInput(
        "answers.drop_scores.drop_scores (each criterion's drop set against random k-sets)",
        DROP_SCORE_READING,
        _rule("drop_scores", DROP_RULE),
        from_store=FROM_ANSWERS,
    ),
    "clustering": PaperInput(
        "analysis.families.clustering.clustering_scores (read by the family-pair rows)",
        None,
        from_store=f"{LOGIT_LENS_ONLY}: under a fitted lens the pair rows stand without it",
    ),
    "family_pairs": PaperInput(
        "analysis.families.pairs.family_pairs",
        PAIR_READING,
        lambda b: (
            pair_rows(b.frames["family_pairs"], b.frames["clustering"], b.expected)
            if b.frames["clustering"] is not None or b.frames["family_pairs"] is not None
            else []
        ),
        from_store=S.pairs,
    ),
    "overlap": PaperInput(
        "analysis.expansion.overlap.nucleus_overlap (a dataset column when stacked)",
        OVERLAP_READING,
        _rule("overlap", OVERLAP_RULE),
        from_store=S.overlap,
    ),
    "shapes": PaperInput(
        "analysis.families.shapes.profile_shapes (a dataset column when stacked)",
        SHAPE_READING,
        lambda b: rows_of(b.frames["shapes"], shape_rule(b.expected)),
        from_store=S.shapes,
    ),
}
TABLE_INPUTS = tuple(INPUTS)
# Each analysis table's reading as a standard frame (entropy_lens.core.frames), declared beside its analysis.
READINGS: Mapping[str, Reading] = {name: i.reading for name, i in INPUTS.items() if i.reading is not None}


def paper_table(*, expected: Expected | None = None, **tables: pd.DataFrame | None) -> pd.DataFrame:
    """Every claim with our estimate, its interval, the study's figure and a verdict.

    Args:
        expected: What the configuration asked for (absent claims get a "not run" row).
        **tables: Analysis tables by their name in :data:`INPUTS` (each entry names the function whose
            output it is); a table not given, or ``None``, gives its claims no measured rows.

    Returns:
        Frame with :data:`COLUMNS`; estimates in the row's ``unit`` scale of 0-1 (AUC,
        accuracy, shares), -1..1 (rho) or nats; NaN where a number is missing.

    Raises:
        ValueError: naming an input that is not one of :data:`INPUTS`.
    """
    unknown = sorted(set(tables) - set(INPUTS))
    if unknown:
        raise ValueError(f"unknown paper-table inputs {unknown}; expected some of {list(INPUTS)}")
    expected = expected or Expected()
    frames = {name: _frame(name, tables.get(name)) for name in INPUTS}
    built = Built(frames, [], expected)
    for entry in INPUTS.values():
        if entry.rows is not None:
            built.rows.extend(entry.rows(built))
    rows = built.rows + (absent_rows(built.rows, expected) if expected.datasets else [])
    return _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


def store_tables(store: xr.Dataset, dataset: str, settings: S.StoreSettings) -> dict[str, pd.DataFrame | None]:
    """Every input of :data:`INPUTS` that its ``from_store`` recomputes from one dataset's combined profile store
    (``None`` where the store cannot give it), by name: :func:`paper_table`'s keywords."""
    return {name: i.from_store(store, dataset, settings) for name, i in INPUTS.items() if callable(i.from_store)}


def _frame(name: str, table: pd.DataFrame | None) -> pd.DataFrame | None:
    """Input ``name`` as its rows read it: a standard frame, or the table itself where it has no reading."""
    return table if INPUTS[name].reading is None else standard_frame(name, table)


def standard_frame(name: str, table: pd.DataFrame | None) -> pd.DataFrame | None:
    """The paper-table input ``name`` as a standard frame (``None`` stays ``None``)."""
    return None if table is None else READINGS[name].frame(table, name)


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    rank = {claim: i for i, claim in enumerate(C.CLAIM_ORDER)}
    order = table["claim_id"].map(rank).fillna(len(rank))
    return table.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader needs first, one per claim, model and variant, in claim order: findings
    measured, findings the configuration did not run, then extensions and preconditions.

    Each claim's record says which of its rows these are (:class:`entropy_lens.verdicts.registry.Headline`):
    Shannon entropy for separability; MMLU accuracy pooled over styles under the verdict measure,
    correctness per style where measured (the study reports it per style; the pooled row is a summary
    in the full table); layer skipping at the smallest ``k``, the accuracy statistic (the study's),
    both selection variants; the held-out family on entropy (entropy / log V in the full table);
    overlap by containment; the family pairs on the normalized scale; the Rényi claim's summary row.
    Everything else stays in the full table; rows without a verdict and extensions the configuration
    did not run are left out.
    """
    keep = table["verdict"] != ""
    rules = table["claim_id"].map(_headline_of)
    for rule in dict.fromkeys(rules):
        keep &= ~rules.eq(rule) | _selected(table, rule)
    keep &= _at_smallest_k(table, rules.map(lambda rule: rule.smallest_k).astype(bool))
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


def _headline_of(claim_id: str) -> C.Headline:
    """The headline selection of a row's claim (every row, for an id the registry does not hold)."""
    return C.BY_ID[claim_id].headline if claim_id in C.BY_ID else C.Headline()


def _selected(table: pd.DataFrame, rule: C.Headline) -> pd.Series:
    """Per row: whether ``rule`` shows it (the smallest ``k`` aside, :func:`_at_smallest_k`)."""
    split = table["split"].astype(str)
    selected = pd.Series(rule.shown, index=table.index)
    if rule.measures is not None:
        selected &= table["measure"].isin(rule.measures)
    if rule.splits is not None:
        selected &= split.isin(rule.splits)
    if rule.hidden_units:
        selected &= ~table["unit"].isin(rule.hidden_units)
    if rule.styles == C.POOLED:
        selected &= split.isin([ALL_STYLES, ""]) | ~_has_pooled(table)
    elif rule.styles == C.PER_STYLE:
        selected &= ~split.eq(ALL_STYLES) | ~_has_per_style(table)
    return selected


def _at_smallest_k(table: pd.DataFrame, grouped: pd.Series) -> pd.Series:
    """Per row: outside ``grouped``, without a ``k=<n>`` split, or at the smallest ``k`` of the ``grouped`` rows."""
    k = pd.to_numeric(table["split"].astype(str).str.extract(r"^k=(\d+)", expand=False), errors="coerce")
    ks = k.where(grouped).dropna()
    return ~grouped | k.isna() | (k.eq(ks.min()) if not ks.empty else True)


def _has_per_style(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row of one MMLU style."""
    styled = {
        (c, m)
        for c, m, s in zip(table["claim_id"], table["model"], table["split"], strict=True)
        if s not in (ALL_STYLES, "")
    }
    pairs = zip(table["claim_id"], table["model"], strict=True)
    return pd.Series([(c, m) in styled for c, m in pairs], index=table.index)


def _has_pooled(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row pooled over MMLU styles."""
    rows = zip(table["claim_id"], table["model"], table["split"], strict=True)
    pooled = {(c, m) for c, m, s in rows if s == ALL_STYLES}
    pairs = zip(table["claim_id"], table["model"], strict=True)
    return pd.Series([(c, m) in pooled for c, m in pairs], index=table.index)


def paper_table_from_files(paths: Mapping[str, str | Sequence[str]], expected: Expected) -> pd.DataFrame:
    """:func:`paper_table` from the analysis tables on disk.

    Args:
        paths: Keyword of :func:`paper_table` -> a CSV path, or several to stack (the
            per-dataset expansion and overlap tables).
        expected: What the configuration asked for.
    """
    return paper_table(**{name: _read_csvs(value) for name, value in paths.items()}, expected=expected)


def _read_csvs(value: str | Sequence[str]) -> pd.DataFrame:
    files = [value] if isinstance(value, str) else list(value)
    frames = [read_csv_table(f, keep_default_na=True) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["ACC", "AUC", "POINTS", "Expected", "headline", "paper_table", "paper_table_from_files"]
