"""Which drop set keeps the most? Each criterion's ``k``-block drop set scored against random ``k``-sets.

Pure NumPy/pandas over the evaluation job's drop-set score rows
(:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`: the intact model, every chosen set, the random
population of each ``k``, on the same questions) and the :func:`~entropy_lens.skipping.pruning.drop_sets`
table saying which criterion chose which blocks.  Per model, measure (raw ``ll`` or ``calibrated``
letters), statistic (accuracy, or the gold letter's log-probability among the four letters), variant,
``k`` and criterion:

* ``change``: the chosen set's score minus the intact model's, paired over questions (negative: lost);
* the null (:data:`~entropy_lens.core.frames.NULL_CONTRACT` columns): the random sets' mean change,
  its interval resampling questions and sets; ``beyond`` = the chosen set minus the random mean, its
  interval resampling questions and drawing **one** random set per replicate (:func:`one_set_draws`).
  A chosen set is one set, not a mean of many, so it is held against what one random choice keeps:
  ``beyond_low > 0`` needs the set to beat about the best of the random sets, beyond the questions'
  noise, and a random set relabelled as a criterion's passes in at most about 1 / (sets + 1) of draws
  (:func:`drop_set_planted_rate`);
* the random sets' distribution (min, quartiles, max of their mean change) and the share of them the
  chosen set keeps more than;
* ``margin_*``: the chosen set minus the best other criterion's set, paired over questions; a criterion
  is named ``best`` only where that interval lies above 0.

Readings, fixed before any result was read: ``better than random`` when ``beyond_low > 0``, ``worse than
random`` when ``beyond_high < 0``, ``no difference`` when the interval lies inside +- the skip
comparisons' margins (5 accuracy points, 0.10 nats), else ``undecided`` (and for an interval of zero width).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    paired_bootstrap,
    paired_bootstrap_sets,
    percentile_interval,
)
from entropy_lens.core.multiplicity import unit_set_pair
from entropy_lens.core.planted import Excess, Shown, planted_rate
from entropy_lens.skipping.conditions import DROP, INTACT, RANDOM, in_variant, layer_text
from entropy_lens.skipping.criteria import ACCURACY, COSTS, GOLD_LOGPROB

BETTER, WORSE, SAME, UNDECIDED = "better than random", "worse than random", "no difference", "undecided"
# The skip comparisons' margins (entropy_lens.verdicts.outcomes): accuracy 0-1, nats.
MARGINS = {ACCURACY: 0.05, GOLD_LOGPROB: 0.10}
RANDOM_SETS_NULL = "random k-sets of the eligible blocks (one set per replicate against the chosen one)"
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
    "random_min",
    "random_q25",
    "random_median",
    "random_q75",
    "random_max",
    "beats",
    "margin_low",
    "margin_high",
    "best",
    "reading",
    *NULL_CONTRACT,
)
# The table as a standard frame (entropy_lens.core.frames): the chosen set's change against the intact model.
DROP_SCORE_READING = Reading("change")


def one_set_draws(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot]`` replicates of ``a`` minus one random set of ``b``: questions resampled (paired), one set drawn.

    Args:
        a: ``[N]`` per-question scores of the chosen set.
        b: ``[N, S]`` per-question scores of each random set.
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
    """
    a, b = unit_set_pair(a, b)
    n_boot = check_positive_int(n_boot, "n_boot")
    rng = np.random.default_rng(seed)
    units = rng.multinomial(a.size, np.full(a.size, 1 / a.size), n_boot) / a.size  # [R, N] weights
    sets = rng.integers(0, b.shape[1], size=n_boot)  # one random set per replicate
    return units @ a - np.einsum("rn,nr->r", units, b[:, sets])


def beyond_random(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """``(mean(a) - mean(b), low, high)``: the chosen set against the random sets (:func:`one_set_draws`)."""
    low, high = percentile_interval(one_set_draws(a, b, n_boot=n_boot, seed=seed), level)
    return float(np.mean(a) - np.mean(b)), float(low), float(high)


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


def _parse(text: str) -> list[int]:
    return [int(v) for v in str(text).split(",") if v != ""]


def _wide(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """``question x condition`` of ``value``, only questions every condition scored."""
    return rows.pivot_table(index="question", columns="condition", values=value, aggfunc="first").dropna()


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
        correct: The drop-set score rows of one model (intact, ``drop`` and ``random`` conditions).
        drops: Its :func:`~entropy_lens.skipping.pruning.drop_sets` rows.
        n_layers: The model's blocks (the random sets of a variant are those within its pool).
        n_boot, seed, level: The bootstraps.

    Returns:
        :data:`SCORE_COLUMNS`; empty when ``drops`` or ``correct`` is (no drop set asked for or scored).

    Raises:
        ValueError: when a chosen set or the intact model was not scored.
    """
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
                drawn = named[(named["kind"] == RANDOM) & (named["k"] == k)]
                pool = [
                    c
                    for c, t in zip(drawn["condition"], drawn["layers"], strict=True)
                    if in_variant(_parse(t), n_layers, variant)
                ]
                keys = {"model": group["model"].iloc[0], "measure": measure, "statistic": statistic, "variant": variant}
                rows += _group_rows(
                    wide,
                    intact=intact.iloc[0],
                    pool=pool,
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
    pool: list[str],
    group: pd.DataFrame,
    chosen: dict[str, str],
    keys: dict[str, str],
    boot: dict[str, int],
    level: float,
) -> list[dict]:
    """The rows of one variant and ``k``: each criterion's set against the intact model and the random pool.

    ``wide`` holds the statistic per question (rows) and condition (columns); ``chosen`` maps a drop set's
    layers to its condition; ``keys`` names the model, measure, statistic and variant of every row."""
    statistic = keys["statistic"]
    missing = [t for t in group["layers"] if t not in chosen]
    if missing:
        raise ValueError(f"drop sets {missing} were not scored; rerun layer_skip_eval with the same drop settings")
    base = wide[intact].to_numpy(float)
    b = wide[pool].to_numpy(float) if pool else np.empty((base.size, 0))
    values = {c: wide[chosen[t]].to_numpy(float) for c, t in zip(group["criterion"], group["layers"], strict=True)}
    margin = _margins(values, dict(zip(group["criterion"], group["layers"], strict=True)), boot, level)
    spread = (b - base[:, None]).mean(axis=0) if pool else np.array([np.nan])
    null = _random_null(base, b, boot, level)
    out = []
    for criterion, layers, share in zip(group["criterion"], group["layers"], group["share"], strict=True):
        a = values[criterion]
        change = paired_bootstrap(a, base, **boot, level=level)
        beyond = beyond_random(a, b, **boot, level=level) if pool else (np.nan,) * 3
        out.append(
            keys
            | {
                "share": float(share),
                "k": int(group["k"].iloc[0]),
                "criterion": criterion,
                "layers": layer_text(_parse(layers)),
                "n": a.size,
                "n_sets": len(pool),
                "intact": float(base.mean()),
                "value": float(a.mean()),
                "change": change[0],
                "ci_low": change[1],
                "ci_high": change[2],
                **dict(
                    zip(
                        ("random_min", "random_q25", "random_median", "random_q75", "random_max"),
                        np.quantile(spread, [0, 0.25, 0.5, 0.75, 1]).tolist(),
                        strict=True,
                    )
                ),
                "beats": float(np.mean(spread < change[0]) + 0.5 * np.mean(spread == change[0])) if pool else np.nan,
                "margin_low": margin[criterion][0],
                "margin_high": margin[criterion][1],
                "best": bool(margin[criterion][0] > 0),
                "reading": drop_reading(beyond[1], beyond[2], MARGINS[statistic]),
                **null,
                "beyond": beyond[0],
                "beyond_low": beyond[1],
                "beyond_high": beyond[2],
            }
        )
    return out


def _random_null(base: np.ndarray, b: np.ndarray, boot: dict, level: float) -> dict:
    """The random sets' mean change against intact, resampling questions and sets (NaN without sets)."""
    if b.shape[1] == 0:
        return {"null_name": RANDOM_SETS_NULL, "null_estimate": np.nan, "null_low": np.nan, "null_high": np.nan}
    drop = paired_bootstrap_sets(base, b, **boot, level=level)  # intact minus random: flip to random minus intact
    return {"null_name": RANDOM_SETS_NULL, "null_estimate": -drop[0], "null_low": -drop[2], "null_high": -drop[1]}


def _margins(
    values: dict[str, np.ndarray], layers: dict[str, str], boot: dict, level: float
) -> dict[str, tuple[float, float]]:
    """Per criterion, the paired interval of its set minus the best other criterion's (NaN alone).

    Criteria that chose the same blocks are one set: the best *other* is the best of the other sets.
    """
    out: dict[str, tuple[float, float]] = {}
    for name, own in values.items():
        others = {o: v for o, v in values.items() if layers[o] != layers[name]}
        if not others:
            out[name] = (np.nan, np.nan)
            continue
        rival = max(others, key=lambda o: others[o].mean())
        _, low, high = paired_bootstrap(own, others[rival], **boot, level=level)
        out[name] = (low, high)
    return out


def best_criteria(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows whose criterion separates from every other (``best``); none where no interval separates."""
    return scores[scores["best"].astype(bool)]


def drop_set_planted_rate(
    n_questions: int, draws: int = 100, seed: int = 0, *, shown: Shown, n_sets: int = 20, n_boot: int = 400
) -> float:
    """Share of ``draws`` in which a random set relabelled as a criterion's is shown beyond the random sets.

    Each draw simulates 0/1 answers of ``n_questions`` questions under the intact model (70% right) and
    ``n_sets + 1`` random sets, each set losing its own share of the answers (uniform 0-40 points: sets
    differ, as random block sets do); set 0 is relabelled as the chosen one, its excess over the others read
    by :func:`beyond_random` (the table's ``beyond`` columns) and decided by ``shown`` (the verdicts' decision,
    as the row's: :data:`BETTER` where it lies above 0).
    """

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        know = rng.random(n_questions) < 0.7
        kept = 1.0 - rng.uniform(0.0, 0.4, size=n_sets + 1)  # [S + 1] each set's retained share
        scores = (know[:, None] & (rng.random((n_questions, n_sets + 1)) < kept)).astype(float)  # [N, S + 1]
        return beyond_random(scores[:, 0], scores[:, 1:], n_boot=n_boot, seed=draw)

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def drop_summary(scores: pd.DataFrame, measure: str, statistic: str = ACCURACY) -> pd.DataFrame:
    """Per model, variant and ``k``, one line per criterion for people: its set, change and reading, best marked."""
    keep = scores[(scores["measure"] == measure) & (scores["statistic"] == statistic)]
    return keep[["model", "variant", "k", "criterion", "layers", "change", "ci_low", "ci_high", "reading", "best"]]
