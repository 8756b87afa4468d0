"""The null-calibration table: per claim's rows, its null, the run's observed and null values, the excess
with its interval, and how often the rule shows "beyond its null" on data planted under that null.

Every reading of a paper-table row that carries a null (:mod:`entropy_lens.verdicts.readings`: beyond chance, beyond
the simplest feature, beyond the twin) becomes one row here, named by its ``reading``; ``observed - null_estimate``
is ``beyond`` on every row. The planted-null rate is simulated at the row's own sample size (its ``n_sources``)
through the rule's own interval and decision (:data:`PLANTED`, :data:`PLANTED_READINGS`); a rate above
:data:`MAX_PLANTED_RATE` says the rule could pass on null data. Beside it, the planted-true rate
(:mod:`entropy_lens.verdicts.mechanical`): how often the rule shows "beyond its null" where the claim is true by
construction, for the claims whose null can reach the study's bar.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from entropy_lens.analysis.expansion.planted_draws import SPEARMAN
from entropy_lens.analysis.separability.nulls import baseline_planted_rate
from entropy_lens.core.draws import MAX_RATE_HIGH, DrawSettings, wilson_high
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.core.planted import Shown
from entropy_lens.verdicts import decision, registry
from entropy_lens.verdicts.inputs import Built
from entropy_lens.verdicts.mechanical import PLANTED_TRUE, TRUE_COLUMNS, PlantedTrue, planted_true_columns
from entropy_lens.verdicts.planted_nulls import SHOWN_WORDS, Planted, shown_excess
from entropy_lens.verdicts.readings import CHANCE, FEATURE, READINGS, TWIN, ReadingColumns
from entropy_lens.verdicts.rows import ROW_NULL_COLUMNS, Expected
from entropy_lens.verdicts.table import INPUTS, standard_frame
from entropy_lens.verdicts.tested import NoNull, PlantedNull, resolve
from entropy_lens.verdicts.twins import SEPARABILITY_CLAIMS

log = logging.getLogger(__name__)

# A rule shows "beyond its null" on planted null data in at most this share of draws (a 95% interval's
# one-sided error is 2.5%); a rate whose own interval lies above it is logged as a rule that passes on nulls.
MAX_PLANTED_RATE = 0.05
NULLS_COLUMNS = (
    "claim_id",
    "claim",
    "role",
    "model",
    "split",
    "measure",
    "unit",
    "n_sources",
    "reading",
    "observed",
    *ROW_NULL_COLUMNS,
    "planted_null_rate",
    "planted_low",
    "planted_high",
    "planted_draws",
    "planted_n",
    "planted_design",
    "planted_note",
    *TRUE_COLUMNS,
)


def _shown(statistic: str | float) -> Shown:
    """The one decision on an excess over the null, at the statistic's margin (or at the margin given)."""
    margin = decision.NULL_MARGINS[statistic] if isinstance(statistic, str) else statistic
    return partial(shown_excess, margin=margin)


def _simulator(null: PlantedNull) -> Planted:
    """A claim's planted-null simulator as ``(units, draws, seed) -> share``: at its fewest units, with its keywords,
    deciding each draw at its statistic's margin."""
    keywords = dict(null.keywords) | ({"shown": _shown(null.margin)} if null.margin != "" else {})

    def simulate(n: int, draws: int, seed: int) -> float:
        return resolve(null.simulator)(max(n, null.min_units), draws, seed, **keywords)

    return simulate


# What each claim's object says of its null (registry.TESTED; docs/architecture.md, "A claim"):
_NULLS = {t.record.id: t.null for t in registry.TESTED}
_PLANTED = {claim_id: null for claim_id, null in _NULLS.items() if isinstance(null, PlantedNull)}
# Claim id -> its planted-null simulator.
PLANTED: dict[str, Planted] = {claim_id: _simulator(null) for claim_id, null in _PLANTED.items()}


def _paired_folds(n: int, draws: int, seed: int) -> float:
    """Two scores of the same samples on one plan of folds, both carrying the same signal, read by the paired fold
    difference (:func:`~entropy_lens.analysis.separability.nulls.baseline_planted_rate`) at the AUC margin."""
    return baseline_planted_rate(max(n, 8), draws, seed, shown=_shown("AUC"))


# Reading key -> its planted-null simulator, for the readings other than chance (whose simulator is its claim's).
# The simplest feature and the twin's separability rows share one design: the profile (the trained model's) against
# a second score (the feature's, the twin's) on identical folds, paired fold by fold.
PLANTED_READINGS: dict[str, Planted] = {FEATURE.key: _paired_folds, TWIN.key: _paired_folds}
# A reading whose simulator holds for some claims' rows only: reading key -> (those claims, why the others have
# none). The twin's Spearman, containment, shape and gap rows pair whole sources drawn together for the trained
# model and its twin; no simulator of that paired source bootstrap exists yet.
READING_SCOPE: dict[str, tuple[frozenset[str], str]] = {
    TWIN.key: (
        SEPARABILITY_CLAIMS,
        "no planted null: the twin's paired source bootstrap (Spearman, containment, shapes, gaps) has no simulator "
        "on its design",
    ),
}
# Claims whose rows carry no null of their own, and why.
NO_NULL_OF_ITS_OWN = {claim_id: null.reason for claim_id, null in _NULLS.items() if isinstance(null, NoNull)}
# Simulators that run the whole analysis per draw take fewer draws (each skip draw reruns the comparisons): their
# rows say so where 40 draws cannot bound the rate at 0.08.
MAX_DRAWS = {claim_id: null.max_draws for claim_id, null in _PLANTED.items() if null.max_draws is not None}
# ... and at most this many units; the table's ``planted_n`` says where a row's own sample size was capped (the
# rows of these claims draw on their own design where their analysis wrote draws, :data:`DRAWN`).
MAX_UNITS = {claim_id: null.max_units for claim_id, null in _PLANTED.items() if null.max_units is not None}
# Claims whose simulator reads the row itself (its bar, its styles): claim id -> row -> (simulator, its parameters).
PLANTED_AT_ROW: dict[str, Callable[[Mapping[str, Any]], tuple[Planted, tuple]]] = {
    claim_id: resolve(null.at_row) for claim_id, null in _PLANTED.items() if null.at_row
}


def nulls_table(
    table: pd.DataFrame,
    planted: Mapping[str, Planted] | None = None,
    *,
    planted_true: Mapping[str, PlantedTrue] | None = None,
    draws: Mapping[str, pd.DataFrame | None] | None = None,
    accuracy: pd.DataFrame | None = None,
    expected: Expected | None = None,
    settings: DrawSettings | None = None,
) -> pd.DataFrame:
    """One row per reading of a paper-table row that carries a null (:data:`~entropy_lens.verdicts.readings.READINGS`
    whose word is a beyond-null word), with the planted-null rate of its rule on its own design and, for a claim
    with a planted-true simulation, its planted-true rate.

    The chance reading of a row whose analysis wrote planted draws of its own design (``draws``: the kNN rows'
    permutation draws, the expansion rows' draws; :data:`DRAWN`) takes its rate from them, every draw judged
    through the row's own rule (:func:`judged_draws`); any other reading from its simulator at the row's own size
    (and bar, for :data:`PLANTED_AT_ROW`), drawn in batches until the rate's Wilson upper bound is at most
    :data:`~entropy_lens.core.draws.MAX_RATE_HIGH` (:func:`simulated_rate`).  A rate whose bound stays above it is
    listed with the bound and the reason (``planted_note``).

    Args:
        table: :func:`entropy_lens.verdicts.table.paper_table` rows.
        planted: Claim id -> simulator of its chance reading (default :data:`PLANTED`); a claim without one and
            without draws gets NaN.
        planted_true: Claim id -> its planted-true simulation (default
            :data:`~entropy_lens.verdicts.mechanical.PLANTED_TRUE`).
        draws: The analyses' planted draws by their name in :data:`DRAWN`.
        accuracy: The MMLU accuracy table the kNN rows consult (as the paper table reads it).
        expected: What the configuration asked for (as the paper table reads it).
        settings: How many simulated draws (default :class:`~entropy_lens.core.draws.DrawSettings`).
    """
    planted, settings = PLANTED if planted is None else planted, settings or DrawSettings()
    planted_true = PLANTED_TRUE if planted_true is None else planted_true
    judged = judged_draws(draws or {}, accuracy=accuracy, expected=expected or Expected())
    drawn = {key: group for key, group in judged.groupby(list(DRAW_KEY), sort=False)} if len(judged) else {}
    simulated: dict[tuple, tuple[int, int, str]] = {}
    true_rates: dict[tuple[str, int], tuple[float, int]] = {}
    out = []
    for rec in table.to_dict("records"):
        claim_id = registry.claim(str(rec["claim_id"])).id
        key = (claim_id, *(str(rec[c]) for c in DRAW_KEY[1:]))
        n = int(rec["n_sources"]) if pd.notna(rec["n_sources"]) else 0
        for reading in READINGS:
            if str(rec.get(reading.word) or "") not in decision.BEYOND_WORDS:
                continue
            if reading is CHANCE and key in drawn:
                group = drawn[key]
                n_shown, used, n_sim = int(group["shown"].sum()), len(group), n
                design, note = str(group["design"].iloc[0]), ""
            else:
                sims = planted if reading is CHANCE else PLANTED_READINGS
                name = claim_id if reading is CHANCE else reading.key
                n_shown, used, n_sim, design, note = _simulated(name, rec, n, sims, settings, simulated)
            row = _null_row(rec, reading, n_shown, used, n_sim, design, note)
            true = (
                planted_true_columns(planted_true.get(claim_id), claim_id, n, true_rates) if reading is CHANCE else {}
            )
            out.append({"claim_id": claim_id, **row, **true})
    frame = pd.DataFrame(out, columns=list(NULLS_COLUMNS))
    loud = frame[frame["planted_low"] > MAX_PLANTED_RATE]
    for rec in loud.to_dict("records"):
        log.warning(
            "%s (%s, %s): planted-null rate %.2f above %.2f",
            rec["claim"],
            rec["model"],
            rec["reading"],
            rec["planted_null_rate"],
            MAX_PLANTED_RATE,
        )
    return frame


def _reading_columns(rec: Mapping[str, object], reading: ReadingColumns) -> dict[str, object]:
    """One reading's observed value, null and excess under the nulls table's names (those of the chance reading)."""
    observed = rec.get(reading.observed)
    sources = (reading.name, reading.estimate, reading.low, reading.high, *reading.numbers[4:], reading.word)
    values = {target: rec.get(source) for target, source in zip(ROW_NULL_COLUMNS, sources, strict=True)}
    return {"observed": observed if observed is not None and pd.notna(observed) else rec["estimate"], **values}


def _null_row(
    rec: Mapping[str, Any], reading: ReadingColumns, n_shown: int, used: int, n_sim: int, design: str, note: str
) -> dict[str, Any]:
    """One reading's row of the nulls table: its null, and its planted rate with its Wilson interval."""
    low, high = wilson_interval(n_shown, used) if used else (np.nan, np.nan)
    if used and high > MAX_RATE_HIGH and not note:
        note = f"shown in {n_shown} of {used} planted draws: the rule shows this null beyond itself"
    if used and high > MAX_RATE_HIGH:
        note = f"Wilson upper bound {high:.3f} above {MAX_RATE_HIGH} after {used} draws: {note}"
    return {
        **{c: rec[c] for c in ("claim", "role", "model", "split", "measure", "unit", "n_sources")},
        "reading": reading.key,
        **_reading_columns(rec, reading),
        "planted_null_rate": n_shown / used if used else np.nan,
        "planted_low": low,
        "planted_high": high,
        "planted_draws": used,
        "planted_n": n_sim if used else 0,
        "planted_design": design,
        "planted_note": note,
    }


def _simulated(
    name: str,
    rec: Mapping[str, Any],
    n: int,
    sims: Mapping[str, Planted],
    settings: DrawSettings,
    cache: dict[tuple, tuple[int, int, str]],
) -> tuple[int, int, int, str, str]:
    """``(shown, draws, units, design, note)`` of simulator ``name`` of ``sims`` at the row's own size (capped by
    :data:`MAX_UNITS`), cached by its parameters; no draws where it has no simulator."""
    found = _simulator_of(name, rec, sims)
    if isinstance(found, str):
        return 0, 0, 0, "", found
    simulator, params = found
    n_sim = min(n, MAX_UNITS.get(name, n))
    # A reading's simulator is keyed by itself: readings that share a design share its draws.
    key = (simulator if sims is PLANTED_READINGS else name, n_sim, params, sims is PLANTED_READINGS)
    if key not in cache:
        cache[key] = simulated_rate(simulator, n_sim, settings, cap=MAX_DRAWS.get(name))
    n_shown, used, note = cache[key]
    return n_shown, used, n_sim, f"simulated at the row's {n_sim} units" + (f" (of {n})" if n_sim < n else ""), note


def _simulator_of(name: str, rec: Mapping[str, Any], planted: Mapping[str, Planted]) -> tuple[Planted, tuple] | str:
    """The simulator of ``name`` (a claim id, or a reading's key) for this row, and the row's parameters it reads
    (its bar, its styles); else why it has none (``"no planted null"``, or the reading's reason where its simulator
    is not on this claim's design, :data:`READING_SCOPE`)."""
    if planted is not PLANTED_READINGS and name in PLANTED_AT_ROW:
        return PLANTED_AT_ROW[name](rec)
    if planted is PLANTED_READINGS and name in READING_SCOPE:
        claims, reason = READING_SCOPE[name]
        if registry.claim(str(rec["claim_id"])).id not in claims:
            return reason
    return (planted[name], ()) if name in planted else "no planted null"


def simulated_rate(
    simulator: Planted, n: int, settings: DrawSettings, *, cap: int | None = None
) -> tuple[int, int, str]:
    """``(shown, draws, note)`` of a simulator at ``n`` units, in batches of ``settings.min_draws`` (each its own
    seed) until the rate's Wilson upper bound is at most ``settings.max_rate_high``, at most ``settings.max_draws``
    draws (or ``cap``, where each draw reruns a whole analysis; the note says so)."""
    limit = min(settings.max_draws, cap) if cap else settings.max_draws
    n_shown = used = batch = 0
    while used < limit:
        size = min(settings.min_draws, limit - used)
        n_shown += round(simulator(n, size, settings.seed + batch) * size)
        used, batch = used + size, batch + 1
        if wilson_high(n_shown, used) <= settings.max_rate_high:
            break
    capped = cap is not None and used >= cap and wilson_high(n_shown, used) > settings.max_rate_high
    return n_shown, used, f"capped at {cap} draws: each draw reruns the whole comparison" if capped else ""


# The planted draws an analysis job writes for its rows (docs/verdicts.md, "Planted nulls on the row's own design"):
# draws table -> the paper-table inputs whose rows they are, and how a draw becomes a row of that input's table.
DRAW_KEY = ("claim_id", "model", "split", "measure")


def _knn_table(draws: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {"knn": draws}


def _expansion_tables(draws: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The expansion draws as the Spearman and overlap tables the paper table reads (estimate: the draw's
    observed, with no interval of its own; n: the null's cells)."""
    frame = draws.assign(n=draws["null_n"], ci_low=np.nan, ci_high=np.nan)
    spearman = frame[frame["statistic"] == SPEARMAN].assign(spearman=lambda f: f["observed"])
    overlap = frame[frame["statistic"] != SPEARMAN].assign(mean=lambda f: f["observed"])
    return {"expansion": spearman, "overlap": overlap}


DRAWN: dict[str, Callable[[pd.DataFrame], dict[str, pd.DataFrame]]] = {
    "knn": _knn_table,
    "expansion": _expansion_tables,
}


def judged_draws(
    draws: Mapping[str, pd.DataFrame | None], *, accuracy: pd.DataFrame | None, expected: Expected
) -> pd.DataFrame:
    """Every planted draw judged through its row's own rule: each draws table becomes the analysis table it
    stands in for (:data:`DRAWN`), and that input's row builder (the one the paper table runs) reads it.

    Returns:
        :data:`DRAW_KEY`, ``design``, ``draw``, ``word`` (the draw's beyond-null word) and ``shown`` (a word of
        :data:`~entropy_lens.verdicts.planted_nulls.SHOWN_WORDS`), one row per draw.
    """
    out = []
    for name, frame in draws.items():
        if frame is None or frame.empty:
            continue
        if name not in DRAWN:
            raise ValueError(f"unknown planted draws {name!r}; expected some of {list(DRAWN)}")
        for input_name, stand_in in DRAWN[name](frame).items():
            if stand_in.empty:
                continue
            frames = dict.fromkeys(INPUTS) | {input_name: standard_frame(input_name, stand_in)}
            frames["accuracy"] = standard_frame("accuracy", accuracy)
            rows = INPUTS[input_name].rows(Built(frames, [], expected))
            if len(rows) != len(stand_in):
                raise ValueError(f"{input_name} draws gave {len(rows)} rows for {len(stand_in)} draws")
            designs = stand_in["permutation"] if "permutation" in stand_in else stand_in["design"]
            for row, design, draw in zip(rows, designs, stand_in["draw"], strict=True):
                word = str(row["beyond_verdict"])
                keys = {c: str(row[c]) for c in DRAW_KEY}
                out.append({**keys, "design": _design(name, design), "draw": int(draw), "word": word})
    frame = pd.DataFrame(out, columns=[*DRAW_KEY, "design", "draw", "word"])
    return frame.assign(shown=frame["word"].isin(SHOWN_WORDS))


def _design(name: str, design: str) -> str:
    if name == "knn":
        return f"permutation of the row's labels {design}, on its own folds"
    return design
