"""MMLU letter scoring with the model: log-likelihood of each answer letter after a prompt.

:func:`letter_logprobs` reads the four letters' log-probabilities after each prompt (one
forward pass per prompt, no generation); :func:`score_prompts` gives each prompt's answer
under every measure of :mod:`entropy_lens.answers.letters` (raw, calibrated, parsed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

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
from entropy_lens.lens.logit_lens import encode_prompts
from entropy_lens.model.generation import left_pad
from entropy_lens.model.loading import LensModel
from entropy_lens.prompts.datasets import ANSWER, LETTERS, PROMPT_ID, PROMPT_TEXT, QUESTION_ID, STYLE, SUBJECT

logger = logging.getLogger(__name__)

DEFAULT_SEPARATOR = " "


@dataclass(frozen=True)
class LetterQuery:
    """Token ids to feed and the ids of the four letters to read at the last position."""

    input_ids: list[int]
    letter_ids: tuple[int, int, int, int]


def letter_queries(
    tokenizer: object, prompts: Sequence[str], separator: str = DEFAULT_SEPARATOR, *, add_special_tokens: bool = True
) -> list[LetterQuery]:
    """Where to read the letters after each prompt.

    Encodes ``prompt + separator + letter`` for each letter (as the harness encodes
    context + continuation) and splits at the first token where the four differ:
    the common part is fed, the differing tokens are read.  Where ``" A"`` is one
    token this is the letter token right after the prompt; where the space is a
    token of its own it is fed and the letter is read after it.

    Args:
        tokenizer: The model's tokenizer.
        prompts: Prompt texts as the model sees them.
        separator: Text between prompt and letter.
        add_special_tokens: Let the tokenizer add its BOS (off for chat-rendered text,
            which carries its own).

    Raises:
        ValueError: naming the prompt when the letters do not start with four distinct tokens.
    """
    texts = [prompt + separator + letter for prompt in prompts for letter in LETTERS]
    encoded = tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]
    n = len(LETTERS)
    return [_split_letters(encoded[i * n : (i + 1) * n], prompt) for i, prompt in enumerate(prompts)]


def _split_letters(encoded: list[list[int]], prompt: str) -> LetterQuery:
    shared = 0
    while all(len(e) > shared for e in encoded) and len({e[shared] for e in encoded}) == 1:
        shared += 1
    letter_ids = tuple(e[shared] if len(e) > shared else -1 for e in encoded)
    if shared == 0 or -1 in letter_ids or len(set(letter_ids)) != len(LETTERS):
        raise ValueError(
            f"the letters A-D after prompt ...{prompt[-40:]!r} do not start with four distinct tokens "
            f"(ids {letter_ids} after {shared} shared tokens); check the tokenizer or the separator"
        )
    return LetterQuery(list(encoded[0][:shared]), letter_ids)  # type: ignore[arg-type]


@torch.inference_mode()
def letter_logprobs(
    lm: LensModel,
    prompts: Sequence[str],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    separator: str | None = None,
) -> np.ndarray:
    """Log-probability of each answer letter as the next token after each prompt.

    Prompts are length-sorted into batches, left padded with an attention mask and
    mask-following position ids, one forward pass per batch, no cache.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts (before any chat template).
        batch_size: Prompts per forward pass.
        chat_template: Render each prompt as a user turn, as
            :func:`entropy_lens.lens.logit_lens.encode_prompts` does; the letter then opens the reply.
        separator: Text between the (rendered) prompt and the letter; default ``" "``
            after a raw prompt (``"Answer: A"``), ``""`` after a chat template's
            assistant header (which ends in a newline for the registry's models).

    Returns:
        ``[N, 4]`` float32 log-probabilities (nats) of A, B, C, D.
    """
    if isinstance(prompts, str) or not len(prompts):
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    texts = encode_prompts(lm, prompts, chat_template=True)[1] if chat_template else list(prompts)
    sep = separator if separator is not None else ("" if chat_template else DEFAULT_SEPARATOR)
    queries = letter_queries(lm.tokenizer, texts, sep, add_special_tokens=not chat_template)
    out = np.empty((len(queries), len(LETTERS)), dtype=np.float32)
    order = np.argsort([len(q.input_ids) for q in queries], kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        out[rows] = _score_batch(lm, [queries[r] for r in rows])
    return out


def _score_batch(lm: LensModel, queries: list[LetterQuery]) -> np.ndarray:
    input_ids, mask = left_pad([q.input_ids for q in queries], lm.tokenizer.pad_token_id, lm.device)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    logits = lm.model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False, logits_to_keep=1
    ).logits[:, -1, :]  # [B, V]
    logp = torch.log_softmax(logits.float(), dim=-1)
    ids = torch.as_tensor([q.letter_ids for q in queries], dtype=torch.long, device=logp.device)  # [B, 4]
    return logp.gather(1, ids).cpu().numpy()


def score_prompts(
    lm: LensModel,
    table: pd.DataFrame,
    completions: Sequence[str],
    *,
    model: str,
    batch_size: int = 8,
    chat_template: bool = False,
) -> pd.DataFrame:
    """Each MMLU prompt's answer by raw and calibrated letter log-likelihood and by parsing.

    Args:
        lm: The model.
        table: An ``mmlu`` prompt table.
        completions: The model's generated text for each row (from its profile store).
        model: Name written in the ``model`` column.
        batch_size: Prompts per forward pass.
        chat_template: Render prompts with the model's chat template.

    Returns:
        One row per prompt: ids and labels, the letter of each :data:`MEASURES`, the
        correctness flags of :data:`entropy_lens.store.schema.SCORE_VARIABLES`, the completion,
        ``logprob_A..D`` and the style's letter prior ``prior_A..D`` (see
        :func:`entropy_lens.answers.letters.letter_prior`).
    """
    if len(completions) != len(table):
        raise ValueError(f"got {len(completions)} completions for {len(table)} prompts")
    styles = table[STYLE].tolist()
    logprobs = letter_logprobs(lm, table[PROMPT_TEXT].tolist(), batch_size=batch_size, chat_template=chat_template)
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
