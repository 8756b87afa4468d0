"""Planted nulls of the layer-skip comparisons and of the rank over blocks, on the paired design.

The null of "skipping the expansion block(s) costs more than skipping random blocks" is the random
blocks: a selection that carries no information about cost picks blocks whose skip costs what a
random block's does.  :func:`null_score_rows` writes score rows of one synthetic model where that
holds (every block's skip drawn from one distribution, the entropy change that selects the blocks
drawn independently of it), scored as a run scores them: the intact model, each selected block or set,
and one random set drawn per question (:func:`~entropy_lens.skipping.evaluation.paired_draws`), with an
optional planted cost on the selected blocks.  :func:`skip_planted_rate` sends them through the same code
path as a run (:func:`~entropy_lens.skipping.comparisons.skip_comparisons`, Holm within the claim and
statistic, then :func:`~entropy_lens.verdicts.outcomes.comparison_outcome`) and counts the draws in which
any row of the claim on the model decides "expansion more critical".

``block_spread`` plants a harder null: blocks whose costs differ (a few blocks costly, as in real
models) while the selection still ignores them.  The comparison then asks whether the selected
block costs more than the mean eligible block, which it does in about half the draws with
enough questions: the rule answers for the blocks selected in this model, not for the selection
criterion in general.

:func:`rank_planted_rate` is the rank over blocks' planted null: costs with no block structure, read by
:func:`~entropy_lens.skipping.criticality.spearman_over_blocks` (blocks fixed) and the row's null.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.core.planted import Excess, Shown, planted_rate
from entropy_lens.skipping.comparisons import skip_comparisons
from entropy_lens.skipping.conditions import CORRECT_COLUMNS, EXPANSION, INTACT, RANDOM, layer_text, random_name
from entropy_lens.skipping.criticality import spearman_over_blocks
from entropy_lens.skipping.delta_h import selections
from entropy_lens.skipping.evaluation import paired_draws
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.verdicts.outcomes import comparison_outcome, more_critical

# The synthetic model: its blocks, its accuracy, what a skipped block costs the gold letter (nats) and how
# a cost turns into lost answers.
NULL_LAYERS = 10
NULL_ACCURACY = 0.7
BLOCK_COST = 0.5
NOISE = 0.5
FLIP_PER_NAT = 0.2
MEASURES = ("ll", "calibrated")
# Calibration questions of the rank over blocks' planted null.
NULL_CALIBRATION = 16


def _plan(rng: np.random.Generator, ks: Sequence[int], n_layers: int) -> SkipPlan:
    """A skip plan whose entropy changes are drawn independently of any cost."""
    delta_h = np.concatenate([[math.nan], rng.normal(size=n_layers - 1)])
    return SkipPlan("null", n_layers, tuple(float(v) for v in delta_h), tuple(selections(delta_h, ks)), 16)


def _rows(name: str, kind: str, k: int, layers: Sequence[tuple[int, ...]], values: tuple, measure: str) -> pd.DataFrame:
    correct, logp = values
    return pd.DataFrame(
        {
            "condition": name,
            "kind": kind,
            "k": k,
            "replicate": 0,
            "layers": [layer_text(v) for v in layers],
            "question": [f"q{i}" for i in range(correct.size)],
            "measure": measure,
            "correct": correct.astype(np.int8),
            "gold_logprob": logp,
        }
    )


class _Skips:
    """Every question's correctness and gold log-probability under a skip, drawn once per skip: one skip of one
    question has one value, whichever condition asks for it (as the shared prefix scores it once)."""

    def __init__(self, cost: np.ndarray, correct: np.ndarray, logp: np.ndarray, rng: np.random.Generator) -> None:
        self.cost, self.correct, self.logp, self.rng = cost, correct, logp, rng
        self.known: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, layers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        if layers not in self.known:
            n = self.correct.size
            spent = float(self.cost[list(layers)].sum())
            lost = self.rng.uniform(size=n) < min(1.0, FLIP_PER_NAT * spent)
            self.known[layers] = (self.correct & ~lost, self.logp - spent + NOISE * self.rng.normal(size=n))
        return self.known[layers]


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
    :data:`FLIP_PER_NAT` per nat of cost.  Both letter measures get their own noise; one skip of one question
    has one value, whichever condition asks for it (as the shared prefix scores it once).

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
    drawn = paired_draws(n_questions, n_layers, ks, int(rng.integers(2**31)))
    frames = []
    for measure in MEASURES:
        correct = rng.uniform(size=n_questions) < NULL_ACCURACY
        skips = _Skips(cost, correct, np.log(np.where(correct, 0.6, 0.15)), rng)
        frames.append(_rows(INTACT, INTACT, 0, [()] * n_questions, (correct, skips.logp), measure))
        for c in plan.chosen:
            frames.append(_rows(c.name, c.kind, c.k, [c.layers] * n_questions, skips(c.layers), measure))
        for (k, variant), sets in drawn.items():
            values = [skips(s) for s in sets]
            picked = tuple(np.array([v[j][i] for i, v in enumerate(values)]) for j in range(2))
            frames.append(_rows(random_name(k, variant), RANDOM, k, sets, picked, measure))
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
    rule (Holm within the claim and statistic, every ``k``, variant and letter measure); a planted
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


def rank_planted_rate(
    n_questions: int,
    draws: int = 100,
    seed: int = 0,
    *,
    shown: Shown,
    n_layers: int = 28,
    effect: float = 0.0,
    n_boot: int = 400,
) -> float:
    """Share of ``draws`` in which the rank over blocks shows a relation beyond its null (rho 0) where none exists.

    Each draw: ``n_questions`` evaluation questions whose cost of skipping each eligible block is drawn from
    one distribution (no block structure; ``effect`` adds a cost rising with the block's Delta H, for the power),
    and :data:`NULL_CALIBRATION` calibration questions whose Delta H has a fixed block structure of its own; read
    by :func:`~entropy_lens.skipping.criticality.spearman_over_blocks` (blocks fixed), the Spearman's excess over
    rho 0 decided by ``shown`` (the verdicts' decision at the row's margin).
    """
    blocks = n_layers - 1

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        level = rng.normal(size=blocks)  # each block's own Delta H
        delta_h = level + 0.5 * rng.normal(size=(NULL_CALIBRATION, blocks))
        cost = effect * level + rng.normal(size=(max(n_questions, 2), blocks))
        return spearman_over_blocks(cost, delta_h, n_boot=n_boot, seed=draw)

    return planted_rate(simulate, shown, draws=draws, seed=seed)
