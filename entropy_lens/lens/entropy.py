"""Shannon and Rényi entropies of rows of logits.

All functions take logits of shape ``[R, V]`` (any float dtype; the math runs in
float32 after subtracting each row's maximum) and return per-row tensors of shape
``[R]``.  Entropies are in nats.  Nothing here knows about models or generation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

# Power sums floor each term at exp(-EXP_FLOOR) of the row's largest, which keeps exp out of its slow
# underflow path; the streamed sums of :mod:`entropy_lens.lens.stream` floor at the same level.
EXP_FLOOR = 40.0


def check_alphas(alphas: Sequence[float]) -> tuple[float, ...]:
    """Return ``alphas`` as a tuple of floats or raise ``ValueError`` for negatives/empty."""
    values = tuple(float(a) for a in alphas)
    if not values:
        raise ValueError("alphas must name at least one Renyi order, got an empty list")
    bad = [a for a in values if math.isnan(a) or a < 0]
    if bad:
        raise ValueError(f"Renyi alpha must be >= 0 (inf allowed), got {bad[0]!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"Renyi alphas must be distinct, got {list(values)!r}")
    return values


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """``[R, V]`` log-softmax in float32."""
    return torch.log_softmax(logits.float(), dim=-1)


def shannon_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy ``-sum p log p`` of ``softmax(logits)`` per row, in nats.

    Args:
        logits: ``[R, V]`` unnormalized scores.

    Returns:
        ``[R]`` float32 entropy in ``[0, log V]``.
    """
    return _shannon_from_logp(log_probs(logits))


def _shannon_from_logp(logp: torch.Tensor) -> torch.Tensor:
    # Logits are finite, so logp is finite and 0 * logp stays 0 where p underflows.
    return (-(logp.exp() * logp).sum(-1)).clamp_min(0.0)


def renyi_entropy(logits: torch.Tensor, alpha: float) -> torch.Tensor:
    """Renyi entropy ``log(sum p^alpha) / (1 - alpha)`` per row, in nats.

    ``alpha = 1`` is Shannon entropy, ``alpha = inf`` min-entropy ``-log max p`` and
    ``alpha = 0`` the log of the support size.

    Args:
        logits: ``[R, V]`` unnormalized scores.
        alpha: Order, ``>= 0``.

    Returns:
        ``[R]`` float32 entropy in ``[0, log V]``.
    """
    (alpha,) = check_alphas([alpha])
    return renyi_from_logp(log_probs(logits), alpha)


def renyi_from_logp(
    logp: torch.Tensor,
    alpha: float,
    *,
    entropy: torch.Tensor | None = None,
    top: torch.Tensor | None = None,
    probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Renyi entropy from ``[R, V]`` log-probabilities; pass what is already computed
    (Shannon ``entropy``, row maximum ``top``, ``probs``) to reuse it."""
    if alpha == 1.0:
        return _shannon_from_logp(logp) if entropy is None else entropy
    top = logp.max(-1).values if top is None else top
    if math.isinf(alpha):
        return -top
    if alpha == 0.0:
        return torch.log((logp > -math.inf).sum(-1).float())
    if alpha == 0.5:  # 2 log sum sqrt(p): a square root instead of an exponential
        probs = logp.exp() if probs is None else probs
        return (2.0 * probs.sqrt().sum(-1).log()).clamp_min(0.0)
    # log sum_i exp(alpha * logp_i), shifted by the row maximum; terms below exp(-EXP_FLOOR) of
    # the largest are raised to it (relative error <= V * exp(-EXP_FLOOR)), which keeps exp
    # out of its slow underflow path.
    scaled = (logp - top[:, None]).mul_(alpha).clamp_min_(-EXP_FLOOR)
    log_sum = scaled.exp_().sum(-1).log() + alpha * top
    return (log_sum / (1.0 - alpha)).clamp_min(0.0)
