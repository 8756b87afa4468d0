"""Batched, KV-cached generation that hands each step's per-block residuals to a callback.

At step ``t`` the callback receives the residual stream after every block at the
position that predicts generated token ``t`` (shape ``[B, L, d]``), the model's own
next-token logits there (``[B, V]``) and which rows are still generating.  Prompts
are token ids, left padded with an attention mask (:mod:`entropy_lens.model.batching`);
positions follow the mask, so a padded row computes what it would alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from entropy_lens.model.batching import left_pad, positions
from entropy_lens.model.hooks import record_residuals
from entropy_lens.model.lens_model import LensModel

# End-of-turn markers that chat templates close a reply with; used only when the
# tokenizer actually has them as tokens.
_END_OF_TURN = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "<|endoftext|>")

StepCallback = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], None]


@dataclass(frozen=True)
class GenerationSettings:
    """How tokens are chosen.

    Attributes:
        max_new_tokens: Token slots per prompt (> 0).
        do_sample: Sample from ``softmax(logits / temperature)`` instead of greedy.
        temperature: Sampling temperature (> 0).
        seed: Base seed; each prompt samples with its own generator (see
            :func:`row_seed`), so results do not depend on batching.
    """

    max_new_tokens: int
    do_sample: bool = False
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> GenerationSettings:
        """The settings of an extraction job's ``generation`` params (``max_new_tokens``, ``do_sample``,
        ``temperature``, ``seed``)."""
        return cls(section["max_new_tokens"], section["do_sample"], section["temperature"], section["seed"])


def stop_token_ids(lm: LensModel) -> list[int]:
    """EOS ids from the generation config and tokenizer, plus end-of-turn tokens it has."""
    ids: set[int] = set()
    gen_eos = getattr(getattr(lm.model, "generation_config", None), "eos_token_id", None)
    for value in (gen_eos, lm.tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    vocab = lm.tokenizer.get_vocab()
    ids.update(vocab[t] for t in _END_OF_TURN if t in vocab)
    return sorted(ids)


def row_seed(seed: int, row: int) -> int:
    """The sampling seed of prompt ``row`` of a call made with base ``seed``."""
    return seed * 1_000_003 + row


def _generators(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


def _choose(logits: torch.Tensor, settings: GenerationSettings, gens: list[torch.Generator]) -> torch.Tensor:
    if not settings.do_sample:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / settings.temperature, dim=-1)
    return torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(gens)])


@torch.inference_mode()
def generate(
    lm: LensModel,
    batch: Sequence[Sequence[int]],
    settings: GenerationSettings,
    on_step: StepCallback,
    *,
    row_seeds: Sequence[int] | None = None,
) -> torch.Tensor:
    """Generate up to ``max_new_tokens`` for a batch of token-id prompts.

    Args:
        lm: The model.
        batch: ``B`` prompts as token-id lists (each non-empty).
        settings: Token choice.
        on_step: Called as ``on_step(t, residuals [B, L, d], logits [B, V], alive [B])``.
        row_seeds: Sampling seed of each row (default ``row_seed(settings.seed, i)``).

    Returns:
        ``[B, T]`` int64 generated ids, ``-1`` after a row's stop token.
    """
    device = lm.device
    input_ids, mask = left_pad(batch, lm.tokenizer.pad_token_id, device)
    position_ids = positions(mask)
    stops = torch.as_tensor(stop_token_ids(lm), dtype=torch.long, device=device)
    seeds = row_seeds if row_seeds is not None else [row_seed(settings.seed, i) for i in range(len(batch))]
    gens = _generators(seeds, device)
    tokens = torch.full((len(batch), settings.max_new_tokens), -1, dtype=torch.long, device=device)
    alive = torch.ones(len(batch), dtype=torch.bool, device=device)
    with record_residuals(lm) as slots:
        out = lm.model(
            input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=True, logits_to_keep=1
        )
        for step in range(settings.max_new_tokens):
            logits = out.logits[:, -1, :].float()  # [B, V]
            on_step(step, torch.stack(slots, dim=1), logits, alive.clone())  # type: ignore[arg-type]
            chosen = torch.where(alive, _choose(logits, settings, gens), lm.tokenizer.pad_token_id)
            tokens[:, step] = torch.where(alive, chosen, -1)
            alive &= ~torch.isin(chosen, stops)
            if step + 1 == settings.max_new_tokens or not bool(alive.any()):
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            position_ids = position_ids[:, -1:] + 1
            out = lm.model(
                input_ids=chosen[:, None],
                attention_mask=mask,
                position_ids=position_ids,
                cache=out.cache,
                use_cache=True,
            )
    return tokens
