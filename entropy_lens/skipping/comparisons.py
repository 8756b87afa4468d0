"""The comparisons the study makes: skipping the expansion block(s), the pruning block(s) and random blocks.

:func:`skip_comparisons`: per variant and ``k``, expansion vs random, pruning vs random and expansion vs pruning,
as the paired difference of the first minus the second (negative: the first skip costs more).  At ``k = 1`` the
random baseline is the mean over every eligible block of the sweep (a census); at ``k >= 2`` it is the population
of random sets, and the interval resamples both questions and sets.  Each claim's comparisons are corrected
together (Holm) beside their random-block null (:mod:`entropy_lens.skipping.corrections`).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    paired_bootstrap,
    paired_bootstrap_sets,
    wilson_interval,
)
from entropy_lens.core.multiplicity import bootstrap_p_value, bootstrap_se, paired_draws, paired_set_draws
from entropy_lens.skipping.conditions import (
    EXPANSION,
    INTACT,
    PRUNING,
    RANDOM,
    SINGLE,
    Selection,
    eligible_layers,
    in_variant,
    layer_text,
)
from entropy_lens.skipping.corrections import random_null, with_holm
from entropy_lens.skipping.criticality import (
    ACCURACY,
    GOLD_LOGPROB,
    N_CHOICES,
    STATISTICS,
    by_layers,
    by_question,
)
from entropy_lens.skipping.plan import SkipPlan

COMPARISONS = ((EXPANSION, RANDOM), (PRUNING, RANDOM), (EXPANSION, PRUNING))
COMPARISON_COLUMNS = (
    "model",
    "measure",
    "statistic",
    "variant",
    "k",
    "first",
    "second",
    "first_layers",
    "second_layers",
    "n",
    "n_sets",
    "first_value",
    "second_value",
    "difference",
    "ci_low",
    "ci_high",
    "intact",
    "intact_low",
    "intact_high",
    "skipped",
    "skipped_low",
    "skipped_high",
    "chance",
    "se",
    "df",
    "p_value",
    "n_family",
    "p_holm",
    "holm_level",
    "holm_low",
    "holm_high",
    *NULL_CONTRACT,
)
# The comparison table as a standard frame (entropy_lens.core.frames): first minus second.
COMPARISON_READING = Reading("difference")


def _random_columns(rows: pd.DataFrame, plan: SkipPlan, k: int, variant: str) -> list[str]:
    """The conditions holding the random baseline of ``variant`` at ``k``: every eligible block alone at
    ``k = 1``, every drawn set within the variant's pool at ``k >= 2`` (a set drawn twice counts twice)."""
    if k == 1:
        names = by_layers(rows)
        return [names[t] for t in (layer_text([v]) for v in eligible_layers(plan.n_layers, variant)) if t in names]
    drawn = rows[(rows["kind"] == RANDOM) & (rows["k"] == k)].drop_duplicates("condition")
    keep = [in_variant(_parse(t), plan.n_layers, variant) for t in drawn["layers"]]
    return drawn.loc[keep, "condition"].tolist()


def _parse(text: str) -> Iterable[int]:
    return [int(v) for v in str(text).split(",") if v != ""]


def _scope(correct: pd.DataFrame, k: int) -> pd.DataFrame:
    """The rows a ``k`` is read from: the sweep for ``k = 1``, the sets for ``k >= 2`` (intact from the sweep)."""
    if k == 1:
        return correct[correct["kind"].isin([INTACT, SINGLE])]
    sets = correct[(correct["k"] == k) & correct["kind"].isin([EXPANSION, PRUNING, RANDOM])]
    intact = correct[(correct["kind"] == INTACT) & correct["question"].isin(sets["question"].unique())]
    return pd.concat([intact, sets], ignore_index=True)


def skip_comparisons(
    correct: pd.DataFrame, plan: SkipPlan, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """Expansion vs random, pruning vs random and expansion vs pruning, per measure, statistic, variant and ``k``.

    Returns:
        :data:`COMPARISON_COLUMNS`; ``difference`` = first minus second (accuracy 0-1, or the
        gold letter's log-probability in nats), negative when skipping the first costs more;
        ``intact`` and ``skipped`` (the first condition) are accuracies with Wilson intervals
        on the same questions, for the precondition and the collapse rule.
    """
    rows: list[dict] = []
    tables: dict[int, list[tuple[str, pd.DataFrame, dict[str, pd.DataFrame]]]] = {}
    for selection in plan.selections:
        if selection.k not in tables:  # the variants of one k read the same score tables
            tables[selection.k] = [
                (str(measure), by_measure, {v: by_question(by_measure, v).dropna() for v in ("correct", GOLD_LOGPROB)})
                for measure, by_measure in _scope(correct, selection.k).groupby("measure", sort=False)
            ]
        for measure, by_measure, wides in tables[selection.k]:
            for statistic in STATISTICS:
                wide = wides["correct" if statistic == ACCURACY else GOLD_LOGPROB]
                rows += _comparison_rows(
                    wide,
                    hits=wides["correct"],
                    rows=by_measure,
                    selection=selection,
                    plan=plan,
                    keys=(measure, statistic),
                    boot={"n_boot": n_boot, "seed": seed},
                    level=level,
                )
    return with_holm(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))[list(COMPARISON_COLUMNS)]


def _comparison_rows(
    wide: pd.DataFrame,
    *,
    hits: pd.DataFrame,
    rows: pd.DataFrame,
    selection: Selection,
    plan: SkipPlan,
    keys: tuple[str, str],
    boot: dict[str, int],
    level: float,
) -> list[dict]:
    """The comparisons of one selection under one (measure, statistic): ``wide`` holds the statistic per
    question (rows) and condition (columns), ``hits`` the correctness the Wilson intervals read."""
    measure, statistic = keys
    names = by_layers(rows)
    picked = [names.get(layer_text(selection.layers(kind))) for kind in (EXPANSION, PRUNING)]
    columns = {
        EXPANSION: picked[:1],
        PRUNING: picked[1:],
        RANDOM: _random_columns(rows, plan, selection.k, selection.variant),
    }
    if any(not c or any(x not in wide for x in c) for c in columns.values()) or names.get("") not in wide:
        return []
    out, known = [], {}

    def accuracies(column: str, name: str) -> dict[str, float]:
        if (column, name) not in known:  # Wilson intervals are slow; each is shared by two comparisons
            known[column, name] = _accuracies(hits, column, name, level)
        return known[column, name]

    for first, second in COMPARISONS:
        a = wide[columns[first][0]].to_numpy(float)
        b = wide[columns[second]].to_numpy(float)
        # The units behind the mean minus one: the questions, or the random sets where they are fewer.
        df = max(1, min(a.size, b.shape[1] if second == RANDOM and selection.k >= 2 else a.size) - 1)
        if second == RANDOM and selection.k >= 2:
            diff = paired_bootstrap_sets(a, b, **boot, level=level)
            se = bootstrap_se(paired_set_draws(a, b, **boot), df + 1)
        else:
            diff = paired_bootstrap(a, b.mean(axis=1), **boot, level=level)
            se = bootstrap_se(paired_draws(a, b.mean(axis=1), **boot), df + 1)
        null = random_null(wide[names[""]].to_numpy(float), b, selection.k, boot, level) if second == RANDOM else {}
        out.append(
            {
                "model": plan.model,
                "measure": measure,
                "statistic": statistic,
                "variant": selection.variant,
                "k": selection.k,
                "first": first,
                "second": second,
                "first_layers": layer_text(selection.layers(first)),
                "second_layers": _describe(selection, second, len(columns[second])),
                "n": a.size,
                "n_sets": len(columns[second]),
                "first_value": float(a.mean()),
                "second_value": float(b.mean()),
                "difference": diff[0],
                "ci_low": diff[1],
                "ci_high": diff[2],
                **accuracies(names[""], "intact"),
                **accuracies(columns[first][0], "skipped"),
                "chance": 1.0 / N_CHOICES,
                "se": se,
                "df": df,
                "p_value": bootstrap_p_value(diff[0], se, df),
                **null,
            }
        )
    return out


def _describe(selection: Selection, kind: str, n_sets: int) -> str:
    if kind != RANDOM:
        return layer_text(selection.layers(kind))
    return f"mean of {n_sets} eligible blocks" if selection.k == 1 else f"mean of {n_sets} random sets"


def _accuracies(hits: pd.DataFrame, column: str, name: str, level: float) -> dict[str, float]:
    values = hits[column].to_numpy(int)
    low, high = wilson_interval(int(values.sum()), values.size, level)
    return {name: float(values.mean()), f"{name}_low": low, f"{name}_high": high}
