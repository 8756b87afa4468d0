"""Which drop set keeps the most? Each criterion's ``k``-block drop set against random ``k``-sets, paired per question.

Pure NumPy/pandas over the evaluation job's drop-set score rows
(:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`: the intact model, every chosen set and, per
``k`` and variant, one random ``k``-set of the variant's eligible blocks drawn for each question, on the same
questions) and the :func:`~entropy_lens.skipping.pruning.drop_sets` table saying which criterion chose which
blocks.  Per model, measure (raw ``ll`` or ``calibrated`` letters), statistic (the gold letter's
log-probability among the four letters, the primary one; accuracy beside it), variant, ``k`` and criterion:

* ``change``: the chosen set's score minus the intact model's, paired over questions (negative: lost);
* the null (:data:`~entropy_lens.core.frames.NULL_CONTRACT` columns): the random draws' change against
  the intact model, paired over questions; ``beyond`` = the chosen set minus the random set drawn for
  each question, paired over questions (:func:`beyond_random`).  Resampling the questions resamples the
  random sets with them, so the interval covers both the questions' noise and the spread among random
  sets, and narrows as questions are added: it estimates what the chosen set keeps beyond the mean random
  ``k``-set of this model.  The reading is about this set on this model, not about the criterion in
  general (a random set that happens to keep more than the mean is, for this model, a set that keeps more);
  a set whose expected score equals the random sets' mean is shown beyond them in at most about 2.5% of
  draws (:func:`drop_set_planted_rate`);
* ``margin_*``: the chosen set minus the best other criterion's set, paired over questions; a criterion
  is named ``best`` only where that interval lies above 0.

Readings, fixed before any result was read: ``better than random`` when ``beyond_low > 0``, ``worse than
random`` when ``beyond_high < 0``, ``no difference`` when the interval lies inside +- the skip
comparisons' margins (5 accuracy points, 0.10 nats), else ``undecided`` (and for an interval of zero width).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, paired_bootstrap
from entropy_lens.core.planted import Excess, Shown, planted_rate
from entropy_lens.skipping.conditions import DROP, INTACT, RANDOM, layer_text, random_name
from entropy_lens.skipping.criteria import ACCURACY, COSTS, GOLD_LOGPROB

BETTER, WORSE, SAME, UNDECIDED = "better than random", "worse than random", "no difference", "undecided"
# The skip comparisons' margins (entropy_lens.verdicts.outcomes): accuracy 0-1, nats.
MARGINS = {ACCURACY: 0.05, GOLD_LOGPROB: 0.10}
RANDOM_SETS_NULL = "random k-sets of the eligible blocks (one drawn per question, paired)"
SCORE_COLUMNS = (
    "model",
    "measure",
    "statistic",
    "variant",
    "share",
    "k",
    "criterion",
    "layers",
    "n",
    "n_sets",
    "intact",
    "value",
    "change",
    "ci_low",
    "ci_high",
    "margin",
    "margin_low",
    "margin_high",
    "best",
    "reading",
    *NULL_CONTRACT,
)
# The table as a standard frame (entropy_lens.core.frames): the chosen set's change against the intact model.
DROP_SCORE_READING = Reading("change")


def beyond_random(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """``(mean(a - b), low, high)``: the chosen set ``a`` ``[N]`` against the random set drawn for each question
    ``b`` ``[N]``, paired over questions (percentile bootstrap)."""
    return paired_bootstrap(a, b, n_boot=n_boot, seed=seed, level=level)


def drop_reading(beyond_low: float, beyond_high: float, margin: float) -> str:
    """:data:`BETTER` above 0, :data:`WORSE` below, :data:`SAME` inside +- ``margin``, else :data:`UNDECIDED`;
    an interval of zero width (every replicate alike) or none decides nothing: :data:`UNDECIDED`."""
    if not (np.isfinite(beyond_low) and np.isfinite(beyond_high)) or beyond_high - beyond_low <= 0:
        return UNDECIDED
    if beyond_low > 0:
        return BETTER
    if beyond_high < 0:
        return WORSE
    return SAME if -margin < beyond_low and beyond_high < margin else UNDECIDED


def _wide(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """``question x condition`` of ``value``, only questions every condition scored."""
    return rows.pivot_table(index="question", columns="condition", values=value, aggfunc="first").dropna()


def _parse(text: str) -> list[int]:
    return [int(v) for v in str(text).split(",") if v != ""]


def drop_scores(
    correct: pd.DataFrame,
    drops: pd.DataFrame,
    n_layers: int,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Per measure, statistic, variant, ``k`` and criterion: the chosen set against intact and random sets.

    Args:
        correct: The drop-set score rows of one model (intact, ``drop`` and the per-question ``random`` draws).
        drops: Its :func:`~entropy_lens.skipping.pruning.drop_sets` rows.
        n_layers: The model's blocks.
        n_boot, seed, level: The bootstraps.

    Returns:
        :data:`SCORE_COLUMNS`; empty when ``drops`` or ``correct`` is (no drop set asked for or scored).

    Raises:
        ValueError: when a chosen set or the intact model was not scored.
    """
    del n_layers  # each variant's random draws are its own condition (random_name)
    boot = {"n_boot": n_boot, "seed": seed}
    rows: list[dict] = []
    if drops.empty or correct.empty:
        return pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    for measure, by_measure in correct.groupby("measure", sort=False):
        for statistic in COSTS:
            wide = _wide(by_measure, "correct" if statistic == ACCURACY else GOLD_LOGPROB)
            named = by_measure.drop_duplicates("condition")
            chosen = dict(
                zip(
                    named.loc[named["kind"] == DROP, "layers"],
                    named.loc[named["kind"] == DROP, "condition"],
                    strict=True,
                )
            )
            intact = named.loc[named["kind"] == INTACT, "condition"]
            if intact.empty:
                raise ValueError("the drop-set scores lack the intact model; score it beside the sets")
            for (variant, k), group in drops.groupby(["variant", "k"], sort=False):
                name = random_name(int(k), str(variant))
                random = by_measure[(by_measure["condition"] == name) & (by_measure["kind"] == RANDOM)]
                keys = {"model": group["model"].iloc[0], "measure": measure, "statistic": statistic, "variant": variant}
                rows += _group_rows(
                    wide,
                    intact=intact.iloc[0],
                    random=(name, int(random["layers"].nunique())) if len(random) else ("", 0),
                    group=group,
                    chosen=chosen,
                    keys=keys,
                    boot=boot,
                    level=level,
                )
    return pd.DataFrame(rows, columns=list(SCORE_COLUMNS))


def _group_rows(
    wide: pd.DataFrame,
    *,
    intact: str,
    random: tuple[str, int],
    group: pd.DataFrame,
    chosen: dict[str, str],
    keys: dict[str, str],
    boot: dict[str, int],
    level: float,
) -> list[dict]:
    """The rows of one variant and ``k``: each criterion's set against the intact model and the random draws.

    ``wide`` holds the statistic per question (rows) and condition (columns); ``random`` names the random draws'
    condition and how many distinct sets they hold (``("", 0)``: none scored); ``chosen`` maps a drop set's
    layers to its condition; ``keys`` names the model, measure, statistic and variant of every row."""
    statistic = keys["statistic"]
    missing = [t for t in group["layers"] if t not in chosen]
    if missing:
        raise ValueError(f"drop sets {missing} were not scored; rerun layer_skip_eval with the same drop settings")
    base = wide[intact].to_numpy(float)
    drawn = wide[random[0]].to_numpy(float) if random[0] in wide else None
    values = {c: wide[chosen[t]].to_numpy(float) for c, t in zip(group["criterion"], group["layers"], strict=True)}
    margin = _margins(values, dict(zip(group["criterion"], group["layers"], strict=True)), boot, level)
    null = _random_null(base, drawn, boot, level)
    out = []
    for criterion, layers, share in zip(group["criterion"], group["layers"], group["share"], strict=True):
        a = values[criterion]
        change = paired_bootstrap(a, base, **boot, level=level)
        beyond = beyond_random(a, drawn, **boot, level=level) if drawn is not None else (np.nan,) * 3
        out.append(
            keys
            | {
                "share": float(share),
                "k": int(group["k"].iloc[0]),
                "criterion": criterion,
                "layers": layer_text(_parse(layers)),
                "n": a.size,
                "n_sets": random[1],
                "intact": float(base.mean()),
                "value": float(a.mean()),
                "change": change[0],
                "ci_low": change[1],
                "ci_high": change[2],
                "margin": margin[criterion][0],
                "margin_low": margin[criterion][1],
                "margin_high": margin[criterion][2],
                "best": bool(margin[criterion][1] > 0),
                "reading": drop_reading(beyond[1], beyond[2], MARGINS[statistic]),
                **null,
                "beyond": beyond[0],
                "beyond_low": beyond[1],
                "beyond_high": beyond[2],
            }
        )
    return out


def _random_null(base: np.ndarray, drawn: np.ndarray | None, boot: dict, level: float) -> dict:
    """The random draws' change against intact, paired over questions (NaN without draws)."""
    if drawn is None:
        return {"null_name": RANDOM_SETS_NULL, "null_estimate": np.nan, "null_low": np.nan, "null_high": np.nan}
    change = paired_bootstrap(drawn, base, **boot, level=level)
    return {"null_name": RANDOM_SETS_NULL, "null_estimate": change[0], "null_low": change[1], "null_high": change[2]}


def _margins(
    values: dict[str, np.ndarray], layers: dict[str, str], boot: dict, level: float
) -> dict[str, tuple[float, float, float]]:
    """Per criterion, its set minus the best other criterion's with the paired interval (NaN alone).

    Criteria that chose the same blocks are one set: the best *other* is the best of the other sets.
    """
    out: dict[str, tuple[float, float, float]] = {}
    for name, own in values.items():
        others = {o: v for o, v in values.items() if layers[o] != layers[name]}
        if not others:
            out[name] = (np.nan, np.nan, np.nan)
            continue
        rival = max(others, key=lambda o: others[o].mean())
        out[name] = paired_bootstrap(own, others[rival], **boot, level=level)
    return out


def drop_set_planted_rate(
    n_questions: int, draws: int = 100, seed: int = 0, *, shown: Shown, n_sets: int = 200, n_boot: int = 400
) -> float:
    """Share of ``draws`` in which a set whose expected score equals the random sets' mean is shown beyond them.

    Each draw simulates 0/1 answers of ``n_questions`` questions under the intact model (70% right) and a
    population of ``n_sets`` random sets, each losing its own share of the answers (uniform 0-40 points: sets
    differ, as random block sets do); each question is scored under one random set drawn for it and under the
    chosen set, which loses the population's mean share (20 points); the excess is read by
    :func:`beyond_random` (the table's ``beyond`` columns) and decided by ``shown`` (the verdicts' decision, as
    the row's: :data:`BETTER` where it lies above 0).
    """

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        know = rng.random(n_questions) < 0.7
        lost = rng.uniform(0.0, 0.4, size=n_sets)  # [S] each set's lost share
        drawn = lost[rng.integers(0, n_sets, size=n_questions)]  # [N] the set drawn for each question
        random = (know & (rng.random(n_questions) >= drawn)).astype(float)
        chosen = (know & (rng.random(n_questions) >= lost.mean())).astype(float)
        return beyond_random(chosen, random, n_boot=n_boot, seed=draw)

    return planted_rate(simulate, shown, draws=draws, seed=seed)
