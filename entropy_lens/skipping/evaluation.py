"""The layer-skip experiment on a loaded model: MMLU letters and entropy profiles under every skip.

One loaded model is scored under each :class:`~entropy_lens.skipping.conditions.Condition`:
letter log-likelihood needs no generation.  The conditions share the intact model's
prefix (:func:`condition_letter_logprobs`): one intact forward pass per batch records how
every block was called, and each condition reruns only the blocks from its first skipped
one onward, leaving the skipped ones out.  Each question's correctness and the gold letter's
log-probability among the four letters are kept per measure, so conditions are compared
question by question (:mod:`entropy_lens.skipping.criticality`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from entropy_lens.answers.letters import calibrate
from entropy_lens.core.checks import check_layers, check_positive_int
from entropy_lens.lens.choices import rendered_queries
from entropy_lens.lens.decoding import LensSettings, gather_logprobs, lens_logits
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.text import extract_profiles
from entropy_lens.model.batching import batches, padded
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.hooks import capture_block_calls, run_blocks, skip_blocks
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping.conditions import CORRECT_COLUMNS, INTACT, Condition
from entropy_lens.skipping.criteria import criteria_table
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.skipping.pruning import drop_conditions, drop_sets
from entropy_lens.skipping.readings import BlockReadings
from entropy_lens.skipping.selection import shannon_only

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0

# measure -> [N, C] per-choice scores; the answer is the argmax.
Scorer = Callable[[LensModel], Mapping[str, np.ndarray]]
# Reads the intact pass of a batch: (prompt rows, attention mask [B, S], every block's call, letter ids [B][C]).
Observer = Callable[[Sequence[int], torch.Tensor, dict, Sequence[Sequence[int]]], None]


def answer_indices(answers: Sequence[int | str], n_choices: int) -> np.ndarray:
    """``[N]`` int64 choice indices from ints ``0..C-1`` or letters ``"A"..``.

    Raises:
        ValueError: for an answer outside the ``n_choices`` choices.
    """
    out = np.empty(len(answers), dtype=np.int64)
    for i, answer in enumerate(answers):
        if isinstance(answer, str) and len(answer.strip()) == 1:
            index = ord(answer.strip().upper()) - ord("A")
        elif isinstance(answer, (int, np.integer)) and not isinstance(answer, bool):
            index = int(answer)
        else:
            index = -1
        if not 0 <= index < n_choices:
            raise ValueError(
                f"answer {i} is {answer!r}; expected an index 0..{n_choices - 1} or a letter "
                f"A..{chr(ord('A') + n_choices - 1)}"
            )
        out[i] = index
    return out


def _check_scores(scores: np.ndarray, n_prompts: int, where: str) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != n_prompts or values.shape[1] < 2:
        raise ValueError(f"scorer returned shape {values.shape} under {where}; expected [{n_prompts}, C>=2]")
    if np.isnan(values).any():
        raise ValueError(f"scorer returned NaN under {where}")
    return values


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
    frames = [_score_condition(lm, condition, score, answers, ids) for condition in conditions]
    return pd.concat(frames, ignore_index=True)[list(CORRECT_COLUMNS)]


def _score_condition(lm, condition: Condition, score: Scorer, answers, ids: list[str]) -> pd.DataFrame:
    with skip_blocks(lm, condition.layers):
        scores = score(lm)
    return _correct_rows(condition, scores, answers, ids)


def gold_logprob(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """``[N]`` log-probability of the gold choice among the ``C`` choices (log-softmax over the scores), nats."""
    values = np.asarray(scores, dtype=np.float64)
    shifted = values - values.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return logp[np.arange(values.shape[0]), gold]


def _correct_rows(condition: Condition, scores: Mapping[str, np.ndarray], answers, ids: list[str]) -> pd.DataFrame:
    """Each question's correctness and gold log-probability under ``condition``, per measure's ``[N, C]`` scores."""
    frames = []
    for measure, values in scores.items():
        checked = _check_scores(values, len(ids), f"condition {condition.name!r}, measure {measure!r}")
        gold = answer_indices(answers, checked.shape[1])
        correct = checked.argmax(axis=1) == gold
        logger.info(
            "condition %s (skip %s), %s: accuracy %.3f", condition.name, condition.layers, measure, correct.mean()
        )
        frames.append(
            pd.DataFrame(
                {
                    "question": ids,
                    "measure": measure,
                    "correct": correct.astype(np.int8),
                    "gold_logprob": gold_logprob(checked, gold),
                }
            )
        )
    return pd.concat(frames, ignore_index=True).assign(
        condition=condition.name,
        kind=condition.kind,
        k=condition.k,
        replicate=condition.replicate,
        layers=condition.layer_text,
    )


@torch.inference_mode()
def condition_letter_logprobs(
    lm: LensModel,
    prompts: Sequence[str],
    conditions: Sequence[Condition],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    observe: Observer | None = None,
) -> dict[str, np.ndarray]:
    """Letter log-probabilities after each prompt under every condition, sharing the intact prefix.

    Per batch, one intact forward pass (no cache) records how every block is called
    (:func:`~entropy_lens.model.hooks.capture_block_calls`); a condition whose first skipped
    block is ``l`` reruns blocks ``l .. L-1`` from there without its skipped blocks
    (:func:`~entropy_lens.model.hooks.run_blocks`) and decodes the last position with the final
    norm and unembedding.  Equal to scoring each condition inside
    :func:`~entropy_lens.model.hooks.skip_blocks` (tested), at the cost of the blocks after ``l``.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts (before any chat template).
        conditions: Skip conditions (``intact`` reads the intact pass itself).
        batch_size: Prompts per forward pass.
        chat_template: Render prompts with the model's chat template.
        observe: Called after each batch's intact pass with every block's input kept
            (e.g. :class:`entropy_lens.skipping.recorder.ReadingRecorder`).

    Returns:
        ``{condition name: [N, 4] float32 log-probabilities of A-D}``.
    """
    for condition in conditions:
        check_layers(condition.layers, lm.n_layers)
    queries, _ = rendered_queries(lm, prompts, LETTERS, chat_template=chat_template)
    out = {c.name: np.empty((len(queries), len(LETTERS)), dtype=np.float32) for c in conditions}
    starts = sorted({c.layers[0] for c in conditions if c.layers} | (set(range(lm.n_layers)) if observe else set()))
    bar = tqdm(total=len(queries), desc=f"{lm.name} skip", unit="prompt", file=sys.stderr, mininterval=PROGRESS_SECONDS)
    for rows in batches([len(q.input_ids) for q in queries], batch_size):
        batch = [queries[r] for r in rows]
        inputs = padded([q.input_ids for q in batch], lm.tokenizer.pad_token_id, lm.device)
        with capture_block_calls(lm, starts) as calls:
            intact = lm.model(**inputs, use_cache=False, logits_to_keep=1).logits[:, -1, :]  # [B, V]
        ids = [q.choice_ids for q in batch]
        if observe is not None:
            observe(rows, inputs["attention_mask"], calls, ids)
        for condition in conditions:
            if condition.layers:
                hidden = run_blocks(lm, calls, condition.layers[0], condition.layers)  # [B, S, d]
                logits = lens_logits(lm, hidden[:, -1, :])
            else:
                logits = intact
            out[condition.name][rows] = gather_logprobs(logits, ids)
        bar.update(len(rows))
    bar.close()
    return out


def score_conditions_shared(
    lm: LensModel,
    table: pd.DataFrame,
    conditions: Sequence[Condition],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    observe: Observer | None = None,
) -> pd.DataFrame:
    """:func:`score_conditions` of an ``mmlu`` table by raw and calibrated letter log-likelihood,
    with the conditions sharing the intact prefix (:func:`condition_letter_logprobs`).

    The letter prior is taken under the same skip as the answers (see
    :func:`entropy_lens.answers.letters.calibrate`), so a skip that shifts the letter prior does
    not pass for knowledge lost or gained.
    """
    if not conditions:
        raise ValueError("conditions is empty; pass at least one, e.g. [Condition('intact', 0)]")
    styles, answers = table["style"].tolist(), table["answer"].tolist()
    ids = [str(q) for q in table["question_id"]]
    logprobs = condition_letter_logprobs(
        lm,
        table["prompt_text"].tolist(),
        conditions,
        batch_size=batch_size,
        chat_template=chat_template,
        observe=observe,
    )
    frames = [
        _correct_rows(c, {"ll": logprobs[c.name], "calibrated": calibrate(logprobs[c.name], styles)}, answers, ids)
        for c in conditions
    ]
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
        conditions: The conditions to profile (e.g. :func:`profiled`).
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


def set_question_ids(questions: Sequence[str], n: int, seed: int) -> list[str]:
    """The ``n`` questions (of ``questions``, in their order) that the ``k >= 2`` sets are scored on.

    A seeded random choice, so that the subset is a random sample of the evaluation questions;
    all of them when ``n`` covers them.
    """
    ids = list(dict.fromkeys(str(q) for q in questions))
    n = check_positive_int(n, "set_questions")
    if n >= len(ids):
        return ids
    keep = set(np.random.default_rng(seed).permutation(len(ids))[:n].tolist())
    return [q for i, q in enumerate(ids) if i in keep]


def evaluate_skips(
    lm: LensModel,
    table: pd.DataFrame,
    plan: SkipPlan,
    *,
    lens: LensSettings,
    batch_size: int,
    chat_template: bool,
    profile_prompts: int,
    set_questions: int,
    seed: int,
    observe: Observer | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score an ``mmlu`` table under the sweep and the ``k >= 2`` sets, and profile a few prompts.

    The sweep (intact and every block alone) is scored on every question; the ``k >= 2``
    sets on :func:`set_question_ids` of them (both share the intact prefix per batch).
    ``observe`` reads the sweep's intact pass (:func:`condition_letter_logprobs`).

    Returns:
        ``(correct, profiles)``: :func:`score_conditions_shared` rows of both parts (the
        intact rows of the sweep only) and :func:`profile_conditions` rows at the answer position
        for the conditions :meth:`SkipPlan.profiled` names.
    """
    kwargs = {"batch_size": batch_size, "chat_template": chat_template}
    frames = [score_conditions_shared(lm, table, plan.sweep, observe=observe, **kwargs)]
    sets = [c for c in plan.sets if c.k >= 2]
    if sets:
        subset = set(set_question_ids(table["question_id"], set_questions, seed))
        rows = table[table["question_id"].astype(str).isin(subset)]
        logger.info("k >= 2 sets: %d conditions on %d of %d questions", len(sets), len(rows), len(table))
        frames.append(score_conditions_shared(lm, rows, sets, **kwargs))
    prompts = table["prompt_text"].tolist()[:profile_prompts]
    profiles = profile_conditions(lm, prompts, plan.profiled(), lens=lens, chat_template=chat_template)
    return pd.concat(frames, ignore_index=True), profiles


def evaluate_drop_sets(
    lm: LensModel,
    table: pd.DataFrame,
    readings: BlockReadings,
    *,
    variants: Sequence[str],
    shares: Sequence[float],
    n_questions: int,
    n_random: int,
    seed: int,
    batch_size: int,
    chat_template: bool,
) -> pd.DataFrame:
    """Score the multi-block drop sets each pruning criterion chooses, and random sets of each size.

    The criteria are read off the sweep's intact pass (``readings``, no cost is looked at); the sets
    (:func:`~entropy_lens.skipping.pruning.drop_sets`, :func:`~entropy_lens.skipping.pruning.drop_conditions`)
    and the intact model are scored on :func:`set_question_ids` of ``n_questions`` (the same seeded
    order as the ``k >= 2`` sets, so one subset holds the other), sharing the intact prefix.

    Returns:
        :data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS` rows (none when ``shares`` is empty).
    """
    drops = drop_sets(criteria_table(readings, lm.name), readings, lm.name, variants, shares)
    if drops.empty:
        return pd.DataFrame(columns=list(CORRECT_COLUMNS))
    conditions = [Condition(INTACT, 0), *drop_conditions(drops, readings.n_layers, n_random, seed)]
    subset = set(set_question_ids(table["question_id"], n_questions, seed))
    rows = table[table["question_id"].astype(str).isin(subset)]
    logger.info("drop sets: %d conditions on %d of %d questions", len(conditions), len(rows), len(table))
    return score_conditions_shared(lm, rows, conditions, batch_size=batch_size, chat_template=chat_template)
