"""Mixture-of-experts routing: find each block's router, record it, and summarize its distribution.

A block is a mixture-of-experts (MoE) layer when it holds a module with both a ``gate``
(the router: hidden states -> one logit per expert) and ``experts`` child, as the MoE
decoders transformers ships do (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE); other blocks are
dense.  Nothing is decided from a model's name.

At every generation step :func:`record_routing` keeps, for each MoE layer, the router
logits at the last position (the position the lens reads).  :func:`routing_metrics`
turns them into the router distribution's Shannon entropy (``softmax`` over experts,
nats; at most ``log E``) and its top-k expert set (ids by decreasing probability), with
NaN / -1 on dense layers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from entropy_lens.store import schema


@dataclass(frozen=True)
class Router:
    """The routing parts of one MoE block.

    Attributes:
        moe: The sparse MoE module (holds ``gate`` and ``experts``).
        gate: The router: ``[tokens, d] -> [tokens, E]`` logits (first output).
        top_k: Experts each token is sent to.
        n_experts: Experts ``E``.
    """

    moe: nn.Module
    gate: nn.Module
    top_k: int
    n_experts: int


def find_routers(blocks: Sequence[nn.Module], config: object | None = None) -> list[Router | None]:
    """The router of every block, ``None`` for dense blocks.

    Args:
        blocks: The decoder blocks.
        config: The model config, read for ``num_experts_per_tok`` when the router does
            not carry ``top_k`` itself.

    Raises:
        ValueError: naming the block whose router exposes no expert count or top-k.
    """
    return [_router_of(i, block, config) for i, block in enumerate(blocks)]


def _router_of(index: int, block: nn.Module, config: object | None) -> Router | None:
    moe = next((m for m in block.modules() if _is_moe(m)), None)
    if moe is None:
        return None
    gate = moe.gate
    weight = getattr(gate, "weight", None)
    n_experts = getattr(gate, "num_experts", None) or (weight.shape[0] if isinstance(weight, torch.Tensor) else None)
    top_k = getattr(gate, "top_k", None) or getattr(moe, "top_k", None) or getattr(config, "num_experts_per_tok", None)
    if not n_experts or not top_k:
        raise ValueError(
            f"block {index} ({type(moe).__name__}) has a router but exposes no expert count or top-k "
            "(looked for gate.num_experts / gate.weight and gate.top_k / top_k / config.num_experts_per_tok)"
        )
    return Router(moe, gate, int(top_k), int(n_experts))


def _is_moe(module: nn.Module) -> bool:
    parts = (getattr(module, "gate", None), getattr(module, "experts", None))
    return all(isinstance(part, nn.Module) for part in parts)


def max_top_k(routers: Sequence[Router | None]) -> int:
    """The largest top-k over MoE layers; 0 for a dense model."""
    return max((r.top_k for r in routers if r is not None), default=0)


@contextlib.contextmanager
def record_routing(routers: Sequence[Router | None]) -> Iterator[list[torch.Tensor | None]]:
    """Hook every router to keep its logits at the last position (``[B, E]`` float32 each).

    A pre-hook on the MoE module reads the batch shape ``[B, S, d]`` of its input (routers
    see flattened ``[B*S, d]`` tokens); the router's hook then keeps position ``S - 1`` of
    every row.  Dense layers' slots stay ``None``.  The hooks are removed when the context
    exits, also on error.

    Yields:
        One slot per block, refreshed by every forward pass.
    """
    slots: list[torch.Tensor | None] = [None] * len(routers)
    handles = []
    try:
        for index, router in enumerate(routers):
            if router is not None:
                handles += _hooks(index, router, slots)
        yield slots
    finally:
        for handle in handles:
            handle.remove()


def _hooks(index: int, router: Router, slots: list[torch.Tensor | None]) -> list:
    shape: list[torch.Size] = []

    def on_input(_module, args, kwargs):
        hidden = args[0] if args else next(iter(kwargs.values()))
        shape[:] = [hidden.shape[:-1]]

    def on_router(_module, _args, output):
        logits = output[0] if isinstance(output, (tuple, list)) else output
        slots[index] = logits.reshape(*shape[0], -1)[:, -1, :].detach().float()  # [B, E]

    return [
        router.moe.register_forward_pre_hook(on_input, with_kwargs=True),
        router.gate.register_forward_hook(on_router),
    ]


def routing_metrics(
    slots: Sequence[torch.Tensor | None], routers: Sequence[Router | None]
) -> tuple[np.ndarray, np.ndarray]:
    """Entropy and top-k experts of every layer's router distribution for ``B`` rows.

    Args:
        slots: Per block, ``[B, E]`` router logits, or ``None`` for a dense block.
        routers: The blocks' routers (:func:`find_routers`); ``top_k`` slots are filled per
            layer, up to the model's largest top-k (:func:`max_top_k`).

    Returns:
        ``(entropy [B, L] float32 nats, NaN on dense layers; experts [B, L, K] int32,
        expert ids by decreasing router probability, -1 on dense layers)``.
    """
    rows = next(s.shape[0] for s in slots if s is not None)
    entropy = np.full((rows, len(slots)), np.nan, np.float32)
    experts = np.full((rows, len(slots), max_top_k(routers)), schema.MASKED_INT, np.int32)
    for layer, (logits, router) in enumerate(zip(slots, routers, strict=True)):
        if logits is None or router is None:
            continue
        logp = torch.log_softmax(logits.float(), dim=-1)  # [B, E]
        entropy[:, layer] = (-(logp.exp() * logp).sum(-1)).cpu().numpy()
        experts[:, layer, : router.top_k] = logits.topk(router.top_k, dim=-1).indices.cpu().numpy()
    return entropy, experts
