"""Prompt texts as the token ids the lens feeds: the chat template, the empty prompt, the context window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from entropy_lens.model.lens_model import LensModel


@dataclass(frozen=True)
class PromptSettings:
    """How prompts are fed to the model.

    Attributes:
        batch_size: Prompts per forward pass (> 0); prompts are length-sorted into batches, and a
            prompt's profile does not depend on its batch.
        chat_template: Render each prompt as a user turn with the model's chat template.
    """

    batch_size: int = 8
    chat_template: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not isinstance(self.chat_template, bool):
            raise TypeError(f"chat_template must be True or False, got {self.chat_template!r}")

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> PromptSettings:
        """The settings of an extraction job's ``generation`` params (``batch_size``, ``chat_template``)."""
        return cls(section["batch_size"], section["chat_template"])


def blank_prompt_ids(tokenizer) -> list[int]:
    """Token ids of the empty prompt: the beginning-of-sequence token alone.

    Models without a BOS token (Qwen, GPT-2 style) start documents after their
    end-of-text token, which is then used instead.  Never a doubled BOS.
    """
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return [int(token_id)]
    raise ValueError("tokenizer has neither a BOS nor an EOS token: the empty prompt has no encoding")


def encode_prompts(lm: LensModel, prompts: Sequence[str], *, chat_template: bool) -> tuple[list[list[int]], list[str]]:
    """Token ids and rendered text of each prompt (the chat template applied if asked)."""
    tok = lm.tokenizer
    if chat_template and not getattr(tok, "chat_template", None):
        raise ValueError(f"model {lm.name!r} has no chat template; set chat_template=False")
    rendered = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        if chat_template
        else p
        for p in prompts
    ]
    ids = [
        blank_prompt_ids(tok) if text == "" else tok(text, add_special_tokens=not chat_template)["input_ids"]
        for text in rendered
    ]
    empty = [i for i, row in enumerate(ids) if not row]
    if empty:
        raise ValueError(f"prompt {empty[0]} ({prompts[empty[0]]!r}) encodes to no tokens for {lm.name!r}")
    return ids, rendered


def check_context(lm: LensModel, encoded: Sequence[Sequence[int]], max_new_tokens: int, ids: Sequence[str]) -> None:
    """Refuse, before any work, prompts that would run past the model's context window.

    Raises:
        ValueError: naming the longest such prompt, its length and the window (GPT-2's is
            1,024 tokens: some MMLU questions do not fit it).
    """
    window = getattr(lm.model.config, "max_position_embeddings", None) or getattr(lm.model.config, "n_positions", None)
    if not window:
        return
    need = [len(e) + max_new_tokens for e in encoded]
    over = [i for i, n in enumerate(need) if n > window]
    if over:
        worst = max(over, key=need.__getitem__)
        raise ValueError(
            f"{len(over)} prompts need more than {lm.name}'s context of {window} tokens, e.g. {ids[worst]!r} "
            f"({len(encoded[worst])} prompt + {max_new_tokens} new tokens); leave the model out of this "
            "dataset (datasets.<name>.models) or shorten the prompts"
        )
