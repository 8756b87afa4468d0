"""Planted nulls of the layer-skip comparisons: how often the rule decides "expansion more critical" by chance.

The null of "skipping the expansion block(s) costs more than skipping random blocks" is the random
blocks: a selection that carries no information about cost picks blocks whose skip costs what a
random block's does.  :func:`null_score_rows` writes score rows of one synthetic model where that
holds (every block's skip drawn from one distribution, the entropy change that selects the blocks
drawn independently of it), with an optional planted cost on the selected blocks, and
:func:`skip_planted_rate` sends them through the same code path as a run
(:func:`~entropy_lens.skipping.comparisons.skip_comparisons`, Holm within the claim, then
:func:`~entropy_lens.verdicts.outcomes.comparison_outcome`) and counts the draws in which any row of
the claim on the model decides "expansion more critical".

``block_spread`` plants a harder null: blocks whose costs differ (a few blocks costly, as in real
models) while the selection still ignores them.  The comparison then asks whether the selected
block costs more than the mean of the eligible blocks, which it does in about half the draws with
enough questions: the rule answers for the blocks selected in this model, not for the selection
criterion in general (that is the rank over blocks' question, an extension).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.planted import planted_rate
from entropy_lens.skipping.comparisons import skip_comparisons
from entropy_lens.skipping.conditions import (
    CORRECT_COLUMNS,
    EXPANSION,
    RANDOM,
    Condition,
    set_conditions,
)
from entropy_lens.skipping.delta_h import selections
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.verdicts.outcomes import comparison_outcome, more_critical

# The synthetic model: its blocks, its accuracy, what a skipped block costs the gold letter (nats) and how
# a cost turns into lost answers.
NULL_LAYERS = 10
NULL_ACCURACY = 0.7
BLOCK_COST = 0.5
NOISE = 0.5
FLIP_PER_NAT = 0.2
NULL_RANDOM_SETS = 20
MEASURES = ("ll", "calibrated")


def _plan(rng: np.random.Generator, ks: Sequence[int], n_layers: int) -> SkipPlan:
    """A skip plan whose entropy changes are drawn independently of any cost."""
    delta_h = np.concatenate([[math.nan], rng.normal(size=n_layers - 1)])
    chosen = tuple(selections(delta_h, ks))
    sets = tuple(set_conditions(chosen, n_layers, NULL_RANDOM_SETS, int(rng.integers(2**31))))
    return SkipPlan("null", n_layers, tuple(float(v) for v in delta_h), chosen, sets, 16)


def _rows(condition: Condition, correct: np.ndarray, logp: np.ndarray, measure: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "condition": condition.name,
            "kind": condition.kind,
            "k": condition.k,
            "replicate": condition.replicate,
            "layers": condition.layer_text,
            "question": [f"q{i}" for i in range(correct.size)],
            "measure": measure,
            "correct": correct.astype(np.int8),
            "gold_logprob": logp,
        }
    )


def null_score_rows(
    n_questions: int,
    rng: np.random.Generator,
    *,
    ks: Sequence[int] = (1, 2),
    effect: float = 0.0,
    block_spread: float = 0.0,
    n_layers: int = NULL_LAYERS,
) -> tuple[pd.DataFrame, SkipPlan]:
    """Score rows (:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`) of one synthetic model and its plan.

    Skipping a set of blocks costs the gold letter :data:`BLOCK_COST` nats per block (plus each block's
    own ``block_spread`` x a standard normal, drawn once), plus per-question noise; every expansion
    block of the plan costs ``effect`` nats more (0: the null).  An answer turns wrong with probability
    :data:`FLIP_PER_NAT` per nat of cost.  Both letter measures get their own noise.

    Args:
        n_questions: Evaluation questions (every condition is scored on all of them).
        rng: The draw's generator.
        ks: Numbers of blocks skipped.
        effect: Planted extra cost of the expansion blocks (nats).
        block_spread: Spread of the blocks' own costs (nats).
        n_layers: Blocks of the model.
    """
    n_questions = check_positive_int(n_questions, "n_questions")
    plan = _plan(rng, ks, n_layers)
    cost = BLOCK_COST + block_spread * rng.normal(size=n_layers)
    cost[sorted({block for s in plan.selections for block in s.expansion})] += effect
    cost = np.maximum(cost, 0.0)
    conditions = plan.sweep + [c for c in plan.sets if c.k >= 2]
    frames = []
    for measure in MEASURES:
        correct = rng.uniform(size=n_questions) < NULL_ACCURACY
        logp = np.log(np.where(correct, 0.6, 0.15))
        for condition in conditions:
            spent = float(cost[list(condition.layers)].sum())
            lost = rng.uniform(size=n_questions) < min(1.0, FLIP_PER_NAT * spent)
            noisy = logp - spent + (NOISE * rng.normal(size=n_questions) if condition.layers else 0.0)
            frames.append(_rows(condition, correct & ~lost if condition.layers else correct, noisy, measure))
    return pd.concat(frames, ignore_index=True)[list(CORRECT_COLUMNS)], plan


def expansion_decided(comparisons: pd.DataFrame) -> bool:
    """Whether any expansion-vs-random row of the table decides "expansion more critical"."""
    rows = comparisons[(comparisons["first"] == EXPANSION) & (comparisons["second"] == RANDOM)]
    return any(comparison_outcome(rec).outcome == more_critical(EXPANSION) for rec in rows.to_dict("records"))


def skip_planted_rate(
    n_questions: int,
    draws: int = 100,
    seed: int = 0,
    *,
    ks: Sequence[int] = (1, 2),
    effect: float = 0.0,
    block_spread: float = 0.0,
    n_boot: int = 200,
) -> float:
    """Share of ``draws`` synthetic models in which "expansion more critical" is decided against random blocks.

    With ``effect = 0`` and ``block_spread = 0`` this is the family-wise false-positive rate of the
    rule (Holm within the claim, every ``k``, variant, letter measure and statistic); a planted
    ``effect`` gives its power.  See the module docstring for ``block_spread``.

    Args:
        n_questions: Evaluation questions per synthetic model.
        draws: Synthetic models.
        seed: Seed of the draws.
        ks: Numbers of blocks skipped.
        effect: Planted extra cost of the expansion blocks (nats).
        block_spread: Spread of the blocks' own costs (nats).
        n_boot: Bootstrap replicates of each comparison.
    """

    def simulate(rng: np.random.Generator, draw: int) -> pd.DataFrame:
        correct, plan = null_score_rows(n_questions, rng, ks=ks, effect=effect, block_spread=block_spread)
        return skip_comparisons(correct, plan, n_boot=n_boot, seed=draw)

    return planted_rate(simulate, expansion_decided, draws=draws, seed=seed)
