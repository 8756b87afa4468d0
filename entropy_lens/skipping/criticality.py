"""What skipping each block costs: the per-block criticality map and the rank over blocks.

Pure NumPy/pandas over the score rows of the layer-skip experiment
(:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`) and its
:class:`~entropy_lens.skipping.selection.SkipPlan`:

* :func:`skip_map`: per block skipped alone, on the sweep's questions (those every block was skipped
  on), the paired change of accuracy and of the gold letter's log-probability (among the four letters)
  against the intact model, each with a bootstrap interval over questions, beside the block's mean
  Delta H; and the "safe to skip" reading a user can act on (:func:`skip_reading`);
* :func:`criticality_spearman`: across the eligible blocks, the Spearman correlation of mean
  Delta H (logit lens) with the cost of skipping the block (the drop of the gold letter's
  log-probability), with an interval from a bootstrap over evaluation and calibration questions,
  **blocks fixed**: for this model its blocks are the whole population, so the rank statement "the
  more a block expands, the more its skip costs" is read for this model.

The comparisons the study makes (expansion, pruning and random blocks) are
:mod:`entropy_lens.skipping.comparisons`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.core.block_spearman import block_spearman_draws, spearman_interval
from entropy_lens.core.frames import Reading
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    paired_bootstrap,
    wilson_interval,
)
from entropy_lens.skipping.conditions import (
    EXPANSION,
    INTACT,
    LENS_TEXT,
    LOGIT,
    PRUNING,
    RANDOM,
    SINGLE,
    VARIANT_SHORT,
    eligible_layers,
    layer_text,
)
from entropy_lens.skipping.plan import SkipPlan

ACCURACY = "accuracy"
GOLD_LOGPROB = "gold_logprob"
STATISTICS = (ACCURACY, GOLD_LOGPROB)
N_CHOICES = 4
# A skip whose accuracy interval rules out a drop of this much (0-1) is safe to skip.
MIN_SKIP_EFFECT = 0.05
SAFE, COSTLY, UNCLEAR = "safe", "costly", "unclear"
MAP_COLUMNS = (
    "model",
    "measure",
    "layer",
    "depth",
    "delta_h",
    "n",
    "accuracy",
    "d_accuracy",
    "d_accuracy_low",
    "d_accuracy_high",
    "d_logprob",
    "d_logprob_low",
    "d_logprob_high",
    "reading",
    "eligible",
    "marks",
)
# The map's mark of a block no selection or random baseline may skip (block 0: the lens has no layer before it,
# so it has no Delta H and is never selected nor drawn at random).
INELIGIBLE = "not eligible (no ΔH)"
SPEARMAN_COLUMNS = (
    "model",
    "measure",
    "variant",
    "n_blocks",
    "n",
    "n_calibration",
    "rho",
    "ci_low",
    "ci_high",
    "most_costly",
    "largest_delta_h",
)
# The table as a standard frame: the Spearman of Delta H with the cost of skipping each block.
SPEARMAN_READING = Reading("rho")


def condition_table(correct: pd.DataFrame, *, n_choices: int = N_CHOICES, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Accuracy per measure and condition with its Wilson interval over questions.

    Returns:
        ``measure, condition, kind, k, replicate, layers, n, accuracy, ci_low, ci_high, chance``.
    """
    keys = ["measure", "condition", "kind", "k", "replicate", "layers"]
    rows = []
    for key, group in correct.groupby(keys, sort=False):
        hits, n = int(group["correct"].sum()), len(group)
        lo, hi = wilson_interval(hits, n, level)
        rows.append({**dict(zip(keys, key, strict=True)), "n": n, "accuracy": hits / n, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows).assign(chance=1.0 / n_choices)


def by_question(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """``question x condition`` table of ``value``."""
    return rows.pivot_table(index="question", columns="condition", values=value, aggfunc="first")


def by_layers(rows: pd.DataFrame) -> dict[str, str]:
    """Skipped blocks (``"8,27"``; ``""`` intact) -> the name of a condition that skipped them (not a random set)."""
    named = rows[rows["kind"] != RANDOM].drop_duplicates("condition")
    return dict(zip(named["layers"].astype(str), named["condition"], strict=True))


def skip_reading(low: float, high: float) -> str:
    """``costly`` when the accuracy change's interval lies below 0, ``safe`` when it rules out a drop
    of :data:`MIN_SKIP_EFFECT`, else ``unclear``."""
    if high < 0:
        return COSTLY
    return SAFE if low > -MIN_SKIP_EFFECT else UNCLEAR


def sweep_questions(rows: pd.DataFrame, n_layers: int) -> pd.Index:
    """The questions every block was skipped alone on (and the intact model scored): the sweep's."""
    names = by_layers(rows[rows["kind"].isin([INTACT, SINGLE])])
    wanted = [names.get(t) for t in ["", *(layer_text([b]) for b in range(n_layers))]]
    if any(w is None for w in wanted):
        return pd.Index([])
    counts = rows[rows["condition"].isin(wanted)].groupby("question")["condition"].nunique()
    return counts.index[counts == len(wanted)]


def _marks(plan: SkipPlan, layer: int) -> str:
    marks = [
        f"{kind} ({VARIANT_SHORT[s.variant]}{'' if s.lens == LOGIT else ', ' + LENS_TEXT[s.lens]})"
        for s in plan.selections
        if s.k == 1
        for kind in (EXPANSION, PRUNING)
        if s.layers(kind) == (layer,)
    ]
    return "; ".join(marks)


def skip_map(
    correct: pd.DataFrame, plan: SkipPlan, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """Per measure and block skipped alone: what it costs against the intact model, paired over questions.

    Args:
        correct: Score rows of one model (sweep and sets; the sweep's are used).
        plan: The model's skip plan (mean Delta H, selections).
        n_boot: Bootstrap replicates.
        seed: Seed of the bootstrap.
        level: Coverage.

    Returns:
        :data:`MAP_COLUMNS`: accuracy and ``d_accuracy`` (0-1), ``d_logprob`` (nats; negative: the
        gold letter lost probability), each with its interval; ``reading`` (:func:`skip_reading`);
        ``eligible``: whether a selection or random baseline may skip the block (block 0 may not:
        it has no Delta H, yet its skip is often the costliest, so the map shows its cost);
        ``marks`` names the expansion / pruning block of each variant at ``k = 1``, or
        :data:`INELIGIBLE`.
    """
    rows = []
    sweep = correct[correct["kind"].isin([INTACT, SINGLE])]
    names = by_layers(sweep)
    for measure, by_measure in sweep.groupby("measure", sort=False):
        asked = by_measure[by_measure["question"].isin(sweep_questions(by_measure, plan.n_layers))]
        hits, logp = by_question(asked, "correct"), by_question(asked, GOLD_LOGPROB)
        for layer in range(plan.n_layers):
            key = names.get(layer_text([layer]))
            if key is None or key not in hits or names.get("") not in hits:
                continue
            pair = (key, names[""])
            rows.append(
                _map_row(hits, logp, pair, layer, plan, boot={"n_boot": n_boot, "seed": seed}, level=level)
                | {"measure": measure}
            )
    return pd.DataFrame(rows, columns=list(MAP_COLUMNS))


def _map_row(
    hits: pd.DataFrame,
    logp: pd.DataFrame,
    pair: tuple[str, str],
    layer: int,
    plan: SkipPlan,
    *,
    boot: dict[str, int],
    level: float,
) -> dict:
    """The criticality map's row of one block: ``hits`` and ``logp`` hold correctness and the gold letter's
    log-probability per question (rows) and condition (columns); ``pair`` names the block's condition and the
    intact one."""
    key, intact = pair
    both = hits[[key, intact]].dropna().index
    d_acc = paired_bootstrap(hits.loc[both, key], hits.loc[both, intact], **boot, level=level)
    d_logp = paired_bootstrap(logp.loc[both, key], logp.loc[both, intact], **boot, level=level)
    return {
        "model": plan.model,
        "layer": layer,
        "depth": (layer + 1) / plan.n_layers,
        "delta_h": plan.delta_h[layer],
        "n": len(both),
        "accuracy": float(hits.loc[both, key].mean()),
        "d_accuracy": d_acc[0],
        "d_accuracy_low": d_acc[1],
        "d_accuracy_high": d_acc[2],
        "d_logprob": d_logp[0],
        "d_logprob_low": d_logp[1],
        "d_logprob_high": d_logp[2],
        "reading": skip_reading(d_acc[1], d_acc[2]),
        "eligible": bool(layer in eligible_layers(plan.n_layers)),
        "marks": _marks(plan, layer) if layer in eligible_layers(plan.n_layers) else INELIGIBLE,
    }


def spearman_over_blocks(
    cost: np.ndarray, delta_h: np.ndarray, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """Spearman correlation across blocks of mean Delta H with mean cost, bootstrapped over questions, blocks fixed.

    Each replicate resamples the evaluation questions and the calibration questions (with replacement,
    independently: :func:`~entropy_lens.core.block_spearman.block_spearman_draws`, unpaired, blocks fixed); the
    blocks are the model's own, the whole population the statement is about, so they are not resampled: the
    interval says how well this model's blocks' costs follow their Delta H, given the questions' noise.  Costs
    with no block structure (every block's skip drawn from one distribution) show a relation at the
    planted-null rate (:func:`entropy_lens.verdicts.skip_nulls.rank_planted_rate`).

    Args:
        cost: ``[N, B]`` per evaluation question, the cost of skipping each block (nats; larger: worse).
        delta_h: ``[Q, B]`` per calibration question, each block's Delta H (nats).
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Coverage.

    Returns:
        ``(rho, low, high)``; NaN where it is undefined (fewer than 3 blocks, a constant mean).
    """
    draws = block_spearman_draws(cost, delta_h, n_boot=n_boot, seed=seed, paired=False, blocks_fixed=True)
    return spearman_interval(*draws, level)


def criticality_spearman(
    correct: pd.DataFrame,
    per_question: pd.DataFrame,
    plan: SkipPlan,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Per measure and variant: Spearman of each eligible block's Delta H with the cost of skipping it.

    The cost is the drop of the gold letter's log-probability (intact minus skipped, nats), the
    paired measure that ranks blocks at a few hundred questions where accuracy cannot.

    Args:
        correct: Score rows of one model (the sweep's are used).
        per_question: ``question_id, layer, delta_h[, lens]`` of the calibration questions (the logit lens's read).
        plan: The model's skip plan.

    Returns:
        :data:`SPEARMAN_COLUMNS`; ``most_costly`` and ``largest_delta_h`` name the blocks at the top of each ranking.
    """
    logit = per_question[per_question["lens"] == LOGIT] if "lens" in per_question else per_question
    dh = logit.pivot_table(index="question_id", columns="layer", values="delta_h", aggfunc="first")
    sweep = correct[correct["kind"].isin([INTACT, SINGLE])]
    rows = []
    for measure, by_measure in sweep.groupby("measure", sort=False):
        asked = by_measure[by_measure["question"].isin(sweep_questions(by_measure, plan.n_layers))]
        logp, names = by_question(asked, GOLD_LOGPROB).dropna(), by_layers(by_measure)
        for variant in dict.fromkeys(s.variant for s in plan.selections):
            blocks = [b for b in eligible_layers(plan.n_layers, variant) if layer_text([b]) in names and b in dh]
            cost = logp[[names[""]]].to_numpy() - logp[[names[layer_text([b])] for b in blocks]].to_numpy()  # [N, B]
            calib = dh[blocks].dropna().to_numpy()  # [Q, B]
            rho, low, high = spearman_over_blocks(cost, calib, n_boot=n_boot, seed=seed, level=level)
            rows.append(
                {
                    "model": plan.model,
                    "measure": measure,
                    "variant": variant,
                    "n_blocks": len(blocks),
                    "n": cost.shape[0],
                    "n_calibration": calib.shape[0],
                    "rho": rho,
                    "ci_low": low,
                    "ci_high": high,
                    "most_costly": int(blocks[int(np.argmax(cost.mean(axis=0)))]) if blocks else -1,
                    "largest_delta_h": int(blocks[int(np.argmax(calib.mean(axis=0)))]) if blocks else -1,
                }
            )
    return pd.DataFrame(rows, columns=list(SPEARMAN_COLUMNS))
