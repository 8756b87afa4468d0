"""Answer choices read off the model's own next-token distribution after a prompt.

A multiple-choice answer is read as the harness reads it: the log-probability of each
choice's continuation (``prompt + separator + choice``) at the first position where the
continuations differ.  Two ways to get it, equal by construction:

* :func:`choice_logprobs`: one forward pass per prompt, no generation (the layer-skip
  experiment scores this way under each condition);
* during extraction: the first generation step of :func:`entropy_lens.lens.text.extract_profiles`
  already computes the model's own next-token distribution right after the prompt, so a
  :class:`Readout` takes the choices' log-probabilities from it at no extra cost
  (:func:`readout_of` says which prompts that position serves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from entropy_lens.lens.decoding import gather_logprobs
from entropy_lens.lens.encoding import encode_prompts
from entropy_lens.lens.text import Readout
from entropy_lens.model.batching import batches, padded
from entropy_lens.model.lens_model import LensModel

RAW_SEPARATOR = " "


@dataclass(frozen=True)
class ChoiceQuery:
    """Token ids to feed and the id of each choice's first differing token, read at the last position."""

    input_ids: list[int]
    choice_ids: tuple[int, ...]


def separator_of(chat_template: bool) -> str:
    """Text between prompt and choice: ``" "`` after a raw prompt (``"Answer: A"``), nothing
    after a chat template's assistant header (which ends in a newline for the registry's models)."""
    return "" if chat_template else RAW_SEPARATOR


def choice_queries(
    tokenizer: object,
    prompts: Sequence[str],
    labels: Sequence[str],
    separator: str = RAW_SEPARATOR,
    *,
    add_special_tokens: bool = True,
) -> list[ChoiceQuery]:
    """Where to read the choices after each prompt.

    Encodes ``prompt + separator + label`` for each label (as the harness encodes
    context + continuation) and splits at the first token where they differ: the
    common part is fed, the differing tokens are read.  Where ``" A"`` is one token this
    is the choice token right after the prompt; where the space is a token of its own
    it is fed and the choice is read after it.

    Args:
        tokenizer: The model's tokenizer.
        prompts: Prompt texts as the model sees them (rendered).
        labels: The ``C`` choice texts, e.g. ``A``..``D``.
        separator: Text between prompt and choice.
        add_special_tokens: Let the tokenizer add its BOS (off for chat-rendered text,
            which carries its own).

    Raises:
        ValueError: naming the prompt when the choices do not start with distinct tokens.
    """
    texts = [prompt + separator + label for prompt in prompts for label in labels]
    encoded = tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]
    n = len(labels)
    return [_split(encoded[i * n : (i + 1) * n], prompt, labels) for i, prompt in enumerate(prompts)]


def _split(encoded: list[list[int]], prompt: str, labels: Sequence[str]) -> ChoiceQuery:
    shared = 0
    while all(len(e) > shared for e in encoded) and len({e[shared] for e in encoded}) == 1:
        shared += 1
    ids = tuple(e[shared] if len(e) > shared else -1 for e in encoded)
    if shared == 0 or -1 in ids or len(set(ids)) != len(labels):
        raise ValueError(
            f"the choices {'-'.join(labels)} after prompt ...{prompt[-40:]!r} do not start with {len(labels)} "
            f"distinct tokens (ids {ids} after {shared} shared tokens); check the tokenizer or the separator"
        )
    return ChoiceQuery(list(encoded[0][:shared]), ids)


def rendered_queries(
    lm: LensModel, prompts: Sequence[str], labels: Sequence[str], *, chat_template: bool, separator: str | None = None
) -> tuple[list[ChoiceQuery], list[list[int]]]:
    """The :func:`choice_queries` of prompts as the model sees them, and their extraction encoding.

    Returns:
        ``(queries, encoded)``: one query per prompt, and the token ids
        :func:`entropy_lens.lens.encoding.encode_prompts` feeds for it.
    """
    encoded, rendered = encode_prompts(lm, prompts, chat_template=chat_template)
    sep = separator if separator is not None else separator_of(chat_template)
    queries = choice_queries(lm.tokenizer, rendered, labels, sep, add_special_tokens=not chat_template)
    return queries, encoded


def readout_of(lm: LensModel, prompts: Sequence[str], labels: Sequence[str], *, chat_template: bool) -> Readout:
    """The :class:`Readout` of ``labels`` for extraction from ``prompts``.

    A prompt's choices are readable at the first generated position when the query feeds
    exactly the prompt's own encoding (the usual case: ``" A"`` is one token); otherwise
    (the separator is a token of its own, or appending the choice re-tokenizes the
    prompt's end) its row is ``-1`` and :func:`choice_logprobs` must score it.
    """
    queries, encoded = rendered_queries(lm, prompts, labels, chat_template=chat_template)
    ids = np.full((len(queries), len(labels)), -1, dtype=np.int64)
    for row, (query, fed) in enumerate(zip(queries, encoded, strict=True)):
        if query.input_ids == list(fed):
            ids[row] = query.choice_ids
    return Readout(tuple(labels), ids)


@torch.inference_mode()
def choice_logprobs(
    lm: LensModel,
    prompts: Sequence[str],
    labels: Sequence[str],
    *,
    batch_size: int = 8,
    chat_template: bool = False,
    separator: str | None = None,
) -> np.ndarray:
    """Log-probability of each choice as the next token after each prompt, by a forward pass.

    Prompts are length-sorted into batches, left padded with an attention mask and
    mask-following position ids, one forward pass per batch, no cache.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts (before any chat template).
        labels: The ``C`` choices.
        batch_size: Prompts per forward pass.
        chat_template: Render each prompt as a user turn, as
            :func:`entropy_lens.lens.encoding.encode_prompts` does; the choice then opens the reply.
        separator: Text between the (rendered) prompt and the choice; default :func:`separator_of`.

    Returns:
        ``[N, C]`` float32 log-probabilities (nats).
    """
    if isinstance(prompts, str) or not len(prompts):
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    queries, _ = rendered_queries(lm, prompts, labels, chat_template=chat_template, separator=separator)
    out = np.empty((len(queries), len(labels)), dtype=np.float32)
    for rows in batches([len(q.input_ids) for q in queries], batch_size):
        out[rows] = _score_batch(lm, [queries[r] for r in rows])
    return out


def _score_batch(lm: LensModel, queries: list[ChoiceQuery]) -> np.ndarray:
    inputs = padded([q.input_ids for q in queries], lm.tokenizer.pad_token_id, lm.device)
    logits = lm.model(**inputs, use_cache=False, logits_to_keep=1).logits[:, -1, :]  # [B, V]
    return gather_logprobs(logits, [q.choice_ids for q in queries])
