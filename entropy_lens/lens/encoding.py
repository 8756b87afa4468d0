"""Prompt texts as the token ids the lens feeds: the chat template, the empty prompt, the context window."""

from __future__ import annotations

from collections.abc import Sequence

from entropy_lens.model.loading import LensModel


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
