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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.core.frames import Reading
from entropy_lens.core.tables import read_csv_table
from entropy_lens.verdicts.absences import absent_rows
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PER_STYLE, POOLED, PRECONDITION, Headline
from entropy_lens.verdicts.decision import NOT_RUN
from entropy_lens.verdicts.inputs import Built, PaperInput, StoreSettings
from entropy_lens.verdicts.registry import BY_ID, CLAIM_ORDER, TESTED
from entropy_lens.verdicts.rows import COLUMNS, Expected
from entropy_lens.verdicts.units import ACC, AUC, POINTS

if TYPE_CHECKING:
    import xarray as xr

log = logging.getLogger(__name__)


def _inputs() -> dict[str, PaperInput]:
    """Every table the registry's claims read, by name, in the order the claims first name them.

    Raises:
        ValueError: where two different inputs share a name.
    """
    inputs: dict[str, PaperInput] = {}
    for tested in TESTED:
        for entry in tested.inputs:
            if inputs.setdefault(entry.name, entry) is not entry:
                raise ValueError(f"two paper-table inputs are named {entry.name!r}; name each table once")
    return inputs


# Every input of the paper table, in the order its rows are built (a Rényi row reads the kNN rows built before it).
# Rows are then ordered by claim (registry.CLAIM_ORDER).
INPUTS: Mapping[str, PaperInput] = _inputs()
TABLE_INPUTS = tuple(INPUTS)
# What the workflow hands the paper table (rules/common.smk reads it): input -> (its table, relative to the run's
# folder, "{dataset}" for one per enabled dataset; when the configuration makes it, inputs.CONDITIONS).
PAPER_TABLES: Mapping[str, tuple[str, str]] = {name: (i.path, i.made) for name, i in INPUTS.items()}
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
    for tested in TESTED:  # a claim that builds its own rows from a table other claims' rows come from
        if tested.rows is not None:
            built.rows.extend(tested.rows(built))
    rows = built.rows + (absent_rows(built.rows, expected) if expected.datasets else [])
    return _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


def store_tables(store: xr.Dataset, dataset: str, settings: StoreSettings) -> dict[str, pd.DataFrame | None]:
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
    rank = {claim: i for i, claim in enumerate(CLAIM_ORDER)}
    unknown = sorted(set(table["claim_id"]) - set(rank))
    if unknown:
        raise ValueError(f"rows of claims not in the registry: {unknown}; list each record in registry.CLAIMS")
    order = table["claim_id"].map(rank)
    return table.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader needs first, one per claim, model and variant, in claim order: findings
    measured, findings the configuration did not run, then extensions and preconditions.

    Each claim's record says which of its rows these are (:class:`entropy_lens.verdicts.claim.Headline`):
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
    top, not_run = top[~(not_run & (top["role"] == EXTENSION))], not_run[~(not_run & (top["role"] == EXTENSION))]
    role = top["role"]
    return pd.concat(
        [
            top[~not_run & (role == FINDING)],
            top[not_run & (role == FINDING)],
            top[role == EXTENSION],
            top[role == PRECONDITION],
        ],
        ignore_index=True,
    )


def _headline_of(claim_id: str) -> Headline:
    """The headline selection of a row's claim (every row, for an id the registry does not hold)."""
    return BY_ID[claim_id].headline if claim_id in BY_ID else Headline()


def _selected(table: pd.DataFrame, rule: Headline) -> pd.Series:
    """Per row: whether ``rule`` shows it (the smallest ``k`` aside, :func:`_at_smallest_k`)."""
    split = table["split"].astype(str)
    selected = pd.Series(rule.shown, index=table.index)
    if rule.measures is not None:
        selected &= table["measure"].isin(rule.measures)
    if rule.splits is not None:
        selected &= split.isin(rule.splits)
    extension = table["role"].eq(EXTENSION) if rule.extension_units is not None else pd.Series(False, table.index)
    if rule.hidden_units:
        selected &= extension | ~table["unit"].isin(rule.hidden_units)
    if rule.extension_units is not None:
        selected &= ~extension | table["unit"].isin(rule.extension_units)
    if rule.styles == POOLED:
        selected &= split.isin([ALL_STYLES, ""]) | ~_has_pooled(table)
    elif rule.styles == PER_STYLE:
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
    return paper_table(**read_tables(paths), expected=expected)


def read_tables(paths: Mapping[str, str | Sequence[str]]) -> dict[str, pd.DataFrame]:
    """The tables on disk by name: a CSV path, or several stacked (the per-dataset tables)."""
    return {name: _read_csvs(value) for name, value in paths.items()}


def _read_csvs(value: str | Sequence[str]) -> pd.DataFrame:
    files = [value] if isinstance(value, str) else list(value)
    frames = [read_csv_table(f, keep_default_na=True) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["ACC", "AUC", "POINTS", "Expected", "headline", "paper_table", "paper_table_from_files"]
