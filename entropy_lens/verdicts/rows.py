"""One row of the paper table: its columns, the one builder every claim's rows go through, and what
the configuration asked to measure (:class:`Expected`), so that every absence is explained.

Every analysis hands its table over as a standard frame (:mod:`entropy_lens.core.frames`: model,
split, measure, estimate with its interval, n and the unit's count); a claim's :class:`RowRule` says
how a record becomes a row (its verdict rule, unit, role, the study's figure and the note), and
:func:`rows_of` turns the frame into rows through :func:`row`.  Missing numbers are NaN, missing
text ``""``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from entropy_lens.core.frames import ESTIMATE, HIGH, LOW, MEASURE, MODEL, NULL_CONTRACT, SOURCES, SPLIT, N
from entropy_lens.verdicts import decision, outcomes, readings
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PRECONDITION, Claim
from entropy_lens.verdicts.decision import NOT_RUN
from entropy_lens.verdicts.study import skip_scope, study_sentence

# A row's null and its excess over it (the chance reading, readings.CHANCE): its columns as the nulls table shows them.
ROW_NULL_COLUMNS = (
    "null",
    "null_estimate",
    "null_low",
    "null_high",
    "beyond",
    "beyond_low",
    "beyond_high",
    "beyond_verdict",
)
# A rule the study's statistic was judged by before another replaced it (the overlap claim's Jaccard > 0.5): its
# reading beside the row's, on the same bootstrap.
ORIGINAL_COLUMNS = ("original_rule", "original", "original_low", "original_high", "original_verdict", "original_why")
COLUMNS = (
    "claim",
    "claim_id",
    "role",
    "model",
    "split",
    "measure",
    "unit",
    "estimate",
    "ci_low",
    "ci_high",
    "baseline",
    "baseline_low",
    "baseline_high",
    "study_protocol",
    "study_protocol_low",
    "study_protocol_high",
    "study",
    "verdict",
    "why",
    *ORIGINAL_COLUMNS,
    *readings.COLUMNS,
    "n",
    "n_sources",
    "note",
)
NUMBER_COLUMNS = {c for c in COLUMNS if c.startswith(("estimate", "ci_", "baseline", "study_protocol"))} | {
    "original",
    "original_low",
    "original_high",
    *readings.NUMBER_COLUMNS,
    "n",
    "n_sources",
}
# The columns an analysis table carries for its null (docs/verdicts.md, "Beyond its null").
NULL_NAME, NULL_COLUMNS, BEYOND_COLUMNS = NULL_CONTRACT[0], NULL_CONTRACT[1:4], NULL_CONTRACT[4:]
# An analysis table's optional column: the statistic its null was subtracted from, where it differs from the row's
# estimate (read on the cells the null could be read on).
NULL_OBSERVED = "null_observed"


@dataclass(frozen=True)
class Expected:
    """What the configuration asked to measure, so that every absence is explained.

    Attributes:
        datasets: Dataset -> the models profiled on it (a dataset left out is disabled).
        layer_skip: Models in the layer-skip experiment (empty: the experiment is off).
        k_study: The study's kNN ``k``; a row that had to use fewer is inconclusive.
        families: Model -> family.
        sources: Model -> its configured source (a hub id names a study model).
        architectures: Model -> its ``config.json`` ``model_type`` (for architecture extensions).
    """

    datasets: Mapping[str, Sequence[str]] = field(default_factory=dict)
    layer_skip: Sequence[str] = ()
    k_study: int = 29
    families: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    architectures: Mapping[str, str] = field(default_factory=dict)

    def skip_scopes(self) -> dict[str, str | None]:
        """Model -> the layer-skip scope the study names for it (or ``None``)."""
        return {m: skip_scope(m, f, self.sources.get(m, "")) for m, f in self.families.items()}

    def one_model_per_family(self, dataset: str = "blank") -> bool:
        """Whether ``dataset`` has two or more models, each the only one of its family (families then equal models)."""
        counts = pd.Series([self.families.get(m, m) for m in self.datasets.get(dataset, ())]).value_counts()
        return counts.size >= 2 and counts.max() < 2


def span(values: Sequence[float], spec: str = ".2f") -> str:
    return f"{min(values):{spec}}–{max(values):{spec}}"


def interval(row: Mapping[str, Any] | pd.Series, mean: str, low: str, high: str) -> decision.Interval:
    values = [row[c] for c in (mean, low, high)]
    return decision.Interval(*(float(v) if v is not None and pd.notna(v) else math.nan for v in values))


def word(verdict: decision.Verdict | outcomes.Outcome, role: str) -> str:
    """A verdict in the words of the row's role (a word a design forces, mechanical or cannot test, stays)."""
    if isinstance(verdict, outcomes.Outcome):
        return verdict.outcome
    if role == PRECONDITION:
        return decision.PRECONDITION_WORDS.get(verdict.verdict, verdict.verdict)
    if role == EXTENSION and not verdict.why.startswith(NOT_RUN):
        return decision.EXTENSION_WORDS.get(verdict.verdict, verdict.verdict)
    return verdict.verdict


def row(
    claim: Claim,
    model: str,
    unit: str,
    verdict: decision.Verdict | outcomes.Outcome,
    *,
    role: str = FINDING,
    **values: Any,
) -> dict[str, Any]:
    """One table row of ``claim``; intervals (:class:`~entropy_lens.verdicts.decision.Interval`) expand into columns.

    The row carries the claim's id (``claim_id``, what code keys rows by) and its name (``claim``, for readers).
    A :class:`~entropy_lens.verdicts.decision.Null` (or a :class:`~entropy_lens.verdicts.readings.NotRead`) given
    under a reading's key (``chance``, ``feature``, ``twin``: :data:`entropy_lens.verdicts.readings.READINGS`) fills
    that reading's columns; a row not run reads none. Missing numbers are NaN, missing text ``""``.
    """
    row: dict[str, Any] = {c: math.nan if c in NUMBER_COLUMNS else "" for c in COLUMNS}
    row.update(
        claim=claim.name,
        claim_id=claim.id,
        role=role,
        model=model,
        unit=unit,
        verdict=word(verdict, role),
        why=verdict.why,
    )
    for key, value in values.items():
        if isinstance(value, decision.Null | readings.NotRead):
            if not verdict.why.startswith(NOT_RUN):
                scale, digits = _scale(unit)
                n, estimate = _units(values.get("n_sources")), _estimate(values.get("ours"))
                row.update(
                    readings.reading_values(
                        readings.BY_KEY[key], value, n=n, estimate=estimate, scale=scale, digits=digits
                    )
                )
        elif isinstance(value, decision.Interval):
            prefix = "ci" if key == "ours" else key
            row[key if key != "ours" else "estimate"] = value.estimate
            row[f"{prefix}_low"], row[f"{prefix}_high"] = value.low, value.high
        else:
            row[key] = value
    return row


def _estimate(value: Any) -> float:
    """The row's estimate where it has one (NaN otherwise)."""
    return value.estimate if isinstance(value, decision.Interval) else math.nan


def _units(value: Any) -> int:
    """A count column as an int (0 where missing)."""
    return int(value) if value is not None and pd.notna(value) else 0


def _scale(unit: str) -> tuple[float, int]:
    """How a number in ``unit`` is shown: percent units at one decimal, the rest at three."""
    return (100.0, 1) if "%" in unit or "points" in unit else (1.0, 3)


def table_null(rec: Record, *, margin: float, bar: float | None = None, instead: str = "") -> decision.Null | None:
    """The null an analysis table carries in its own columns (``null_name``, ``null_*``, ``beyond*``), or
    ``None`` where it has none. Where the table says what its null was subtracted from (``null_observed``: the
    statistic on the cells the null could be read on), that is the null's observed value; else the row's own."""
    if not text(rec.get(NULL_NAME)) or any(pd.isna(rec.get(c)) for c in (*NULL_COLUMNS, *BEYOND_COLUMNS)):
        return None
    observed = rec.get(NULL_OBSERVED)
    return decision.Null(
        text(rec[NULL_NAME]),
        interval(rec, *NULL_COLUMNS),
        interval(rec, *BEYOND_COLUMNS),
        margin=margin,
        bar=bar,
        instead=instead,
        observed=float(observed) if observed is not None and pd.notna(observed) else math.nan,
    )


def count(value: Any) -> float:
    return int(value) if pd.notna(value) else math.nan


def text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def family_shortfall(expected: Expected) -> str:
    """Why the family analyses of blank prompts cannot run, or ``""`` when they can."""
    blank = expected.datasets.get("blank")
    if not blank:
        return "dataset 'blank' is disabled"
    return f"needs >= 2 models on 'blank', got {len(blank)}" if len(blank) < 2 else ""


def pair_shortfall(models: Sequence[str], families: Mapping[str, str]) -> str:
    """Why no same-family pair was compared (more prompts would not change it)."""
    counts = pd.Series([families.get(m, "") for m in models]).value_counts()
    if counts.empty or counts.max() < 2:
        return "one model per family: family and model identity coincide, so size cannot be told apart (make study)"
    if counts.size < 2:
        return f"only family {counts.index[0]} on 'blank': no other family to compare with"
    return "no two models of one family with different layer counts on 'blank'"


Record = Mapping[str, Any]
# A row field: one value for every record, or a function of the record.
Field = str | Callable[[Record], Any]


@dataclass(frozen=True)
class RowRule:
    """How a claim's standard frame becomes paper-table rows.

    Every field is one value, or a function of the record (a dict of the frame's row, its standard
    columns beside the analysis's own).

    Attributes:
        claim: The claim's record (:class:`entropy_lens.verdicts.claim.Claim`); rows carry its id as
            ``claim_id`` beside its name.
        unit: The estimate's unit.
        judge: ``(estimate, record) -> verdict`` (or an outcome), the claim's verdict rule applied.
        role: Finding, precondition or extension; default the record's role (a rule sets it where the study's
            scope decides it per model).
        study: The study's figure or sentence; default the record's figure sentence.
        note: What a reader needs beside the number.
        keep: Which records become rows (default: all).
        model, split, measure: Override the frame's (a pair of models, a split written out).
        extra: Further columns: the ``baseline`` and ``study_protocol`` intervals.
        has_estimate: Whether the row shows the frame's estimate (a shape row has three statistics instead).
        null: ``record -> Null`` (or ``None``): the claim's null where the rule derives it (a fixed bar); by
            default the null the analysis table carries in its own columns (:func:`table_null`).
        margin: The excess over the null below which nothing is shown beyond it (:data:`verdicts.NULL_MARGINS`).
        bar: The study's bar for the statistic, which a null may already reach (``None``: no single bar).
        instead: What tests the claim where its statistic is mechanical (the null reaches the bar).
        readings: ``record -> {reading key: Null or NotRead}``: the row's readings other than chance (``feature``:
            beyond the simplest feature, ``twin``: beyond the twin; :mod:`entropy_lens.verdicts.readings`); ``None``
            or a missing key: none.
    """

    claim: Claim | Callable[[Record], Claim]
    unit: Field
    judge: Callable[[decision.Interval, Record], decision.Verdict | outcomes.Outcome]
    role: Field | None = None
    study: Field | None = None
    note: Field = ""
    keep: Callable[[Record], bool] | None = None
    model: Field | None = None
    split: Field | None = None
    measure: Field | None = None
    extra: Callable[[Record], Mapping[str, Any]] | None = None
    has_estimate: bool = True
    null: Callable[[Record], decision.Null | None] | None = None
    margin: float = 0.0
    bar: float | None = None
    instead: str = ""
    readings: Callable[[Record], Mapping[str, decision.Null | readings.NotRead | None]] | None = None


def rows_of(frame: pd.DataFrame | None, rule: RowRule) -> list[dict[str, Any]]:
    """The rows of a standard frame under ``rule`` (none for a missing frame)."""
    if frame is None:
        return []
    out = []
    for rec in frame.to_dict("records"):
        if rule.keep is not None and not rule.keep(rec):
            continue
        ours = interval(rec, ESTIMATE, LOW, HIGH)
        numbers: dict[str, Any] = {"ours": ours} if rule.has_estimate else {}
        null = (
            rule.null(rec)
            if rule.null is not None
            else table_null(rec, margin=rule.margin, bar=rule.bar, instead=rule.instead)
        )
        if null is not None:
            numbers[readings.CHANCE.key] = null
        more = rule.readings(rec) if rule.readings is not None else {}
        numbers.update({key: value for key, value in more.items() if value is not None})
        claim = _at(rule.claim, rec)
        out.append(
            row(
                claim,
                str(_at(rule.model, rec) if rule.model is not None else rec[MODEL]),
                _at(rule.unit, rec),
                rule.judge(ours, rec),
                role=_at(rule.role, rec) if rule.role is not None else claim.role,
                split=_at(rule.split, rec) if rule.split is not None else rec[SPLIT],
                measure=_at(rule.measure, rec) if rule.measure is not None else rec[MEASURE],
                **numbers,
                **(rule.extra(rec) if rule.extra is not None else {}),
                study=_at(rule.study, rec) if rule.study is not None else study_sentence(claim),
                n=count(rec[N]),
                n_sources=count(rec[SOURCES]),
                note=_at(rule.note, rec),
            )
        )
    return out


def _at(field: Field, rec: Record) -> Any:
    return field(rec) if callable(field) else field
