"""The layer-skip experiment on a loaded model: MMLU letters and entropy profiles under every skip.

One loaded model is scored under each skip: letter log-likelihood needs no generation.  The evaluation
questions are put in one seeded order (:func:`question_order`); the parts of the experiment read nested
prefixes of it:

* **the paired design**, on every evaluation question: the intact model, each selected block (``k = 1``,
  every lens and variant) and, per variant, one random eligible block drawn for that question;
* **the sweep**, on the first ``sweep_questions``: every block skipped alone (the criticality map);
* **the selected sets** (``k >= 2``) with one random ``k``-set per question and variant, on the first
  ``set_questions``;
* **the drop sets** each pruning criterion chooses from the intact pass's readings, with one random
  ``k``-set per question and variant, on the first ``drop_questions`` (:func:`evaluate_drop_sets`).

All of a part's conditions share the intact prefix (:mod:`entropy_lens.skipping.prefix`); a skip asked by
two parts on one question is run once.  :func:`score_conditions` scores fixed conditions the plain way
(inside :func:`~entropy_lens.model.hooks.skip_blocks`), the reference the shared prefix is tested against.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_layers, check_positive_int
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.text import extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.hooks import skip_blocks
from entropy_lens.model.lens_model import LensModel
from entropy_lens.skipping.conditions import (
    CORRECT_COLUMNS,
    INTACT,
    RANDOM,
    SINGLE,
    Condition,
    Draws,
    question_seed,
    random_draws,
    random_name,
)
from entropy_lens.skipping.criteria import criteria_table
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.skipping.prefix import Observer, Skip, correct_rows, score_conditions_shared
from entropy_lens.skipping.pruning import drop_conditions, drop_sets
from entropy_lens.skipping.readings import BlockReadings
from entropy_lens.skipping.selection import shannon_only

logger = logging.getLogger(__name__)

# measure -> [N, C] per-choice scores; the answer is the argmax.
Scorer = Callable[[LensModel], Mapping[str, np.ndarray]]


def score_conditions(
    lm: LensModel,
    conditions: Sequence[Condition],
    score: Scorer,
    answers: Sequence[int | str],
    questions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Each question's correctness under every condition and measure, on one loaded model.

    All layer lists are validated before any scoring starts; the model is restored after
    each condition (see :func:`~entropy_lens.model.hooks.skip_blocks`).

    Args:
        lm: The model.
        conditions: Skip conditions (intact included if wanted).
        score: ``score(lm) -> {measure: [N, C]}`` per-choice scores of the N questions.
        answers: ``N`` correct choices (index or letter).
        questions: ``N`` question ids (default ``0..N-1`` as strings).

    Returns:
        Long frame with :data:`CORRECT_COLUMNS`, one row per condition, measure and question.
    """
    if not conditions:
        raise ValueError("conditions is empty; pass at least one, e.g. [Condition('intact', 0)]")
    ids = [str(q) for q in questions] if questions is not None else [str(i) for i in range(len(answers))]
    if len(ids) != len(answers) or not ids:
        raise ValueError(f"need one question id per answer (> 0), got {len(ids)} ids, {len(answers)} answers")
    for condition in conditions:
        try:
            check_layers(condition.layers, lm.n_layers)
        except (TypeError, ValueError) as err:
            raise type(err)(f"condition {condition.name!r}: {err}") from err
    frames = []
    for condition in conditions:
        with skip_blocks(lm, condition.layers):
            scores = score(lm)
        frames.append(correct_rows(condition, scores, answers, ids))
    return pd.concat(frames, ignore_index=True)[list(CORRECT_COLUMNS)]


def profile_conditions(
    lm: LensModel,
    prompts: Sequence[str],
    conditions: Sequence[Condition],
    *,
    lens: LensSettings,
    chat_template: bool = False,
    max_new_tokens: int = 1,
) -> pd.DataFrame:
    """Mean entropy profile under each condition, to show what a skip does to the lens.

    Args:
        lm: The model.
        prompts: Prompts to profile (a few suffice).
        conditions: The conditions to profile (e.g. :meth:`SkipPlan.profiled`).
        lens: Lens settings (only Shannon entropy is kept).
        chat_template: Render prompts with the model's chat template.
        max_new_tokens: Tokens generated per prompt; 1 reads only the answer position.

    Returns:
        ``condition, kind, k, layer, depth, entropy`` (nats, mean over prompts and tokens).
    """
    rows = []
    for condition in conditions:
        with skip_blocks(lm, condition.layers):
            ds = extract_profiles(
                lm,
                list(prompts),
                generation=GenerationSettings(max_new_tokens),
                lens=shannon_only(lens),
                prompting=PromptSettings(chat_template=chat_template),
            )
        mean = ds["entropy"].mean(("prompt", "token"), skipna=True)
        rows += [
            {
                "condition": condition.name,
                "kind": condition.kind,
                "k": condition.k,
                "layer": int(layer),
                "depth": float(depth),
                "entropy": float(h),
            }
            for layer, depth, h in zip(ds["layer"].values, ds["depth"].values, mean.values, strict=True)
        ]
    return pd.DataFrame(rows)


def question_order(questions: Sequence[str], seed: int) -> list[str]:
    """The evaluation questions (distinct, as text) in one seeded random order: each part of the experiment
    reads a prefix of it, so a smaller part's questions are a random sample of a larger part's."""
    ids = list(dict.fromkeys(str(q) for q in questions))
    return [ids[i] for i in np.random.default_rng(seed).permutation(len(ids))]


def set_question_ids(questions: Sequence[str], n: int, seed: int) -> list[str]:
    """The first ``n`` of :func:`question_order` (all of them when ``n`` covers them), in the questions' order."""
    n = check_positive_int(n, "questions")
    keep = set(question_order(questions, seed)[:n])
    return [q for q in dict.fromkeys(str(v) for v in questions) if q in keep]


def paired_draws(n_questions: int, n_layers: int, ks: Sequence[int], seed: int) -> dict[tuple[int, str], list]:
    """``{(k, variant): one random k-set per question}`` (:func:`~entropy_lens.skipping.conditions.random_draws`,
    seeded per ``k``)."""
    return {
        (k, variant): drawn
        for k in ks
        for variant, drawn in random_draws(n_questions, n_layers, k, question_seed(seed, k)).items()
    }


def paired_conditions(
    plan: SkipPlan, questions: Sequence[str], *, sweep: set[str], sets: set[str], variants: Sequence[str], seed: int
) -> list[Skip]:
    """Every skip of :func:`evaluate_skips` over ``questions`` (in the scored table's order): intact; each block
    alone on the sweep's questions and, where a selection chose it, on every question; each selected
    ``k >= 2`` set on the set questions; per ``k`` and variant one random set per question (``k = 1``: every
    question; ``k >= 2``: the set questions)."""
    ids = [str(q) for q in questions]
    chosen = {c.layers: c for c in plan.chosen}
    out: list[Skip] = [Condition(INTACT, 0)]
    for single in plan.sweep[1:]:
        everywhere = single.layers in chosen
        out.append(Draws.of(single, [everywhere or q in sweep for q in ids]))
    out += [Draws.of(c, [q in sets for q in ids]) for c in plan.chosen if c.kind != SINGLE]
    ks = sorted({s.k for s in plan.selections})
    for (k, variant), drawn in paired_draws(len(ids), plan.n_layers, ks, seed).items():
        if variant in variants:
            scored = [layers if k == 1 or q in sets else None for q, layers in zip(ids, drawn, strict=True)]
            out.append(Draws(random_name(k, variant), RANDOM, k, tuple(scored)))
    return out


def evaluate_skips(
    lm: LensModel,
    table: pd.DataFrame,
    plan: SkipPlan,
    *,
    lens: LensSettings,
    batch_size: int,
    chat_template: bool,
    profile_prompts: int,
    sweep_questions: int,
    set_questions: int,
    variants: Sequence[str],
    seed: int,
    observe: Observer | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score an ``mmlu`` table under the paired design, the sweep and the ``k >= 2`` sets, and profile a few prompts.

    ``observe`` reads the intact pass of every evaluation question (:func:`score_conditions_shared`).

    Returns:
        ``(correct, profiles)``: :data:`CORRECT_COLUMNS` rows (each condition on the questions it scores) and
        :func:`profile_conditions` rows at the answer position for the conditions :meth:`SkipPlan.profiled` names.
    """
    ids = table["question_id"].astype(str).tolist()
    sweep, sets = (set(set_question_ids(ids, n, seed)) for n in (sweep_questions, set_questions))
    conditions = paired_conditions(plan, ids, sweep=sweep, sets=sets, variants=variants, seed=seed)
    logger.info(
        "paired design on %d questions, the sweep on %d, k >= 2 sets on %d: %d conditions",
        len(ids),
        len(sweep),
        len(sets),
        len(conditions),
    )
    kwargs = {"batch_size": batch_size, "chat_template": chat_template}
    correct = score_conditions_shared(lm, table, conditions, observe=observe, **kwargs)
    prompts = table["prompt_text"].tolist()[:profile_prompts]
    profiles = profile_conditions(lm, prompts, plan.profiled(), lens=lens, chat_template=chat_template)
    return correct, profiles


def evaluate_drop_sets(
    lm: LensModel,
    table: pd.DataFrame,
    readings: BlockReadings,
    *,
    variants: Sequence[str],
    shares: Sequence[float],
    n_questions: int,
    seed: int,
    batch_size: int,
    chat_template: bool,
) -> pd.DataFrame:
    """Score the multi-block drop sets each pruning criterion chooses, beside one random set of each size per
    question and variant.

    The criteria are read off the intact pass (``readings``, no cost is looked at); the sets
    (:func:`~entropy_lens.skipping.pruning.drop_sets`, :func:`~entropy_lens.skipping.pruning.drop_conditions`)
    and the intact model are scored on :func:`set_question_ids` of ``n_questions`` (the same seeded order as the
    other parts), sharing the intact prefix.

    Returns:
        :data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS` rows (none when ``shares`` is empty).
    """
    drops = drop_sets(criteria_table(readings, lm.name), readings, lm.name, variants, shares)
    if drops.empty:
        return pd.DataFrame(columns=list(CORRECT_COLUMNS))
    subset = set(set_question_ids(table["question_id"], n_questions, seed))
    rows = table[table["question_id"].astype(str).isin(subset)].reset_index(drop=True)
    conditions: list[Skip] = [Condition(INTACT, 0), *drop_conditions(drops)]
    drawn = paired_draws(len(rows), readings.n_layers, sorted({int(k) for k in drops["k"]}), seed)
    conditions += [Draws(random_name(k, v), RANDOM, k, tuple(d)) for (k, v), d in drawn.items() if v in variants]
    logger.info("drop sets: %d conditions on %d of %d questions", len(conditions), len(rows), len(table))
    return score_conditions_shared(lm, rows, conditions, batch_size=batch_size, chat_template=chat_template)
