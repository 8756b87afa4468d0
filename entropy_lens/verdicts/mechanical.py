"""Mechanical: a stated statistic that its null cannot beat even when the claim holds.

docs/verdicts.md ("The words"): a row's as-stated word is **mechanical**, and it carries no beyond-chance word,
when both hold in the same run:

(a) its null alone reaches the study's bar (the stated statistic can be met without the claim), and
(b) on data simulated on the row's design with the claim true by construction (the **planted-true** simulation),
    the rule shows "beyond its null" in fewer than half the draws (the null cannot be beaten even when the claim
    holds).

The planted-true rate is a column of the nulls table (:mod:`entropy_lens.verdicts.nulls`), computed through the
table's one decision (:func:`~entropy_lens.verdicts.decision.beyond_null`) at the row's margin; :func:`mark_mechanical`
is the pass after the paper table's rows and nulls are built, before its headline. The Spearman of Delta H with the
nucleus-size change is the case in point (:mod:`entropy_lens.analysis.expansion.planted_true`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from entropy_lens.core.intervals import wilson_interval
from entropy_lens.core.planted import Excess
from entropy_lens.verdicts import decision, registry
from entropy_lens.verdicts.decision import MECHANICAL
from entropy_lens.verdicts.readings import CHANCE, NOT_READ
from entropy_lens.verdicts.tested import PlantedNull, PlantedTrue

# (b): the rule shows "beyond its null" in fewer than this share of planted-true draws.
MECHANICAL_SHARE = 0.5
# Planted-true draws come in batches until the share's Wilson interval lies on one side of MECHANICAL_SHARE (the
# decision (b) needs, no more), at most MAX_TRUE_DRAWS.
TRUE_BATCH = 20
MAX_TRUE_DRAWS = 100
# The columns of the nulls table that (b) adds.
TRUE_COLUMNS = ("planted_true_rate", "planted_true_draws")
# The keys a paper-table row and its nulls-table rows share.
ROW_KEYS = ("claim_id", "model", "split", "measure")


# Claim id -> its planted-true simulation (every claim whose null can reach its bar has one, in its object's null).
PLANTED_TRUE: dict[str, PlantedTrue] = {
    t.record.id: t.null.planted_true
    for t in registry.TESTED
    if isinstance(t.null, PlantedNull) and t.null.planted_true is not None
}


def shown_true(excess: Excess, *, margin: float) -> bool:
    """Whether the table's decision reads a planted-true draw's excess ``shown`` at ``margin`` (a negligible excess
    does not count: where the claim holds by construction, the rule should clear its margin)."""
    null = decision.Null("planted true", decision.Interval(0.0, 0.0, 0.0), decision.Interval(*excess), margin=margin)
    return decision.beyond_null(null, n=0, unit="units").word == decision.SHOWN


def planted_true_rate(sim: PlantedTrue, n: int, seed: int = 0) -> tuple[float, int]:
    """The share of ``sim``'s planted-true draws at ``n`` units (capped) that show "beyond its null", and the draws.

    Draws come in batches of :data:`TRUE_BATCH` until the share's Wilson interval lies wholly on one side of
    :data:`MECHANICAL_SHARE`, at most :data:`MAX_TRUE_DRAWS`; ``(nan, 0)`` with fewer than two units.
    """
    if n < 2:
        return math.nan, 0
    units = min(n, sim.max_units)
    hits = used = 0
    shown = partial(shown_true, margin=sim.margin)
    while used < MAX_TRUE_DRAWS:
        hits += round(sim.rate(units, TRUE_BATCH, seed + used, shown) * TRUE_BATCH)
        used += TRUE_BATCH
        low, high = wilson_interval(hits, used)
        if high < MECHANICAL_SHARE or low >= MECHANICAL_SHARE:
            break
    return hits / used, used


def mark_mechanical(table: pd.DataFrame, nulls: pd.DataFrame) -> pd.DataFrame:
    """The paper table with each row that is mechanical (its null reaches the bar, and its planted-true rate is
    below :data:`MECHANICAL_SHARE`) read as such: verdict ``mechanical``, its why saying both, and no beyond-chance
    word (``not read``: its null, which nothing beats, stays in its columns).

    Args:
        table: :func:`entropy_lens.verdicts.table.paper_table` rows.
        nulls: :func:`entropy_lens.verdicts.nulls.nulls_table` of those rows (its ``planted_true_rate``).
    """
    chance = nulls[nulls["reading"] == CHANCE.key] if "reading" in nulls.columns else nulls
    below = chance[chance["planted_true_rate"] < MECHANICAL_SHARE]
    rates = {tuple(str(r[k]) for k in ROW_KEYS): r for r in below.to_dict("records")}
    out = table.copy()
    for index, rec in table.iterrows():
        hit = rates.get(tuple(str(rec[k]) for k in ROW_KEYS))
        if hit is None or not _reaches_bar(rec):
            continue
        out.loc[index, "verdict"] = MECHANICAL
        out.loc[index, "why"] = _why(rec, hit)
        out.loc[index, CHANCE.word] = NOT_READ
        out.loc[index, CHANCE.why] = f"{NOT_READ}: {MECHANICAL} (its null cannot be beaten even where the claim holds)"
    return out


def _reaches_bar(rec: Mapping[str, Any]) -> bool:
    value = rec.get(CHANCE.at_bar)
    return value is not None and pd.notna(value) and bool(float(value))


def _why(rec: Mapping[str, Any], hit: Mapping[str, Any]) -> str:
    draws = int(hit["planted_true_draws"])
    shown_draws = round(float(hit["planted_true_rate"]) * draws)
    sim = PLANTED_TRUE.get(str(rec["claim_id"]))
    instead = sim.instead if sim is not None else ""
    return (
        f"{MECHANICAL}: {rec['why']}, but its null ({rec[CHANCE.name]}) alone gives "
        f"{float(rec[CHANCE.estimate]):.3f}, and on data planted on the row's design with the claim true the rule "
        f"shows beyond its null in {shown_draws} of {draws} draws: the statistic cannot tell"
        + (f"; {instead}" if instead else "")
    )


def planted_true_columns(
    sim: PlantedTrue | None, claim_id: str, n: int, cache: dict[tuple[str, int], tuple[float, int]]
) -> dict[str, Any]:
    """:data:`TRUE_COLUMNS` of a nulls-table row of ``claim_id`` (NaN and 0 without a simulation), cached by the
    units simulated (the row's own, capped)."""
    key = (claim_id, min(n, sim.max_units) if sim is not None else n)
    if key not in cache:
        cache[key] = planted_true_rate(sim, n) if sim is not None else (math.nan, 0)
    rate, draws = cache[key]
    return dict(zip(TRUE_COLUMNS, (rate if draws else np.nan, draws), strict=True))


def true_rates(table: pd.DataFrame, planted_true: Mapping[str, PlantedTrue] | None = None) -> pd.DataFrame:
    """The planted-true columns of every row of ``table`` whose claim has a simulation (its beyond-chance reading),
    keyed as :func:`mark_mechanical` reads them: what the nulls table gives, without its planted-null draws."""
    sims = PLANTED_TRUE if planted_true is None else planted_true
    cache: dict[tuple[str, int], tuple[float, int]] = {}
    rows = []
    for rec in table[table["claim_id"].isin(list(sims))].to_dict("records"):
        n = int(rec["n_sources"]) if pd.notna(rec["n_sources"]) else 0
        columns = planted_true_columns(sims[str(rec["claim_id"])], str(rec["claim_id"]), n, cache)
        rows.append({**{k: rec[k] for k in ROW_KEYS}, "reading": CHANCE.key, **columns})
    return pd.DataFrame(rows, columns=[*ROW_KEYS, "reading", *TRUE_COLUMNS])
