"""MMLU letter scoring: log-likelihood of each answer letter after a prompt.

The extraction pass reads the four letters' log-probabilities from its first generation
step (``choice_logprob``, :func:`store_logprobs`); :func:`letter_logprobs` computes the
same values with a forward pass of its own (the layer-skip experiment, under each
condition).  :func:`score_prompts` gives each prompt's answer under every measure of
:mod:`entropy_lens.answers.letters` (raw, calibrated, parsed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.answers.letters import (
    CALIBRATED_LETTER,
    LL_LETTER,
    MEASURES,
    PARSED_LETTER,
    correct_flags,
    letter_prior,
    parse_letter,
    predicted_letters,
)
from entropy_lens.lens.choices import choice_logprobs
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.datasets import ANSWER, LETTERS, PROMPT_ID, QUESTION_ID, STYLE, SUBJECT
from entropy_lens.store import schema

logger = logging.getLogger(__name__)


def letter_logprobs(
    lm: LensModel,
    prompts: Sequence[str],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    separator: str | None = None,
) -> np.ndarray:
    """``[N, 4]`` float32 log-probabilities (nats) of A, B, C, D as the next token after each prompt.

    One forward pass per batch (:func:`entropy_lens.lens.choices.choice_logprobs`); the extraction
    pass reads the same values at no extra cost (``choice_logprob`` of an MMLU store).
    """
    return choice_logprobs(
        lm, prompts, LETTERS, batch_size=batch_size, chat_template=chat_template, separator=separator
    )


def store_logprobs(store: xr.Dataset, prompt_ids: Sequence[str]) -> np.ndarray:
    """``[N, 4]`` letter log-probabilities an MMLU store read during extraction, in ``prompt_ids`` order.

    Raises:
        ValueError: naming the store's model when it has no ``choice_logprob`` (profiled
            without the letter readout) or a prompt's letters are missing.
    """
    if schema.CHOICE_LOGPROB not in store.data_vars:
        raise ValueError(
            f"the MMLU store of {store.attrs.get('model_name')!r} has no {schema.CHOICE_LOGPROB!r}: it was "
            "extracted without the letter readout; extract it again (snakemake --forcerun extract_profiles)"
        )
    values = store[schema.CHOICE_LOGPROB].sel({schema.PROMPT: list(prompt_ids), schema.CHOICE: list(LETTERS)}).values
    missing = np.isnan(values).any(axis=1)
    if missing.any():
        raise ValueError(f"{int(missing.sum())} prompts have no letter log-probabilities in the store")
    return values.astype(np.float32)


def score_prompts(
    table: pd.DataFrame,
    logprobs: np.ndarray,
    completions: Sequence[str],
    *,
    model: str,
) -> pd.DataFrame:
    """Each MMLU prompt's answer by raw and calibrated letter log-likelihood and by parsing.

    Args:
        table: An ``mmlu`` prompt table.
        logprobs: ``[N, 4]`` letter log-probabilities after each row's prompt (from the
            extraction pass, :func:`store_logprobs`, or :func:`letter_logprobs`).
        completions: The model's generated text for each row (from its profile store).
        model: Name written in the ``model`` column.

    Returns:
        One row per prompt: ids and labels, the letter of each :data:`MEASURES`, the
        correctness flags of :data:`entropy_lens.store.schema.SCORE_VARIABLES`, the completion,
        ``logprob_A..D`` and the style's letter prior ``prior_A..D`` (see
        :func:`entropy_lens.answers.letters.letter_prior`).
    """
    if len(completions) != len(table) or len(logprobs) != len(table):
        raise ValueError(
            f"got {len(completions)} completions and {len(logprobs)} letter log-probabilities for {len(table)} prompts"
        )
    styles = table[STYLE].tolist()
    prior = letter_prior(logprobs, styles)
    letters = {
        LL_LETTER: predicted_letters(logprobs),
        CALIBRATED_LETTER: predicted_letters(logprobs - prior),
        PARSED_LETTER: [parse_letter(c) for c in completions],
    }
    flags = {correct: correct_flags(table[ANSWER], letters[letter]) for letter, correct in MEASURES.values()}
    ids = table[[PROMPT_ID, STYLE, SUBJECT, QUESTION_ID, ANSWER]].reset_index(drop=True)
    return ids.assign(
        model=model,
        **letters,
        **flags,
        completion=list(completions),
        **{f"logprob_{x}": logprobs[:, i] for i, x in enumerate(LETTERS)},
        **{f"prior_{x}": prior[:, i] for i, x in enumerate(LETTERS)},
    )
