"""Scoring skips on the intact model's shared prefix: one intact pass per batch, each skip reruns only its tail.

One intact forward pass per batch records how every block was called
(:func:`~entropy_lens.model.hooks.capture_block_calls`); a skip whose first skipped block is ``l`` reruns
blocks ``l .. L-1`` from there without its skipped blocks (:func:`~entropy_lens.model.hooks.run_blocks`)
and decodes the last position.  A skip may hold fixed blocks (a
:class:`~entropy_lens.skipping.conditions.Condition`) or blocks drawn per question and questions left out
(a :class:`~entropy_lens.skipping.conditions.Draws`): within a batch, each distinct set of skipped blocks is
run once, on the prompts that need it (:func:`~entropy_lens.model.hooks.calls_of_rows`), whichever
conditions ask for it, so a random draw that hits a block the sweep skips costs nothing more.  Each
question's correctness and the gold letter's log-probability among the four letters are kept per measure
(:data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS`).
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
from entropy_lens.core.checks import check_layers
from entropy_lens.lens.choices import rendered_queries
from entropy_lens.lens.decoding import gather_logprobs, lens_logits
from entropy_lens.model.batching import batches, padded
from entropy_lens.model.hooks import calls_of_rows, capture_block_calls, run_blocks
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping.conditions import CORRECT_COLUMNS, Condition, Draws, layer_text

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0

# Reads the intact pass of a batch: (prompt rows, attention mask [B, S], every block's call, letter ids [B][C]).
Observer = Callable[[Sequence[int], torch.Tensor, dict, Sequence[Sequence[int]]], None]
Skip = Condition | Draws


def as_draws(conditions: Sequence[Skip], n_prompts: int) -> list[Draws]:
    """Every condition as :class:`Draws` over ``n_prompts`` prompts (a fixed condition on all of them).

    Raises:
        ValueError: for no condition, two of one name, or draws of another length.
    """
    if not conditions:
        raise ValueError("conditions is empty; pass at least one, e.g. [Condition('intact', 0)]")
    out = [c if isinstance(c, Draws) else Draws.of(c, [True] * n_prompts) for c in conditions]
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise ValueError(f"conditions share names {sorted({n for n in names if names.count(n) > 1})}; name each once")
    wrong = [d.name for d in out if len(d.layers) != n_prompts]
    if wrong:
        raise ValueError(f"draws {wrong} hold another number of questions than the {n_prompts} prompts")
    return out


@torch.inference_mode()
def condition_letter_logprobs(
    lm: LensModel,
    prompts: Sequence[str],
    conditions: Sequence[Skip],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    observe: Observer | None = None,
) -> dict[str, np.ndarray]:
    """Letter log-probabilities after each prompt under every condition, sharing the intact prefix.

    Equal to scoring each condition inside :func:`~entropy_lens.model.hooks.skip_blocks` (tested), at the
    cost of the blocks after each condition's first skipped one, each distinct set of blocks once per batch.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts (before any chat template).
        conditions: Skips (``intact`` reads the intact pass itself); :class:`Draws` may differ per prompt.
        batch_size: Prompts per forward pass.
        chat_template: Render prompts with the model's chat template.
        observe: Called after each batch's intact pass with every block's input kept
            (e.g. :class:`entropy_lens.skipping.recorder.ReadingRecorder`).

    Returns:
        ``{condition name: [N, 4] float32 log-probabilities of A-D}``, NaN on prompts a condition leaves out.
    """
    draws = as_draws(conditions, len(prompts))
    wanted = {v for d in draws for v in d.layers if v}
    for layers in wanted:
        check_layers(layers, lm.n_layers)
    queries, _ = rendered_queries(lm, prompts, LETTERS, chat_template=chat_template)
    out = {d.name: np.full((len(queries), len(LETTERS)), np.nan, dtype=np.float32) for d in draws}
    starts = sorted({v[0] for v in wanted} | (set(range(lm.n_layers)) if observe else set()))
    bar = tqdm(total=len(queries), desc=f"{lm.name} skip", unit="prompt", file=sys.stderr, mininterval=PROGRESS_SECONDS)
    for rows in batches([len(q.input_ids) for q in queries], batch_size):
        batch = [queries[r] for r in rows]
        inputs = padded([q.input_ids for q in batch], lm.tokenizer.pad_token_id, lm.device)
        with capture_block_calls(lm, starts) as calls:
            intact = lm.model(**inputs, use_cache=False, logits_to_keep=1).logits[:, -1, :]  # [B, V]
        ids = [q.choice_ids for q in batch]
        if observe is not None:
            observe(rows, inputs["attention_mask"], calls, ids)
        scored = _batch_skips(lm, calls, [[d.layers[r] for r in rows] for d in draws], ids)
        scored[()] = dict(enumerate(gather_logprobs(intact, ids)))
        for d in draws:
            for pos, r in enumerate(rows):
                if d.layers[r] is not None:
                    out[d.name][r] = scored[d.layers[r]][pos]
        bar.update(len(rows))
    bar.close()
    return out


def _batch_skips(
    lm: LensModel, calls: dict, asked: Sequence[Sequence[tuple[int, ...] | None]], ids: Sequence[Sequence[int]]
) -> dict[tuple[int, ...], dict[int, np.ndarray]]:
    """``{blocks: {batch position: [C] log-probabilities}}``: each distinct skip ``asked`` (per condition, per
    batch position) run once on the positions that need it."""
    needed: dict[tuple[int, ...], set[int]] = {}
    for per_position in asked:
        for pos, layers in enumerate(per_position):
            if layers:
                needed.setdefault(layers, set()).add(pos)
    subsets: dict[tuple[int, ...], dict] = {}
    out: dict[tuple[int, ...], dict[int, np.ndarray]] = {}
    for layers, positions in needed.items():
        pos = tuple(sorted(positions))
        if pos not in subsets:  # conditions that need the same prompts share their sliced calls
            subsets[pos] = calls if len(pos) == len(ids) else calls_of_rows(calls, pos, len(ids))
        hidden = run_blocks(lm, subsets[pos], layers[0], layers)  # [b, S, d]
        logp = gather_logprobs(lens_logits(lm, hidden[:, -1, :]), [ids[p] for p in pos])  # [b, C]
        out[layers] = dict(zip(pos, logp, strict=True))
    return out


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


def check_scores(scores: np.ndarray, n_prompts: int, where: str) -> np.ndarray:
    """``scores`` as float64 ``[N, C >= 2]`` without NaN.

    Raises:
        ValueError: naming ``where`` for another shape or a NaN.
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != n_prompts or values.shape[1] < 2:
        raise ValueError(f"scorer returned shape {values.shape} under {where}; expected [{n_prompts}, C>=2]")
    if np.isnan(values).any():
        raise ValueError(f"scorer returned NaN under {where}")
    return values


def gold_logprob(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """``[N]`` log-probability of the gold choice among the ``C`` choices (log-softmax over the scores), nats."""
    values = np.asarray(scores, dtype=np.float64)
    shifted = values - values.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return logp[np.arange(values.shape[0]), gold]


def correct_rows(condition: Skip, scores: Mapping[str, np.ndarray], answers, ids: Sequence[str]) -> pd.DataFrame:
    """Each question's correctness and gold log-probability under ``condition``, per measure's ``[N, C]`` scores
    (the questions of :class:`Draws` it leaves out are dropped; ``layers`` per question)."""
    draws = condition if isinstance(condition, Draws) else Draws.of(condition, [True] * len(ids))
    if len(draws.layers) != len(ids):
        raise ValueError(f"condition {draws.name!r} holds {len(draws.layers)} questions, the scores {len(ids)}")
    keep = np.array([v is not None for v in draws.layers])
    replicate = condition.replicate if isinstance(condition, Condition) else 0
    frames = []
    for measure, values in scores.items():
        checked = check_scores(np.asarray(values)[keep], int(keep.sum()), f"condition {draws.name!r}, {measure!r}")
        gold = answer_indices([a for a, k in zip(answers, keep, strict=True) if k], checked.shape[1])
        correct = checked.argmax(axis=1) == gold
        logger.info("condition %s, %s: accuracy %.3f on %d", draws.name, measure, correct.mean(), correct.size)
        frames.append(
            pd.DataFrame(
                {
                    "question": [q for q, k in zip(ids, keep, strict=True) if k],
                    "layers": [layer_text(v) for v in draws.layers if v is not None],
                    "measure": measure,
                    "correct": correct.astype(np.int8),
                    "gold_logprob": gold_logprob(checked, gold),
                }
            )
        )
    return pd.concat(frames, ignore_index=True).assign(
        condition=draws.name, kind=draws.kind, k=draws.k, replicate=replicate
    )


def score_conditions_shared(
    lm: LensModel,
    table: pd.DataFrame,
    conditions: Sequence[Skip],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    observe: Observer | None = None,
) -> pd.DataFrame:
    """Score rows of an ``mmlu`` table by raw and calibrated letter log-likelihood under every condition, the
    conditions sharing the intact prefix (:func:`condition_letter_logprobs`).

    The letter prior is taken under the same skip as the answers, over the questions a condition scores (see
    :func:`entropy_lens.answers.letters.calibrate`; for random draws, the prior under a random skip), so a skip
    that shifts the letter prior does not pass for knowledge lost or gained.

    Returns:
        :data:`~entropy_lens.skipping.conditions.CORRECT_COLUMNS` rows, one per condition, measure and scored question.
    """
    draws = as_draws(conditions, len(table))
    styles, answers = np.asarray(table["style"].tolist()), table["answer"].tolist()
    ids = [str(q) for q in table["question_id"]]
    logprobs = condition_letter_logprobs(
        lm, table["prompt_text"].tolist(), draws, batch_size=batch_size, chat_template=chat_template, observe=observe
    )
    frames = []
    for condition, d in zip(conditions, draws, strict=True):
        keep = np.array([v is not None for v in d.layers])
        values = logprobs[d.name]
        calibrated = np.full(values.shape, np.nan)
        if keep.any():
            calibrated[keep] = calibrate(values[keep], styles[keep].tolist())
        frames.append(correct_rows(condition, {"ll": values, "calibrated": calibrated}, answers, ids))
    return pd.concat(frames, ignore_index=True)[list(CORRECT_COLUMNS)]
