"""Pure tensor functions from logits to per-row lens metrics.

All functions take logits of shape ``[R, V]`` (any float dtype; the math runs in
float32 after subtracting each row's maximum) and return per-row tensors of shape
``[R]``.  Entropies are in nats.  Nothing here knows about models or generation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Cumulative probability mass is compared with ``top_p - MASS_TOL``: float32 sums of a
# full distribution land within ~1e-7 of 1, so ``top_p = 1`` still closes the nucleus.
MASS_TOL = 1e-6
_HIST_BINS = 1024
_MAX_CANDIDATES = 2048
_MAX_LEVELS = 6
_EXP_FLOOR = 40.0
# Rows whose top-p set lies within their _TOPK_FIRST most probable tokens skip the histogram.
_TOPK_FIRST = 256


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


def check_top_p(top_p: float) -> float:
    """Return ``top_p`` as float or raise ``ValueError`` unless ``0 < top_p <= 1``."""
    if not isinstance(top_p, (int, float)) or not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")
    return float(top_p)


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
    return _renyi_from_logp(log_probs(logits), alpha)


def _renyi_from_logp(
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
    # log sum_i exp(alpha * logp_i), shifted by the row maximum; terms below exp(-_EXP_FLOOR) of
    # the largest are raised to it (relative error <= V * exp(-_EXP_FLOOR)), which keeps exp
    # out of its slow underflow path.
    scaled = (logp - top[:, None]).mul_(alpha).clamp_min_(-_EXP_FLOOR)
    log_sum = scaled.exp_().sum(-1).log() + alpha * top
    return (log_sum / (1.0 - alpha)).clamp_min(0.0)


def nucleus(logits: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-p set: the smallest set of most probable tokens whose mass reaches ``top_p``.

    Exact without a full sort: the crossing token is located by refining a
    histogram of log-probabilities until few candidates remain, which are then ranked
    with ``topk``.  Among exactly tied probabilities the size is exact and the members
    are an arbitrary choice among the ties.

    Args:
        logits: ``[R, V]`` unnormalized scores.
        top_p: Target mass in ``(0, 1]``.

    Returns:
        ``(size, mask)``: ``[R]`` int64 set sizes and ``[R, V]`` bool membership.
    """
    top_p = check_top_p(top_p)
    return _nucleus_from_logp(log_probs(logits), top_p)


def _nucleus_from_logp(
    logp: torch.Tensor, top_p: float, probs: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    probs = logp.exp() if probs is None else probs
    target = top_p - MASS_TOL
    size, member = _nucleus_by_topk(probs, target)
    rest = torch.nonzero(size == 0).squeeze(-1)
    if rest.numel():
        size[rest], member[rest] = _nucleus_by_histogram(logp[rest], probs[rest], target)
    return size, member


def _nucleus_by_topk(probs: torch.Tensor, target: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact sets for rows whose nucleus is within the top ``_TOPK_FIRST``; size 0 elsewhere."""
    vals, ids = probs.topk(min(_TOPK_FIRST, probs.shape[-1]), dim=-1, sorted=True)
    cum = vals.double().cumsum(-1)
    reached = cum[:, -1] >= target
    need = torch.where(reached, (cum < target).sum(-1) + 1, 0)
    chosen = torch.arange(vals.shape[-1], device=probs.device)[None, :] < need[:, None]
    member = torch.zeros_like(probs, dtype=torch.bool).scatter_(1, ids, chosen)
    return need, member


def _nucleus_by_histogram(logp: torch.Tensor, probs: torch.Tensor, target: float):
    """Exact sets by refining a histogram of log-probabilities (for wide nuclei)."""
    member = torch.zeros_like(probs, dtype=torch.bool)
    cand = torch.ones_like(member)
    mass_above = torch.zeros(probs.shape[0], dtype=torch.float64, device=probs.device)
    lo, hi = logp.min(-1).values, logp.max(-1).values
    for _ in range(_MAX_LEVELS):
        if int(count_true(cand).max()) <= _MAX_CANDIDATES:
            break
        lo, hi = _refine(logp, probs, cand, member, mass_above, lo, hi, target)
    _close_with_topk(probs, cand, member, mass_above, target)
    return count_true(member), member


def _refine(logp, probs, cand, member, mass_above, lo, hi, target):
    """One histogram level: move whole bins above the crossing bin into ``member``."""
    width = (hi - lo).clamp_min(1e-12)
    scale = (_HIST_BINS / width)[:, None]
    idx = ((logp - lo[:, None]) * scale).long().clamp_(0, _HIST_BINS - 1)  # [R, V] bins
    weight = torch.where(cand, probs, 0.0)
    bin_mass = torch.zeros(probs.shape[0], _HIST_BINS, dtype=probs.dtype, device=probs.device)
    bin_mass = bin_mass.scatter_add_(1, idx, weight).double()
    cum_from_top = bin_mass.flip(-1).cumsum(-1) + mass_above[:, None]
    n_full = (cum_from_top < target).sum(-1).clamp_max(_HIST_BINS - 1)
    crossing = _HIST_BINS - 1 - n_full  # [R] bin holding the token that reaches top_p
    bins = torch.arange(_HIST_BINS, device=probs.device)
    mass_above += torch.where(bins[None, :] > crossing[:, None], bin_mass, 0.0).sum(-1)
    member |= cand & (idx > crossing[:, None])
    cand &= idx == crossing[:, None]
    new_lo = lo + crossing * width / _HIST_BINS
    return new_lo, new_lo + width / _HIST_BINS


def _close_with_topk(probs, cand, member, mass_above, target) -> None:
    """Rank the remaining candidates and add the fewest that reach ``target``."""
    k = int(count_true(cand).max())
    if k == 0:
        return
    vals, ids = torch.where(cand, probs, -1.0).topk(k, dim=-1, sorted=True)
    cum = vals.clamp_min(0.0).double().cumsum(-1) + mass_above[:, None]
    need = (cum < target).sum(-1) + 1
    need = torch.minimum(need, count_true(cand))
    chosen = torch.arange(k, device=probs.device)[None, :] < need[:, None]
    member |= torch.zeros_like(member).scatter_(1, ids, chosen)


def count_true(mask: torch.Tensor) -> torch.Tensor:
    """``[R]`` int64 number of ``True`` entries in each row of a ``[R, V]`` bool mask.

    Summing a bool tensor converts every entry to int64 first; here eight entries are
    read as one int64 word instead (each byte is 0 or 1), and the bytes of a word are
    added by shifts, which stay inside each byte because no byte sum exceeds 8.
    """
    packable = mask.stride(-1) == 1 and all(
        n % 8 == 0 for n in (mask.shape[-1], mask.storage_offset(), *mask.stride()[:-1])
    )
    if not packable:
        return mask.view(torch.uint8).sum(-1, dtype=torch.int64)
    words = mask.view(torch.int64)
    words = words + (words >> 8)
    words = words + (words >> 16)
    words = words + (words >> 32)
    return (words & 0xFF).sum(-1)


def jaccard(mask_a: torch.Tensor, mask_b: torch.Tensor) -> torch.Tensor:
    """Row-wise Jaccard overlap ``|A & B| / |A | B|`` of two ``[R, V]`` bool masks."""
    inter = count_true(mask_a & mask_b).float()
    union = count_true(mask_a | mask_b).float()
    return inter / union.clamp_min(1.0)


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
    renyi = torch.stack([_renyi_from_logp(logp, a, **shared) for a in alphas], dim=-1)
    size, mask = _nucleus_from_logp(logp, top_p, probs)
    return RowMetrics(entropy=entropy, renyi=renyi, nucleus_size=size, top1_id=top1, nucleus_mask=mask)


def bytes_per_logit() -> int:
    """Peak working bytes per logit entry in :func:`row_metrics` (sizes chunk budgets)."""
    # logits f32 + logp f32 + probs f32 + bin index i64 + float64 weights + masks + temps
    return 48
