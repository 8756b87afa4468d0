"""Beyond the twin: each learned-structure row read against its model's random-init twin (docs/verdicts.md).

The twin table (:mod:`entropy_lens.analysis.twins`) holds, per claim's statistic, the trained model's value, the
twin's and trained - twin with an interval paired over the claim's unit. :func:`with_twins` fills every paper-table
row whose claim is about what training put there with its twin reading (:data:`~entropy_lens.verdicts.readings.TWIN`:
the ``twin_*`` columns, filled by :func:`~entropy_lens.verdicts.readings.reading_values` and judged by the table's one
decision with the rule's own margin); its ``twin_at_bar`` says whether the twin alone already shows the claim (its
own interval wholly past the study's bar: "a random network shows it too"). :func:`twin_lines` names the claims a
random network of the same architecture already shows.

The fixed rule that a claim's "beyond its null" is beyond both its null and its twin is the claim's word
(:func:`entropy_lens.verdicts.claim_verdicts.claim_verdicts`); each row keeps its chance and twin words apart.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.verdicts import decision, registry, rules
from entropy_lens.verdicts.readings import NUMBER_COLUMNS, TWIN, NotRead, reading_values
from entropy_lens.verdicts.rows import interval, text
from entropy_lens.verdicts.tested import FAMILY_PAIR, SEPARABILITY, SHAPE, NoNull, TwinRule

NOT_PROFILED = "the twin was not profiled on this set (twins.datasets)"
SHOWS_TOO = "a random network of the same architecture shows it too"
# The separability rows are read on Shannon entropy (the Rényi orders are read against Shannon, not a twin).
SEPARABILITY_MEASURE = "shannon"
# Claim id -> its twin rule (docs/verdicts.md, "Beyond the twin"), as each claim's object says.
TWIN_RULES: Mapping[str, TwinRule] = {t.record.id: t.twin for t in registry.TESTED if isinstance(t.twin, TwinRule)}
# The claims whose twin rows are paired kNN scores on identical folds (their planted null: verdicts/nulls.py).
SEPARABILITY_CLAIMS = frozenset(claim for claim, rule in TWIN_RULES.items() if rule.reading == SEPARABILITY)
# Claims of learned structure with no twin reading, and why.
NO_TWIN = {t.record.id: t.twin.reason for t in registry.TESTED if isinstance(t.twin, NoNull)}


def with_twins(table: pd.DataFrame, twins: pd.DataFrame) -> pd.DataFrame:
    """``table`` (paper-table rows) with each learned-structure row's twin reading in :data:`TWIN`'s columns.

    Args:
        table: Paper-table rows (``claim_id``, ``model``, ``split``, ``measure``, ``unit`` ...).
        twins: The twin table (:data:`entropy_lens.analysis.twins.contract.COLUMNS`).

    Returns:
        A copy; a row whose claim is not about learned structure, that was not run, or whose statistic the twin
        does not read keeps its columns as they were; "not read" with the reason for MMLU correctness and for a
        set the twin was not profiled on.
    """
    out = table.copy()
    values = [twin_values(rec, twins) for rec in table.to_dict("records")]
    for column in TWIN.columns:
        empty = math.nan if column in NUMBER_COLUMNS else ""
        old = out[column] if column in out.columns else pd.Series(empty, index=out.index, dtype=object)
        out[column] = [v.get(column, o) for v, o in zip(values, old, strict=True)]
    return out


def twin_values(rec: Mapping[str, Any], twins: pd.DataFrame) -> dict[str, Any]:
    """The :data:`TWIN` columns of one paper-table row (``{}`` where it has no twin reading)."""
    claim = str(rec.get("claim_id", ""))
    if str(rec.get("why", "")).startswith(decision.NOT_RUN):
        return {}
    if claim in NO_TWIN:
        return _values(NotRead(NO_TWIN[claim]), rec, n=0)
    rule = TWIN_RULES.get(claim)
    if rule is None or (rule.reading == SEPARABILITY and str(rec.get("measure", "")) != SEPARABILITY_MEASURE):
        return {}
    found = _rows(twins, rule, rec)
    if rule.reading == SHAPE:
        return _shape_values(rule, rec, found, twins)
    if found.empty:
        return _values(NotRead(NOT_PROFILED), rec, n=0) if not _profiled_on(twins, _dataset(rule, rec)) else {}
    row = found.iloc[0].to_dict()
    twin = interval(row, "null_estimate", "null_low", "null_high")
    return judged(row, rec, margin=rule.margin, shows=twin.finite and twin.low > rule.bar)


def judged(twin_row: Mapping[str, Any], rec: Mapping[str, Any], *, margin: float, shows: bool) -> dict[str, Any]:
    """The :data:`TWIN` columns of one twin-table row: a :class:`~entropy_lens.verdicts.decision.Null` whose value is
    the twin's statistic with its interval and whose excess is trained - twin with its paired interval, read by
    :func:`~entropy_lens.verdicts.readings.reading_values` at ``margin``.

    ``twin_at_bar`` is ``shows`` (the twin's own interval wholly past the study's bar), not the null's estimate at
    the bar (:meth:`~entropy_lens.verdicts.decision.Null.reaches_bar`): the twin shows the claim when its interval
    does, as docs/verdicts.md fixes.
    """
    null = decision.Null(
        text(twin_row.get("null_name")),
        interval(twin_row, "null_estimate", "null_low", "null_high"),
        interval(twin_row, "beyond", "beyond_low", "beyond_high"),
        margin=margin,
        observed=float(twin_row["estimate"]) if pd.notna(twin_row.get("estimate")) else math.nan,
    )
    n = int(twin_row["n_sources"]) if pd.notna(twin_row.get("n_sources")) else 0
    values = _values(null, rec, n=n)
    why = str(values[TWIN.why]).replace("observed - ", "trained - ", 1)
    values[TWIN.why] = f"{why}; {SHOWS_TOO}" if shows else why
    values[TWIN.at_bar] = float(shows)
    return values


def _values(null: decision.Null | NotRead, rec: Mapping[str, Any], *, n: int) -> dict[str, Any]:
    """:func:`~entropy_lens.verdicts.readings.reading_values` of :data:`TWIN` in the row's unit."""
    unit = str(rec.get("unit", ""))
    scale, digits = (100.0, 1) if "%" in unit or "points" in unit else (1.0, 3)
    estimate = float(rec["estimate"]) if pd.notna(rec.get("estimate")) else math.nan
    return reading_values(TWIN, null, n=n, estimate=estimate, scale=scale, digits=digits)


def _dataset(rule: TwinRule, rec: Mapping[str, Any]) -> str:
    """The dataset of a row's twin reading."""
    return str(rec.get("split", "")) if rule.split_is_dataset else rule.dataset


def _profiled_on(twins: pd.DataFrame, dataset: str) -> bool:
    """Whether the twins were read on ``dataset`` (a row of the twin table with a value there)."""
    return bool(((twins["dataset"].astype(str) == dataset) & twins["beyond"].notna()).any())


def _rows(twins: pd.DataFrame, rule: TwinRule, rec: Mapping[str, Any]) -> pd.DataFrame:
    """The twin-table rows with a value that read ``rec``'s statistic on its model and dataset."""
    mask = (twins["reading"] == rule.reading) & (twins["dataset"].astype(str) == _dataset(rule, rec))
    mask &= twins["model"].astype(str) == str(rec.get("model", ""))
    if rule.reading == FAMILY_PAIR:
        mask &= twins["scale"].astype(str) == str(rec.get("measure", ""))
    if rule.reading == SEPARABILITY:
        mask &= (twins["target"].astype(str) == rule.target) & (twins["split"].fillna("").astype(str) == "")
    statistic = rule.statistic or (str(rec.get("measure", "")) if rule.reading != SHAPE else "")
    if statistic:
        mask &= twins["statistic"].astype(str) == statistic
    return twins[mask & twins["beyond"].notna()]


def _shape_values(rule: TwinRule, rec: Mapping[str, Any], found: pd.DataFrame, twins: pd.DataFrame) -> dict[str, Any]:
    """A shape's twin reading: trained - twin of its weakest part in the claimed direction (each part's values
    signed so that the claimed side is up); the twin shows the shape when every part of its own profile lies on the
    claimed side of its bar."""
    parts = {str(r["statistic"]): r for r in found.to_dict("records")}
    claimed = rules.SHAPE_CLAIMS[rule.target]
    if not all(p.statistic in parts for p in claimed):
        return _values(NotRead(NOT_PROFILED), rec, n=0) if not _profiled_on(twins, _dataset(rule, rec)) else {}
    directed = [_directed(parts[part.statistic], 1.0 if part.above else -1.0) for part in claimed]
    weakest = min(directed, key=lambda r: r["beyond_low"] if math.isfinite(r["beyond_low"]) else -math.inf)
    shows = all(_on_side(parts[part.statistic], part) for part in claimed)
    values = judged(weakest, rec, margin=rule.margin, shows=shows)
    values[TWIN.why] = f"weakest part {weakest['statistic']}: {values[TWIN.why]}"
    return values


def _directed(row: Mapping[str, Any], sign: float) -> dict[str, Any]:
    """A twin row's values signed so that the claimed direction is up (each interval's ends reordered)."""
    out = dict(row)
    for mean, low, high in (
        ("estimate", "ci_low", "ci_high"),
        ("null_estimate", "null_low", "null_high"),
        ("beyond", "beyond_low", "beyond_high"),
    ):
        value = interval(row, *(c if c in row else mean for c in (mean, low, high)))
        out[mean] = sign * value.estimate
        out[low], out[high] = sorted((sign * value.low, sign * value.high))
    return out


def _on_side(row: Mapping[str, Any], part: rules.ShapePart) -> bool:
    """Whether the twin's own interval of a shape part lies wholly on the claimed side of its bar."""
    low, high = float(row["null_low"]), float(row["null_high"])
    return low > part.bar if part.above else high < part.bar


def twin_lines(top: pd.DataFrame) -> list[str]:
    """One sentence naming the claims a random network of the same architecture already shows (rows whose
    ``twin_at_bar`` is set), and one counting the rows read beyond the twin by their words."""
    if TWIN.word not in top.columns:
        return []
    read = top[top[TWIN.word].astype(str).isin(decision.BEYOND_WORDS)]
    if read.empty:
        return []
    shown = read[pd.to_numeric(read[TWIN.at_bar], errors="coerce") == 1.0]
    names = list(dict.fromkeys(shown["claim"].astype(str)))
    first = (
        f"A random network of the same architecture already shows: {'; '.join(names)}."
        if names
        else "No claim read on the twins is shown by a random network of the same architecture alone."
    )
    tally = read[TWIN.word].astype(str).value_counts()
    words = "; ".join(f"{int(tally.get(w, 0))} {w}" for w in decision.BEYOND_WORDS)  # "; ": a word holds a comma
    return [first, f"Beyond the twin ({len(read)} rows read on the twins): {words}."]


def twin_section(top: pd.DataFrame, *, width: int | None = None) -> str:
    """The verdicts' "Beyond the twin" section: a Markdown heading and :func:`twin_lines`, or (``width``) a plain
    heading and the lines wrapped for a terminal; ``""`` where no row was read on the twins."""
    lines = twin_lines(top)
    if not lines:
        return ""
    body = " ".join(lines) + " Per row: twins.md."
    if width is None:
        return f"\n## Beyond the twin\n\n{body}\n"
    return "\nBeyond the twin\n" + textwrap.fill(body, width) + "\n"
