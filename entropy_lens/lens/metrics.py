"""Every lens metric of full rows of logits at once, from one float32 log-softmax.

:func:`row_metrics` combines the entropies of :mod:`entropy_lens.lens.entropy` and the top-p
search of :mod:`entropy_lens.lens.nucleus` for ``[R, V]`` logits that fit in memory together;
:func:`bytes_per_logit` is what such a row costs (it sizes the chunks of rows decoded in full).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from entropy_lens.lens.entropy import log_probs, renyi_from_logp
from entropy_lens.lens.nucleus import nucleus_from_logp


@dataclass(frozen=True)
class RowMetrics:
    """Metrics for ``R`` rows of logits.

    Attributes:
        entropy: ``[R]`` Shannon entropy, nats.
        renyi: ``[R, A]`` Renyi entropy for each requested alpha, nats.
        nucleus_size: ``[R]`` int64 size of the top-p set.
        top1_id: ``[R]`` int64 argmax token id.
        nucleus_mask: ``[R, V]`` bool membership of the top-p set.
    """

    entropy: torch.Tensor
    renyi: torch.Tensor
    nucleus_size: torch.Tensor
    top1_id: torch.Tensor
    nucleus_mask: torch.Tensor


def row_metrics(logits: torch.Tensor, *, top_p: float, alphas: Sequence[float]) -> RowMetrics:
    """Every per-row metric of ``[R, V]`` logits from one float32 log-softmax.

    The probabilities, Shannon entropy and maximum are computed once and shared by the
    Renyi orders (alpha 1 and inf reuse them) and the nucleus search.
    """
    logp = log_probs(logits)
    probs = logp.exp()
    entropy = (-torch.linalg.vecdot(probs, logp)).clamp_min(0.0)  # fused multiply-sum
    top_logp, top1 = logp.max(-1)
    shared = {"entropy": entropy, "top": top_logp, "probs": probs}
    renyi = torch.stack([renyi_from_logp(logp, a, **shared) for a in alphas], dim=-1)
    size, mask = nucleus_from_logp(logp, top_p, probs)
    return RowMetrics(entropy=entropy, renyi=renyi, nucleus_size=size, top1_id=top1, nucleus_mask=mask)


def bytes_per_logit() -> int:
    """Peak working bytes per logit entry in :func:`row_metrics` (sizes chunk budgets)."""
    # logits f32 + logp f32 + probs f32 + bin index i64 + float64 weights + masks + temps
    return 48
