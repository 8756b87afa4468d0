"""MMLU correctness: answer-letter log-likelihood and completion-only letter parsing.

Primary label: the letter whose token the model finds most likely right after the
prompt (the lm-evaluation-harness way), so every question gets an answer.  Secondary
label: the letter parsed from the generated completion alone, never from the prompt,
or ``"unparsed"``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from entropy_lens.datasets import ANSWER, LETTERS, STYLE
from entropy_lens.generation import left_pad
from entropy_lens.lens import encode_prompts
from entropy_lens.models import LensModel
from entropy_lens.schema import MODEL

logger = logging.getLogger(__name__)

UNPARSED = "unparsed"
LL_LETTER = "ll_letter"
PARSED_LETTER = "parsed_letter"
DEFAULT_SEPARATOR = " "

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
            :func:`entropy_lens.lens.encode_prompts` does; the letter then opens the reply.
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


def accuracy_table(results: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per model and style.

    Args:
        results: One row per (model, prompt) with columns ``model``, ``style``,
            ``answer``, ``ll_letter`` and ``parsed_letter``.

    Returns:
        Columns ``model, style, n, accuracy_ll, accuracy_parsed, unparsed_rate``;
        ``accuracy_parsed`` counts unparsed completions as wrong.
    """
    missing = [c for c in (MODEL, STYLE, ANSWER, LL_LETTER, PARSED_LETTER) if c not in results.columns]
    if missing:
        raise ValueError(f"results lack columns {missing}; they have {list(results.columns)}")
    flags = results.assign(
        correct_ll=results[LL_LETTER] == results[ANSWER],
        correct_parsed=results[PARSED_LETTER] == results[ANSWER],
        unparsed=results[PARSED_LETTER] == UNPARSED,
    )
    table = flags.groupby([MODEL, STYLE], sort=True).agg(
        n=(ANSWER, "size"),
        accuracy_ll=("correct_ll", "mean"),
        accuracy_parsed=("correct_parsed", "mean"),
        unparsed_rate=("unparsed", "mean"),
    )
    return table.reset_index()
