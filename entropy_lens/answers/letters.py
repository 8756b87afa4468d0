"""Reading answers: letters from log-likelihoods or from text, and the measures of an answer.

Three measures of each MMLU answer (:data:`MEASURES`):

* ``ll``: the letter whose token the model finds most likely right after the prompt (the
  lm-evaluation-harness way), so every question gets an answer;
* ``calibrated``: the same log-likelihoods minus the style's letter prior, the mean letter
  log-probabilities over the evaluated questions of that style (batch calibration, Zhou et
  al. 2024; it uses the model's outputs only, never the answers).  Small models put most
  of their mass on one letter whatever the question; calibration removes that constant
  preference.  The verdicts use this measure (:data:`VERDICT_MEASURE`).  A prior taken
  from content-free prompts ("N/A" questions, Zhao et al. 2021) was tried first and left
  gemma3-270m answering D for 93-97% of questions, so it is not used;
* ``parsed``: the letter parsed from the generated completion alone, never from the
  prompt, or ``"unparsed"``.

Pure functions (no model): :mod:`entropy_lens.answers.scoring` runs the forward passes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.store.schema import CORRECT_CALIBRATED, CORRECT_LL, CORRECT_PARSED

UNPARSED = "unparsed"
LL_LETTER = "ll_letter"
CALIBRATED_LETTER = "calibrated_letter"
PARSED_LETTER = "parsed_letter"
# Each measure of an answer: the column of its letter and of its correctness flag.
MEASURES: dict[str, tuple[str, str]] = {
    "ll": (LL_LETTER, CORRECT_LL),
    "calibrated": (CALIBRATED_LETTER, CORRECT_CALIBRATED),
    "parsed": (PARSED_LETTER, CORRECT_PARSED),
}
# The measure the verdicts use: raw log-likelihood of a small model mostly reads its letter
# prior (one letter for nearly every question), which calibration removes.
VERDICT_MEASURE = "calibrated"

# Parsing rules, tried in order on the completion only (first hit wins):
# 1. an explicit statement: "answer is C", "Answer: (b)", "the correct option is D";
_STATEMENT = re.compile(
    r"\b(?:answer|option|choice)\b\s*(?:is|would be|:)?\s*[:\-]?\s*[(\[*\"']*([A-Da-d])(?![A-Za-z0-9])",
    re.IGNORECASE,
)
# 2. a letter opening the completion: "C", "C. Because ...", "(B)", "**D**", "b)";
#    lower case only before ) . : or the end, so the article in "a dog" is no answer;
_LEADING = re.compile(r"^[\s(\[*\"']*(?:([A-D])(?![A-Za-z0-9])|([a-d])(?=[).:\]*]|$))")
#    a capital "A" opening a phrase ("A dog barked") is the article too, unless the next word
#    is one that follows an answer letter ("A is right", "A because ...");
_LEADING_ARTICLE = re.compile(r"^[\s\"']*A\s+(?!(?:is|because|since|as|would|seems|looks|fits|matches|and|or)\b)[a-z]")
# 3. a bracketed letter anywhere: "... so (B)".
_BRACKETED = re.compile(r"[(\[]([A-Da-d])[)\]]")
# Rule 1 reads "the answer is a" as A unless "a" starts a phrase ("is a tricky one").
_ARTICLE = re.compile(r"\s+[A-Za-z]")


def parse_letter(completion: str) -> str:
    """The answer letter stated in a generated ``completion`` (never the prompt).

    Rules, first hit wins: (1) an explicit statement such as "the answer is c",
    "Answer: (B)" or "the correct option is D" (any case; a lower-case "a" followed by
    a word is the article, not a letter); (2) a letter opening the completion,
    "C", "C. Because B is wrong", "(B)", "**D**" (lower case only when followed by
    ``) . : ]`` or the end, and a capital "A" opening a phrase, "A dog barked", is the
    article); (3) the first bracketed letter, "(b)" or "[C]".  A word
    that merely starts with a letter ("Because") never counts.

    Returns:
        ``"A"``..``"D"``, or ``"unparsed"``.
    """
    if not isinstance(completion, str):
        raise TypeError(f"completion must be a str, got {type(completion).__name__}")
    for match in _STATEMENT.finditer(completion):
        letter = match.group(1)
        if letter != "a" or not _ARTICLE.match(completion, match.end()):
            return letter.upper()
    leading = None if _LEADING_ARTICLE.match(completion) else _LEADING.match(completion)
    if leading:
        return (leading.group(1) or leading.group(2)).upper()
    bracketed = _BRACKETED.search(completion)
    return bracketed.group(1).upper() if bracketed else UNPARSED


def predicted_letters(logprobs: np.ndarray) -> list[str]:
    """The most likely letter of each row of ``[N, 4]`` letter log-probabilities."""
    arr = np.asarray(logprobs)
    if arr.ndim != 2 or arr.shape[1] != len(LETTERS):
        raise ValueError(f"logprobs must have shape [N, 4], got {arr.shape}")
    return [LETTERS[i] for i in arr.argmax(axis=1)]


def correct_flags(answers: Sequence[str], letters: Sequence[str]) -> np.ndarray:
    """``[N]`` int8: 1 where the letter is the answer, 0 where not, -1 where ``unparsed``."""
    if len(answers) != len(letters):
        raise ValueError(f"got {len(answers)} answers but {len(letters)} letters")
    return np.asarray(
        [-1 if got == UNPARSED else int(got == want) for want, got in zip(answers, letters, strict=True)],
        dtype=np.int8,
    )


def letter_prior(logprobs: np.ndarray, styles: Sequence[str]) -> np.ndarray:
    """``[N, 4]``: for each row, the mean letter log-probabilities over the rows of its style.

    Batch calibration (Zhou et al. 2024, "Batch Calibration"): a model's constant
    preference for a letter shows in the mean over the questions it is asked, whatever
    they are; only the model's outputs are used, never the answers.
    """
    values = np.asarray(logprobs, dtype=np.float64)
    labels = np.asarray(styles, dtype=object)
    if values.ndim != 2 or labels.shape != (values.shape[0],):
        raise ValueError(f"need [N, C] log-probabilities and N styles, got {values.shape} and {labels.shape}")
    prior = np.empty_like(values)
    for style in pd.unique(labels):
        rows = labels == style
        prior[rows] = values[rows].mean(axis=0)
    return prior


def calibrate(logprobs: np.ndarray, styles: Sequence[str]) -> np.ndarray:
    """``[N, 4]`` letter log-probabilities minus their style's letter prior (:func:`letter_prior`)."""
    return np.asarray(logprobs, dtype=np.float64) - letter_prior(logprobs, styles)


def completions_of(tokenizer: object, token_ids: np.ndarray) -> list[str]:
    """Decoded completions of ``[N, T]`` generated ids (``-1`` after a sequence stopped)."""
    return [tokenizer.decode([int(t) for t in row if t >= 0], skip_special_tokens=True) for row in token_ids]
