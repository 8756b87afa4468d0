"""Choosing the skips before anything is scored: the entropy change at the answer position.

Calibration questions (disjoint from the evaluated ones) are profiled with one generated
token, so the Delta H that ranks the blocks is read at the position the MMLU letter is read
at: through the logit lens, and through a fitted linear lens where one is fitted (the same
questions and position, each block's residual mapped by its translator), so that "protect
expansion" is tested under either reading.  From each, per variant and ``k``, the expansion and
pruning blocks (:func:`entropy_lens.skipping.delta_h.selections`) over every eligible block, and
how stable the top block is across calibration questions.  A :class:`SkipPlan` is what the
evaluation job reads (a JSON record).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.text import extract_profiles
from entropy_lens.lens.translators import Translators
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.lens_model import LensModel
from entropy_lens.skipping.conditions import LINEAR, LOGIT, VARIANTS
from entropy_lens.skipping.delta_h import protected_layers, question_delta_h, selections, top_block_shares
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.store import schema

# One generated token: the first step's distribution is the one the answer letter is read from.
ANSWER_POSITION_TOKENS = 1


def shannon_only(lens: LensSettings) -> LensSettings:
    """``lens`` measuring Shannon entropy only (the skip experiment reads nothing else)."""
    return LensSettings(lens.top_p, (1.0,), lens.budget_bytes)


@dataclass(frozen=True)
class Calibration:
    """Everything read off the calibration questions.

    Attributes:
        plan: The skips to score.
        per_question: ``question_id, layer, delta_h, lens``: each calibration question's Delta H (nats) per lens.
        stability: :func:`~entropy_lens.skipping.delta_h.top_block_shares` of every lens and variant.
        protected: :func:`~entropy_lens.skipping.delta_h.protected_layers` of the mean Delta H.
    """

    plan: SkipPlan
    per_question: pd.DataFrame
    stability: pd.DataFrame
    protected: dict[str, Any]


def calibrate_skips(
    lm: LensModel,
    table: pd.DataFrame,
    *,
    lens: LensSettings,
    chat_template: bool,
    ks: Sequence[int],
    seed: int,
    n_boot: int,
    variants: Sequence[str] = VARIANTS,
    translators: Translators | None = None,
) -> Calibration:
    """Profile calibration questions at the answer position and fix the skips.

    Args:
        lm: The model.
        table: An ``mmlu`` prompt table of calibration questions.
        lens: Lens settings (only Shannon entropy is measured).
        chat_template: Render prompts with the model's chat template.
        ks: Numbers of blocks to skip (one expansion and one pruning set of each per lens and variant).
        seed: Seed of the stability bootstrap.
        n_boot: Bootstrap replicates of the stability shares.
        variants: Selection variants (:data:`~entropy_lens.skipping.conditions.VARIANTS`).
        translators: A fitted linear lens: its Delta H chooses blocks too (``None``: the logit lens alone).
    """
    lenses = {LOGIT: None} | ({LINEAR: translators} if translators is not None else {})
    per_question = {name: _question_delta_h(lm, table, lens, chat_template, t) for name, t in lenses.items()}
    means = {name: np.concatenate([[math.nan], np.nanmean(v[:, 1:], axis=0)]) for name, v in per_question.items()}
    chosen = [s for name, dh in means.items() for s in selections(dh, ks, variants, lens=name)]
    plan = SkipPlan(
        lm.name,
        lm.n_layers,
        tuple(float(v) for v in means[LOGIT]),
        tuple(chosen),
        int(per_question[LOGIT].shape[0]),
        tuple(float(v) for v in means[LINEAR]) if LINEAR in means else (),
    )
    stability = pd.concat(
        [
            top_block_shares(values, v, n_boot=n_boot, seed=seed).assign(lens=name)
            for name, values in per_question.items()
            for v in variants
        ],
        ignore_index=True,
    )
    long = pd.concat(
        [_long(values, table["question_id"]).assign(lens=name) for name, values in per_question.items()],
        ignore_index=True,
    )
    return Calibration(plan, long, stability, protected_layers(means[LOGIT]))


def _question_delta_h(
    lm: LensModel, table: pd.DataFrame, lens: LensSettings, chat_template: bool, translators: Translators | None
) -> np.ndarray:
    """``[Q, L]`` each calibration question's Delta H at the answer position, through ``translators`` where given."""
    ds = extract_profiles(
        lm,
        table["prompt_text"].tolist(),
        prompt_ids=table["prompt_id"].tolist(),
        generation=GenerationSettings(ANSWER_POSITION_TOKENS),
        lens=shannon_only(lens),
        prompting=PromptSettings(chat_template=chat_template),
        translators=translators,
    ).sel({schema.PROMPT: table["prompt_id"].tolist()})
    return question_delta_h(ds)


def _long(per_question: np.ndarray, questions: pd.Series) -> pd.DataFrame:
    """``question_id, layer, delta_h`` rows of a ``[Q, L]`` array."""
    n_questions, n_layers = per_question.shape
    return pd.DataFrame(
        {
            "question_id": np.repeat(questions.astype(str).to_numpy(), n_layers),
            "layer": np.tile(np.arange(n_layers), n_questions),
            "delta_h": per_question.reshape(-1),
        }
    )
