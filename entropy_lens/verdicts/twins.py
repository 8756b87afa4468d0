"""Beyond the twin: each learned-structure row read against its model's random-init twin (docs/verdicts.md).

The twin table (:mod:`entropy_lens.analysis.twins`) holds, per claim's statistic, the trained model's value, the
twin's and trained - twin with an interval paired over the claim's unit. :func:`with_twins` gives every row of the
paper table whose claim is about what training put there its twin reading (the twin columns, a word by the one
decision function, :func:`entropy_lens.verdicts.decision.beyond_null`, with the rule's own margin) and says
whether the twin alone already shows the claim (its own interval past the study's bar: "a random network shows it
too"). :func:`with_both` makes a headline row's "beyond its null" the weaker of its null's word and its twin's,
and :func:`twin_lines` names the claims a random network of the same architecture already shows.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import rules as V
from entropy_lens.verdicts.rows import interval, text

TWIN_COLUMNS = (
    "twin",
    "twin_estimate",
    "twin_low",
    "twin_high",
    "beyond_twin",
    "beyond_twin_low",
    "beyond_twin_high",
    "beyond_twin_verdict",
    "beyond_twin_why",
    "twin_shows",
)
# The headline keeps its null's own word here when "beyond its null" becomes the weaker of the null's and the twin's.
NULL_ONLY = "beyond_null_only"
# Weakest first: the word a claim's beyond reading takes from two readings is the lower of the two.
STRENGTH = {D.NOT_SHOWN: 0, D.UNDECIDED_BEYOND: 1, D.SHOWN: 2}
NO_TWIN_READING = "no twin reading: the twin answers at chance, so its correctness labels mean nothing"
SHOWS_TOO = "a random network of the same architecture shows it too"
NOT_PROFILED = "no twin reading: the twin was not profiled on this set (twins.datasets)"


@dataclass(frozen=True)
class TwinRule:
    """Where a claim's row finds its twin reading, and how it is judged.

    Attributes:
        reading: The twin table's ``reading``.
        target: The twin table's ``target`` (separability), else ``""``.
        statistic: The twin table's ``statistic`` (``""``: the row's ``measure`` names it).
        margin: The rule's margin (:data:`~entropy_lens.verdicts.decision.NULL_MARGINS`).
        bar: The study's bar: the twin shows the claim when its interval lies wholly above it.
        split_is_dataset: The row's ``split`` names the dataset (expansion, shapes); else ``dataset`` does.
        dataset: The dataset of the twin row where the row does not name it.
    """

    reading: str
    target: str = ""
    statistic: str = ""
    margin: float = 0.0
    bar: float = 0.0
    split_is_dataset: bool = False
    dataset: str = ""


AUC_MARGIN, RHO_MARGIN = D.NULL_MARGINS["AUC"], D.NULL_MARGINS["rho"]
CONTAINMENT_MARGIN, GAP_MARGIN = D.NULL_MARGINS["containment"], D.NULL_MARGINS["gap"]
# Claim id -> its twin rule (Shannon rows of separability; the Rényi orders are read against Shannon, not a twin).
TWIN_RULES: Mapping[str, TwinRule] = {
    "task": TwinRule("separability", "task", "auc", AUC_MARGIN, 0.5, dataset="tasks"),
    "scrambled": TwinRule("separability", "task_scrambled", "auc", AUC_MARGIN, 0.5, dataset="tasks"),
    "format": TwinRule("separability", "format", "auc", AUC_MARGIN, 0.5, dataset="formats"),
    "family": TwinRule("separability", "family", "auc", AUC_MARGIN, 0.5, dataset="blank"),
    "model_identity": TwinRule("separability", "family", "auc", AUC_MARGIN, 0.5, dataset="blank"),
    "spearman": TwinRule("spearman", statistic="spearman", margin=RHO_MARGIN, bar=0.5, split_is_dataset=True),
    "overlap": TwinRule("overlap", margin=CONTAINMENT_MARGIN, bar=0.5, split_is_dataset=True),
    "shape_gpt": TwinRule("shape", "gpt", split_is_dataset=True),
    "shape_llama": TwinRule("shape", "llama", split_is_dataset=True),
    "clustering": TwinRule("family_pair", statistic="family_gap", dataset="blank"),
    "size_resolution": TwinRule("family_pair", statistic="alignment_gap", dataset="blank"),
}
# Claims with no twin reading, and why.
NO_TWIN = {"mmlu_correct": NO_TWIN_READING, "mmlu_correct_calibrated": NO_TWIN_READING}
SEPARABILITY_MEASURE = "shannon"


def with_twins(table: pd.DataFrame, twins: pd.DataFrame) -> pd.DataFrame:
    """``table`` (paper-table rows) with :data:`TWIN_COLUMNS`: each learned-structure row's twin reading.

    Args:
        table: Paper-table rows (``claim_id``, ``model``, ``split``, ``measure``, ``unit`` ...).
        twins: The twin table (:data:`entropy_lens.analysis.twins.contract.COLUMNS`).

    Returns:
        A copy with the twin columns; ``""`` / NaN where a row has no twin reading (its claim is not about
        learned structure, its model's twin was not profiled there, or its measure is not the one read).
    """
    out = table.copy()
    values = [_twin_values(rec, twins) for rec in table.to_dict("records")]
    for column in TWIN_COLUMNS:
        out[column] = [v.get(column, math.nan if _numeric(column) else "") for v in values]
    return out


def _numeric(column: str) -> bool:
    return column not in ("twin", "beyond_twin_verdict", "beyond_twin_why", "twin_shows")


def _twin_values(rec: Mapping[str, Any], twins: pd.DataFrame) -> dict[str, Any]:
    claim = str(rec.get("claim_id", ""))
    if claim in NO_TWIN and not str(rec.get("why", "")).startswith(D.NOT_RUN):
        return {"beyond_twin_why": NO_TWIN[claim]}
    rule = TWIN_RULES.get(claim)
    if rule is None or str(rec.get("why", "")).startswith(D.NOT_RUN):
        return {}
    if rule.reading == "separability" and str(rec.get("measure", "")) != SEPARABILITY_MEASURE:
        return {}
    if rule.reading == "shape":
        return _shape_values(rule, rec, _rows(twins, rule, rec), twins)
    found = _rows(twins, rule, rec)
    if found.empty:
        return {"beyond_twin_why": NOT_PROFILED} if not _profiled_on(twins, _dataset(rule, rec)) else {}
    return judged(found.iloc[0].to_dict(), margin=rule.margin, bar=rule.bar, unit=str(rec.get("unit", "")))


def _dataset(rule: TwinRule, rec: Mapping[str, Any]) -> str:
    """The dataset of a row's twin reading."""
    return str(rec.get("split", "")) if rule.split_is_dataset else rule.dataset


def _profiled_on(twins: pd.DataFrame, dataset: str) -> bool:
    """Whether the twins were read on ``dataset`` (a row of the twin table with a value there)."""
    return bool(((twins["dataset"].astype(str) == dataset) & twins["beyond"].notna()).any())


def _rows(twins: pd.DataFrame, rule: TwinRule, rec: Mapping[str, Any]) -> pd.DataFrame:
    mask = (twins["reading"] == rule.reading) & (twins["dataset"].astype(str) == _dataset(rule, rec))
    mask &= twins["model"].astype(str) == str(rec.get("model", ""))
    if rule.reading == "family_pair":
        mask &= twins["scale"].astype(str) == str(rec.get("measure", ""))
    if rule.reading == "separability":
        mask &= (twins["target"].astype(str) == rule.target) & (twins["split"].fillna("").astype(str) == "")
    statistic = rule.statistic or (str(rec.get("measure", "")) if rule.reading != "shape" else "")
    if statistic:
        mask &= twins["statistic"].astype(str) == statistic
    return twins[mask & twins["beyond"].notna()]


def judged(rec: Mapping[str, Any], *, margin: float, bar: float, unit: str) -> dict[str, Any]:
    """The twin columns of one twin row: the twin's value, trained - twin, its word and whether the twin alone
    shows the claim (its interval wholly above ``bar``)."""
    twin = interval(rec, "null_estimate", "null_low", "null_high")
    beyond = interval(rec, "beyond", "beyond_low", "beyond_high")
    null = D.Null(text(rec.get("null_name")), twin, beyond, margin=margin)
    scale, digits = (100.0, 1) if "%" in unit or "points" in unit else (1.0, 3)
    n = int(rec["n_sources"]) if pd.notna(rec.get("n_sources")) else 0
    word = D.beyond_null(null, n=n, unit="sources", scale=scale, digits=digits)
    shows = twin.finite and twin.low > bar
    return {
        "twin": null.name,
        "twin_estimate": twin.estimate,
        "twin_low": twin.low,
        "twin_high": twin.high,
        "beyond_twin": beyond.estimate,
        "beyond_twin_low": beyond.low,
        "beyond_twin_high": beyond.high,
        "beyond_twin_verdict": word.word,
        "beyond_twin_why": word.why.replace("observed - ", "trained - ", 1),
        "twin_shows": SHOWS_TOO if shows else "",
    }


def _shape_values(rule: TwinRule, rec: Mapping[str, Any], found: pd.DataFrame, twins: pd.DataFrame) -> dict[str, Any]:
    """A shape's twin reading: trained - twin of the weakest part in its claimed direction; the twin shows the
    shape when every part of its own profile lies on the claimed side of its bar."""
    parts = {str(r["statistic"]): r for r in found.to_dict("records")}
    claimed = V.SHAPE_CLAIMS[rule.target]
    if not all(p.statistic in parts for p in claimed):
        return {"beyond_twin_why": NOT_PROFILED} if not _profiled_on(twins, _dataset(rule, rec)) else {}
    weakest, shows = None, True
    for part in claimed:
        r = parts[part.statistic]
        sign = 1.0 if part.above else -1.0
        lo, hi = sorted((sign * float(r["beyond_low"]), sign * float(r["beyond_high"])))
        directed = {**r, "beyond": sign * float(r["beyond"]), "beyond_low": lo, "beyond_high": hi}
        if weakest is None or lo < weakest["beyond_low"] or math.isnan(lo):
            weakest = directed
        twin_lo, twin_hi = float(r["null_low"]), float(r["null_high"])
        shows &= (twin_lo > part.bar) if part.above else (twin_hi < part.bar)
    values = judged(weakest, margin=GAP_MARGIN, bar=math.inf, unit=str(rec.get("unit", "")))
    values["beyond_twin_why"] = f"weakest part {weakest['statistic']}: " + values["beyond_twin_why"]
    values["twin_shows"] = SHOWS_TOO if shows else ""
    return values


def weaker(first: str, second: str) -> str:
    """The weaker of two beyond words (not shown < undecided < shown); a missing word leaves the other."""
    words = [w for w in (first, second) if w in STRENGTH]
    return min(words, key=STRENGTH.__getitem__) if words else first


def with_both(top: pd.DataFrame) -> pd.DataFrame:
    """Headline rows whose "beyond its null" is beyond both its null and its twin: the weaker of the two words
    where the row has a twin reading (the null's own word kept in :data:`NULL_ONLY`, the twin's reason added)."""
    out = top.copy()
    out[NULL_ONLY] = out["beyond_verdict"]
    has = out["beyond_twin_verdict"].astype(str).isin(list(STRENGTH))
    combined = [weaker(str(a), str(b)) for a, b in zip(out["beyond_verdict"], out["beyond_twin_verdict"], strict=True)]
    out.loc[has, "beyond_verdict"] = [c for c, h in zip(combined, has, strict=True) if h]
    reason = "; beyond the twin: " + out["beyond_twin_verdict"].astype(str) + " (" + out["beyond_twin_why"] + ")"
    out.loc[has, "beyond_why"] = out.loc[has, "beyond_why"].astype(str) + reason[has]
    return out


def twin_lines(top: pd.DataFrame) -> list[str]:
    """One sentence naming the claims a random network of the same architecture already shows, and one counting
    the rows read beyond the twin."""
    read = top[top["beyond_twin_verdict"].astype(str).isin(list(STRENGTH))]
    if read.empty:
        return []
    shown = read[read["twin_shows"] == SHOWS_TOO]
    names = list(dict.fromkeys(shown["claim"].astype(str)))
    first = (
        f"A random network of the same architecture already shows: {'; '.join(names)}."
        if names
        else "No claim read on the twins is shown by a random network of the same architecture alone."
    )
    tally = read["beyond_twin_verdict"].value_counts()
    words = ", ".join(f"{int(tally.get(w, 0))} {w}" for w in (D.SHOWN, D.NOT_SHOWN, D.UNDECIDED_BEYOND))
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
