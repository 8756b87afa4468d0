"""The comparisons the study makes: skipping the expansion block(s), the pruning block(s) and random blocks.

:func:`skip_comparisons`: per measure, statistic, variant, ``k`` and lens, expansion vs random, pruning vs
random and expansion vs pruning, as the paired difference of the first minus the second over questions
(negative: the first skip costs more).  The random baseline is the paired design's: on each question one
random set of ``k`` eligible blocks drawn for that question (:func:`~entropy_lens.skipping.conditions.random_draws`),
so resampling the questions resamples the random sets with them, and the difference estimates the selected
skip's cost against the mean over every eligible set.  The blocks are chosen through each lens that read
Delta H (the logit lens; a fitted linear lens where one is fitted); where two lenses chose the same blocks for
a comparison the row is one, its ``lens`` naming both.  Each claim's comparisons of one statistic are
corrected together (Holm) beside their random-block null (:mod:`entropy_lens.skipping.corrections`).
"""

from __future__ import annotations

import pandas as pd

from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, paired_bootstrap, wilson_interval
from entropy_lens.core.multiplicity import bootstrap_p_value, bootstrap_se, paired_draws
from entropy_lens.skipping.conditions import (
    EXPANSION,
    PRUNING,
    RANDOM,
    Selection,
    layer_text,
    random_name,
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
# Where two lenses chose the same blocks, the row's lens names both, joined by this.
LENS_JOIN = ", "
COMPARISON_COLUMNS = (
    "model",
    "measure",
    "statistic",
    "variant",
    "k",
    "lens",
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


def skip_comparisons(
    correct: pd.DataFrame, plan: SkipPlan, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """Expansion vs random, pruning vs random and expansion vs pruning, per measure, statistic, variant, ``k``
    and lens (lenses that chose alike share a row).

    Args:
        correct: Score rows of one model (the paired design's conditions among them).
        plan: The model's skip plan (its selections per lens, variant and ``k``).
        n_boot, seed, level: The paired bootstraps.

    Returns:
        :data:`COMPARISON_COLUMNS`; ``difference`` = first minus second (accuracy 0-1, or the gold letter's
        log-probability in nats), negative when skipping the first costs more; ``intact`` and ``skipped`` (the
        first condition) are accuracies with Wilson intervals on the same questions, for the precondition and
        the collapse rule; ``n_sets``: the distinct random sets drawn on those questions (1 against pruning).
    """
    rows: list[dict] = []
    boot = {"n_boot": n_boot, "seed": seed}
    for measure, by_measure in correct.groupby("measure", sort=False):
        wides = {v: by_question(by_measure, v) for v in ("correct", GOLD_LOGPROB)}
        names, drawn = by_layers(by_measure), _drawn(by_measure)
        for statistic in STATISTICS:
            wide = wides["correct" if statistic == ACCURACY else GOLD_LOGPROB]
            for (variant, k), chosen in _by_split(plan.selections).items():
                for first, second in COMPARISONS:
                    for pair, lenses in _pairs(chosen, first, second).items():
                        keys = {"model": plan.model, "measure": str(measure), "statistic": statistic}
                        keys |= {"variant": variant, "k": k, "lens": LENS_JOIN.join(lenses)}
                        keys |= {"first": first, "second": second}
                        rows += _row(wide, wides["correct"], names, drawn, pair, keys, boot, level)
    return with_holm(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))[list(COMPARISON_COLUMNS)]


def _by_split(chosen: tuple[Selection, ...]) -> dict[tuple[str, int], list[Selection]]:
    """The selections of each (variant, k), the logit lens's first."""
    out: dict[tuple[str, int], list[Selection]] = {}
    for selection in chosen:
        out.setdefault((selection.variant, selection.k), []).append(selection)
    return out


def _pairs(chosen: list[Selection], first: str, second: str) -> dict[tuple[str, str], list[str]]:
    """``{(first blocks, second blocks or ''): the lenses that chose them}`` (``''``: the random draws)."""
    out: dict[tuple[str, str], list[str]] = {}
    for selection in chosen:
        other = "" if second == RANDOM else layer_text(selection.layers(second))
        out.setdefault((layer_text(selection.layers(first)), other), []).append(selection.lens)
    return out


def _drawn(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """Per random condition, the blocks drawn on each question."""
    random = rows[rows["kind"] == RANDOM].drop_duplicates(["condition", "question"])
    return {name: group.set_index("question")["layers"] for name, group in random.groupby("condition")}


def _row(
    wide: pd.DataFrame,
    hits: pd.DataFrame,
    names: dict[str, str],
    drawn: dict[str, pd.Series],
    pair: tuple[str, str],
    keys: dict,
    boot: dict[str, int],
    level: float,
) -> list[dict]:
    """One comparison row (none where a condition was not scored): ``wide`` holds the statistic and ``hits`` the
    correctness per question (rows) and condition (columns); ``pair`` the first and second blocks."""
    against_random = keys["second"] == RANDOM
    columns = [names.get(""), names.get(pair[0])]
    columns.append(random_name(keys["k"], keys["variant"]) if against_random else names.get(pair[1]))
    if any(c is None or c not in wide for c in columns):
        return []
    both = wide[columns].dropna().index
    if len(both) == 0:
        return []
    intact, a, b = (wide.loc[both, c].to_numpy(float) for c in columns)
    diff = paired_bootstrap(a, b, **boot, level=level)
    se = bootstrap_se(paired_draws(a, b, **boot), a.size)
    n_sets = drawn[columns[2]].reindex(both).nunique() if against_random and columns[2] in drawn else 1
    return [
        keys
        | {
            "first_layers": pair[0],
            "second_layers": f"one random set of {keys['k']} per question" if against_random else pair[1],
            "n": a.size,
            "n_sets": int(n_sets),
            "first_value": float(a.mean()),
            "second_value": float(b.mean()),
            "difference": diff[0],
            "ci_low": diff[1],
            "ci_high": diff[2],
            **_accuracies(hits.loc[both, columns[0]], "intact", level),
            **_accuracies(hits.loc[both, columns[1]], "skipped", level),
            "chance": 1.0 / N_CHOICES,
            "se": se,
            "df": max(1, a.size - 1),
            "p_value": bootstrap_p_value(diff[0], se, max(1, a.size - 1)),
            **(random_null(intact, b, boot, level) if against_random else {}),
        }
    ]


def _accuracies(hits: pd.Series, name: str, level: float) -> dict[str, float]:
    values = hits.to_numpy(int)
    low, high = wilson_interval(int(values.sum()), values.size, level)
    return {name: float(values.mean()), f"{name}_low": low, f"{name}_high": high}
