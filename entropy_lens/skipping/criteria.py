"""Which blocks can you drop? The pruning criteria per block, and how well each predicts the measured cost.

Pure NumPy/pandas over :class:`~entropy_lens.skipping.readings.BlockReadings` (what the sweep's intact
pass shows at every block) and the sweep's score rows
(:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`).  Each criterion scores every block so that
a higher score says "more critical, keep it":

* ``delta_h``: the entropy change across the block under the logit lens at the answer position,
  ``H(x_{i+1}) - H(x_i)`` (nats; block 0 reads the embeddings through the lens): the study's advice,
  "protect expansion phases";
* ``block_influence``: ShortGPT's (Men et al. 2024) ``BI_i = 1 - mean over tokens of cos(x_i, x_{i+1})``;
* ``angular``: Gromov et al.'s (2024) ``arccos(cos(x_i, x_{i+1})) / pi`` at the last token (``n = 1``);
* ``position``: blocks from the end, ``L - 1 - i`` (Gromov et al.'s simpler baseline drops the
  deepest blocks);
* ``delta_h_linear``, where a linear lens is fitted: ``delta_h`` read through it, since the logit lens
  reads the first blocks far from the model's own distribution and may rank them on its bias (NaN, and
  left out of every ranking, without one; block 0 reads the embeddings, which have no translator);
* ``entrodrop``: EntroDrop's (Yang et al. 2025, arXiv 2504.03794) entropy increase of the hidden states
  across the block, ``H(Z^l) - H(Z^{l-1})`` (the bucket estimate of
  :attr:`~entropy_lens.skipping.readings.BlockReadings.hidden_entropy`, nats), with its two stages: the
  blocks of the early stage, where the mean hidden-state entropy falls to its minimum, are never pruned
  (score ``+inf``); after it, the blocks of least entropy increase are pruned first (:func:`entrodrop_scores`).

:func:`criteria_table` is one row per block; :func:`criteria_spearman` the Spearman of each criterion
with the cost of skipping the block alone, over the model's eligible blocks (**blocks fixed**: for a user
choosing which blocks of *this* model to drop, its blocks are the whole population), its interval
resampling questions only (jointly for the criterion and the cost: both are read off the same questions),
and a null read by the same code on costs with no block structure (each question's costs shuffled across
the blocks).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.block_spearman import block_spearman_draws, spearman_interval
from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.frames import Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, DEFAULT_N_BOOT, percentile_interval
from entropy_lens.skipping.conditions import INTACT, SINGLE, eligible_layers, layer_text
from entropy_lens.skipping.readings import BlockReadings

DELTA_H, BLOCK_INFLUENCE, ANGULAR, POSITION = "delta_h", "block_influence", "angular", "position"
CRITERIA = (DELTA_H, BLOCK_INFLUENCE, ANGULAR, POSITION)
# Read only where a linear lens is fitted for the model: its column is NaN elsewhere.
DELTA_H_LINEAR = "delta_h_linear"
# Read only where the hidden states' entropy was recorded: its column is NaN elsewhere.
ENTRODROP = "entrodrop"
ALL_CRITERIA = (*CRITERIA, DELTA_H_LINEAR, ENTRODROP)
CRITERION_TEXT = {
    DELTA_H: "ΔH (logit lens)",
    DELTA_H_LINEAR: "ΔH (linear lens)",
    BLOCK_INFLUENCE: "Block Influence",
    ANGULAR: "angular distance",
    POSITION: "position from the end",
    ENTRODROP: "EntroDrop (hidden-state entropy increase)",
}
# What a criterion Spearman's interval resamples: the questions, the model's blocks fixed.
RESAMPLED = "questions (blocks fixed)"
ACCURACY, GOLD_LOGPROB = "accuracy", "gold_logprob"
COSTS = (ACCURACY, GOLD_LOGPROB)
PREDICTS, CONTRARY, UNDECIDED = "predicts", "contrary", "undecided"
CRITERIA_COLUMNS = ("model", "layer", "depth", "n", *ALL_CRITERIA)
SPEARMAN_COLUMNS = (
    "model",
    "measure",
    "statistic",
    "variant",
    "criterion",
    "n_blocks",
    "n",
    "rho",
    "ci_low",
    "ci_high",
    "null_rho",
    "null_low",
    "null_high",
    "margin_low",
    "margin_high",
    "reading",
    "resampled",
)
# The table as a standard frame (entropy_lens.core.frames): each criterion's Spearman with the cost.
CRITERIA_SPEARMAN_READING = Reading("rho")


def question_scores(readings: BlockReadings) -> dict[str, np.ndarray]:
    """Per criterion, ``[N, L]`` each question's score of every block (higher: predicted more critical)."""
    n, n_layers = readings.token_cos.shape
    blocks = np.arange(n_layers)
    linear = readings.entropy_linear
    return {
        DELTA_H: np.diff(readings.entropy, axis=1),
        BLOCK_INFLUENCE: 1.0 - readings.token_cos,
        ANGULAR: readings.angle[:, blocks, blocks + 1],
        POSITION: np.broadcast_to((n_layers - 1 - blocks).astype(float), (n, n_layers)).copy(),
        DELTA_H_LINEAR: np.full((n, n_layers), np.nan) if linear is None else np.diff(linear, axis=1),
        ENTRODROP: entrodrop_scores(readings.hidden_entropy, n, n_layers),
    }


def entrodrop_scores(hidden: np.ndarray | None, n: int, n_layers: int) -> np.ndarray:
    """``[N, L]`` EntroDrop's score of each block per question: the hidden states' entropy increase across it,
    ``+inf`` for the blocks of the early entropy-decrease stage (never pruned).

    The early stage ends where the mean (over the questions) hidden-state entropy of ``x_0 .. x_L`` reaches its
    minimum, at position ``p*``: blocks ``0 .. p* - 1`` (whose outputs lead down to it) are protected.  NaN
    throughout where the hidden entropy was not recorded (``hidden`` ``None``).
    """
    if hidden is None or not np.isfinite(hidden).any():
        return np.full((n, n_layers), np.nan)
    values = np.asarray(hidden, dtype=np.float64)
    scores = np.diff(values, axis=1)  # [N, L]: block l reads x_l, writes x_{l+1}
    lowest = int(np.nanargmin(np.nanmean(values, axis=0)))
    scores[:, :lowest] = np.inf
    return scores


def present(scores: dict[str, np.ndarray] | pd.DataFrame, blocks: Sequence[int] | None = None) -> tuple[str, ...]:
    """The criteria of ``scores`` (per-question arrays, or a :func:`criteria_table`) with a score on ``blocks``
    (default every block) that is not NaN: the four always, ``delta_h_linear`` where a linear lens was read,
    ``entrodrop`` where the hidden states' entropy was (its protected blocks read ``+inf``)."""
    values = {c: np.asarray(scores[c], dtype=np.float64) for c in ALL_CRITERIA if c in scores}
    index = slice(None) if blocks is None else list(blocks)
    return tuple(c for c, v in values.items() if np.isfinite(v[..., index]).any())


def criteria_table(readings: BlockReadings, model: str) -> pd.DataFrame:
    """One row per block: each criterion's score, the mean over questions (:data:`CRITERIA_COLUMNS`).

    ``block_influence`` is the mean over questions of each question's mean over its tokens.
    """
    scores = question_scores(readings)
    n, n_layers = readings.token_cos.shape
    with warnings.catch_warnings():  # a criterion not read (no linear lens) is all NaN: its mean is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        frame = pd.DataFrame({name: np.nanmean(values, axis=0) for name, values in scores.items()})
    layers = np.arange(n_layers)
    frame.insert(0, "n", n)
    frame.insert(0, "depth", (layers + 1) / n_layers)
    frame.insert(0, "layer", layers)
    frame.insert(0, "model", model)
    return frame[list(CRITERIA_COLUMNS)]


def contiguous_angles(readings: BlockReadings, n: int) -> np.ndarray:
    """``[L + 1 - n]`` mean over questions of ``arccos(cos(x_l, x_{l+n})) / pi`` at the last token, per start ``l``.

    Raises:
        ValueError: for a span ``n`` outside ``1..L``.
    """
    n_layers = readings.n_layers
    n = check_positive_int(n, "n")
    if n > n_layers:
        raise ValueError(f"a span of n={n} blocks exceeds the model's {n_layers}; lower n")
    starts = np.arange(n_layers + 1 - n)
    return np.nanmean(readings.angle[:, starts, starts + n], axis=0)


def gromov_choice(readings: BlockReadings, n: int, pool: Sequence[int]) -> tuple[int, ...]:
    """Gromov et al.'s drop set: the ``n`` contiguous blocks ``l* .. l*+n-1`` within ``pool`` whose input
    and output lie closest in angle at the last token (ties to the shallower start).

    Raises:
        ValueError: when no run of ``n`` consecutive blocks lies within ``pool``.
    """
    angles = contiguous_angles(readings, n)
    allowed = set(int(v) for v in pool)
    starts = [s for s in range(angles.size) if all(b in allowed for b in range(s, s + n))]
    if not starts:
        raise ValueError(f"no {n} consecutive blocks lie within the eligible pool {sorted(allowed)}; lower n")
    best = min(starts, key=lambda s: (angles[s], s))
    return tuple(range(best, best + n))


def sweep_costs(correct: pd.DataFrame, measure: str, statistic: str, blocks: Sequence[int]) -> pd.DataFrame:
    """``question x block`` cost of skipping each block alone: intact minus skipped (a drop is positive).

    Args:
        correct: Score rows of one model (the sweep's are used).
        measure: ``ll`` or ``calibrated``.
        statistic: ``accuracy`` (0/1 per question) or ``gold_logprob`` (nats).
        blocks: The blocks to read.

    Raises:
        ValueError: for an unknown statistic, or a block or the intact model absent from the sweep.
    """
    if statistic not in COSTS:
        raise ValueError(f"statistic must be one of {COSTS}, got {statistic!r}")
    value = "correct" if statistic == ACCURACY else GOLD_LOGPROB
    rows = correct[(correct["measure"] == measure) & correct["kind"].isin([INTACT, SINGLE])]
    rows = rows.assign(layers=rows["layers"].fillna("").astype(str))  # intact skips nothing: ""
    wide = rows.pivot_table(index="question", columns="layers", values=value, aggfunc="first")
    wide = wide.loc[list(dict.fromkeys(rows["question"]))]  # the questions' own order, not sorted text
    wanted = [layer_text([b]) for b in blocks]
    absent = [w for w in ["", *wanted] if w not in wide]
    if absent:
        raise ValueError(f"the sweep of measure {measure!r} lacks conditions {absent} ('' is intact); score them")
    wide = wide[["", *wanted]].dropna()  # the sweep's questions: every block skipped alone on them
    return pd.DataFrame(
        wide[[""]].to_numpy(float) - wide[wanted].to_numpy(float), index=wide.index.astype(str), columns=list(blocks)
    )


def paired_block_spearman(
    cost: np.ndarray, score: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """Spearman across blocks of the mean score with the mean cost, bootstrapped over questions, blocks fixed.

    Each replicate resamples the questions with replacement (the same ones for the cost and the score: both
    are read off them); the blocks are the model's own, the population the statement is about
    (:func:`~entropy_lens.core.block_spearman.block_spearman_draws`, paired, blocks fixed).  A block the
    criterion never prunes (``+inf``, EntroDrop's early stage) ranks above every other in each replicate.

    Args:
        cost: ``[N, B]`` each question's cost of skipping each block.
        score: ``[N, B]`` each question's criterion score of each block.
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(rho, low, high)``; NaN where undefined (fewer than 3 blocks, a constant mean).
    """
    return spearman_interval(*criterion_draws(cost, score, n_boot=n_boot, seed=seed), level)


def criterion_draws(cost: np.ndarray, score: np.ndarray, *, n_boot: int, seed: int) -> tuple[float, np.ndarray]:
    """The Spearman of :func:`paired_block_spearman` and its ``[n_boot]`` replicates: two criteria read against one
    cost with one seed are resampled alike, so their replicates pair."""
    return block_spearman_draws(cost, score, n_boot=n_boot, seed=seed, paired=True, blocks_fixed=True)


def margins(draws: dict[str, np.ndarray], level: float = DEFAULT_LEVEL) -> dict[str, tuple[float, float]]:
    """Per criterion, the interval of its Spearman minus the best other criterion's, from paired replicates.

    The best other is the one of largest mean replicate; a criterion whose interval lies above 0 beats
    every other (it *separates*).  NaN where fewer than two criteria have replicates.
    """
    finite = {name: d for name, d in draws.items() if np.isfinite(d).any()}
    out = {name: (np.nan, np.nan) for name in draws}
    for name, own in finite.items():
        others = {o: d for o, d in finite.items() if o != name}
        if others:
            rival = max(others, key=lambda o: np.nanmean(others[o]))
            diff = own - others[rival]
            diff = diff[np.isfinite(diff)]
            out[name] = tuple(float(v) for v in percentile_interval(diff, level)) if diff.size else (np.nan, np.nan)
    return out


def shuffled_blocks(cost: np.ndarray, seed: int) -> np.ndarray:
    """The null: ``cost`` ``[N, B]`` with no block structure, each question's costs shuffled across the blocks
    (one seeded permutation per question): every block then costs alike in expectation, and each question keeps
    its own spread of costs."""
    values = np.asarray(cost)
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random(values.shape), axis=1)
    return np.take_along_axis(values, order, axis=1)


def spearman_reading(low: float, high: float) -> str:
    """``predicts`` when the interval lies above 0, ``contrary`` below 0, else ``undecided``."""
    if low > 0:
        return PREDICTS
    return CONTRARY if high < 0 else UNDECIDED


def criteria_spearman(
    correct: pd.DataFrame,
    readings: BlockReadings,
    model: str,
    variants: Sequence[str],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Per measure, cost statistic, variant and criterion: the Spearman of the criterion with the cost.

    The blocks are each variant's eligible ones (:func:`~entropy_lens.skipping.conditions.eligible_layers`);
    the questions those both the sweep and the readings hold.  ``null_*`` is the same statistic on the
    costs without block structure (:func:`shuffled_blocks`): an interval around 0 is what no information looks like;
    ``margin_*`` the interval of its Spearman minus the best other criterion's (:func:`margins`), above 0 where
    it separates from every other.

    Returns:
        :data:`SPEARMAN_COLUMNS`.
    """
    scores = question_scores(readings)
    row_of = {q: i for i, q in enumerate(readings.questions)}
    boot = {"n_boot": n_boot, "seed": seed, "level": level}
    rows: list[dict] = []
    for measure in dict.fromkeys(correct["measure"]):
        for statistic in COSTS:
            for variant in variants:
                blocks = [int(b) for b in eligible_layers(readings.n_layers, variant)]
                cost = sweep_costs(correct, measure, statistic, blocks)
                cost = cost[cost.index.isin(row_of)]
                index = [row_of[q] for q in cost.index]
                values, null = cost.to_numpy(float), shuffled_blocks(cost.to_numpy(float), seed)
                keys = {"model": model, "measure": measure, "statistic": statistic, "variant": variant}
                picked = {c: scores[c][np.ix_(index, blocks)] for c in present(scores, blocks)}
                rows += _criterion_rows(values, null, picked, keys, boot)
    return pd.DataFrame(rows, columns=list(SPEARMAN_COLUMNS))


def _criterion_rows(
    cost: np.ndarray, null: np.ndarray, scores: dict[str, np.ndarray], keys: dict, boot: dict
) -> list[dict]:
    """One row per criterion: its Spearman with ``cost`` and with the shuffled ``null``, and its margin."""
    n_boot, seed, level = boot["n_boot"], boot["seed"], boot["level"]
    found = {c: criterion_draws(cost, s, n_boot=n_boot, seed=seed) for c, s in scores.items()}
    margin = margins({c: draws for c, (_, draws) in found.items()}, level)
    rows = []
    for criterion, score in scores.items():
        rho, low, high = spearman_interval(*found[criterion], level)
        null_rho, null_low, null_high = paired_block_spearman(null, score, **boot)
        rows.append(
            keys
            | {
                "criterion": criterion,
                "n_blocks": cost.shape[1],
                "n": cost.shape[0],
                "rho": rho,
                "ci_low": low,
                "ci_high": high,
                "null_rho": null_rho,
                "null_low": null_low,
                "null_high": null_high,
                "margin_low": margin[criterion][0],
                "margin_high": margin[criterion][1],
                "reading": spearman_reading(low, high),
                "resampled": RESAMPLED,
            }
        )
    return rows


def criterion_ranks(criteria: pd.DataFrame, blocks: Sequence[int]) -> pd.DataFrame:
    """``criterion x block`` rank of each block under each criterion among ``blocks`` (1: most critical; float,
    NaN where a criterion scores no block: ΔH under the linear lens at block 0, whose input has no translator)."""
    frame = criteria.set_index("layer").loc[list(blocks), list(present(criteria))]
    return frame.rank(ascending=False, method="min").T
