"""Pure tensor functions from logits to per-row lens metrics.

All functions take logits of shape ``[R, V]`` (any float dtype; the math runs in
float32 after subtracting each row's maximum) and return per-row tensors of shape
``[R]``.  Entropies are in nats.  Nothing here knows about models or generation.

:class:`TileStream` computes the same metrics from logits that arrive one vocabulary
tile at a time (online log-sum-exp), so ``[R, V]`` never has to exist at once; top-p
sets then come as :class:`NucleusSets` (bitsets plus id lists), whose adjacent-row
overlap :func:`adjacent_jaccard` computes exactly.
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
# A streamed row keeps as top-p candidates the tokens whose log-probability (against the mass seen
# so far) reaches max(log((1 - top_p) / V), CANDIDATE_LOG_P). The first bound is certain to hold the
# whole set (the tokens below it weigh less than 1 - top_p together); CANDIDATE_LOG_P keeps wide
# vocabularies to ~1.4k candidates per row instead of ~7.5k (gemma3-270m), and on the three embedded
# models every top-p = 0.6 set lay above it. A row whose set does not is decoded again in full.
CANDIDATE_LOG_P = -11.0
_WORD_BITS = 64
# Streamed sums run in blocks of at most this many logits: torch runs an op that small on the
# calling thread (its intra-op grain size), so no thread barrier is crossed per op. On a CPU shared
# with other work, a barrier waits for a descheduled thread: ~8 ms each, measured here on 2 cores.
_INLINE_LOGITS = 32768
# exp2 rather than exp: torch hands exp and sqrt to MKL's vector library inside a parallel loop of
# grain 2048, which crosses a barrier even for small blocks; exp2 keeps the 32768 grain.
_LOG2E = 1.4426950408889634


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


def log_norm_of(logits: torch.Tensor, max_logit: torch.Tensor, width: int = _INLINE_LOGITS) -> torch.Tensor:
    """``[R]`` float64 ``log sum exp(z - m)`` of ``[R, V]`` logits, summed in float64 over column blocks.

    For a row decoded in full again: its own normalizer, not the streamed one, whose tile products
    round differently (at ``top_p`` near 1 a normalizer off by 1e-5 leaves the target mass out of
    reach and the set grows to the whole vocabulary).  Blocks of ``width`` columns keep the float64
    sums to a fraction of the logits' memory.
    """
    total = torch.zeros(logits.shape[0], dtype=torch.float64, device=logits.device)
    for block in logits.split(width, dim=-1):
        total += torch.exp(block - max_logit[:, None]).sum(-1, dtype=torch.float64)
    return total.log()


def nucleus_given_norm(
    logits: torch.Tensor, max_logit: torch.Tensor, log_norm: torch.Tensor, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`nucleus` of ``[R, V]`` logits whose maximum and ``log sum exp(z - m)`` are known.

    The normalizer from :class:`TileStream` sums in float64; ``log_softmax`` sums in float32,
    whose ~1e-5 relative error over 262k terms can move a set's size by one.
    """
    logp = (logits - max_logit[:, None]).sub_(log_norm.float()[:, None])
    return _nucleus_from_logp(logp, check_top_p(top_p))


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


@dataclass(frozen=True)
class NucleusSets:
    """Top-p sets of ``R`` rows over a vocabulary of ``V`` tokens.

    Attributes:
        sizes: ``[R]`` int64 set sizes.
        bits: ``[R, ceil(V / 64)]`` int64 membership bitsets (bit ``i % 64`` of word ``i // 64``).
        rows: ``[M]`` int64 row of each listed member.
        ids: ``[M]`` int64 token id of each listed member.  A row's members are listed all or
            none: wide sets live in ``bits`` alone, which bounds the memory of the lists.
    """

    sizes: torch.Tensor
    bits: torch.Tensor
    rows: torch.Tensor
    ids: torch.Tensor

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    def last(self) -> NucleusSets:
        """The set of the last row alone (carried to the next chunk of rows)."""
        keep = self.rows == len(self) - 1
        return NucleusSets(self.sizes[-1:], self.bits[-1:], self.rows[keep] * 0, self.ids[keep])


def membership_bits(n_rows: int, vocab_size: int, device=None) -> torch.Tensor:
    """``[n_rows, ceil(V / 64)]`` int64 empty bitsets (see :class:`NucleusSets`)."""
    return torch.zeros(n_rows, -(-vocab_size // _WORD_BITS), dtype=torch.int64, device=device)


def set_bits(bits: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor) -> None:
    """Add token ``ids[m]`` to the set of row ``rows[m]`` in ``bits`` (in place; pairs distinct)."""
    words = rows * bits.shape[1] + ids // _WORD_BITS
    # Distinct powers of two never carry, so their sum is their bitwise or.
    bits.view(-1).scatter_add_(0, words, torch.bitwise_left_shift(torch.ones_like(ids), ids % _WORD_BITS))


def cat_sets(parts: Sequence[NucleusSets]) -> NucleusSets:
    """Rows of several :class:`NucleusSets` stacked in order."""
    offsets = torch.tensor([0, *[len(p) for p in parts]]).cumsum(0)
    return NucleusSets(
        torch.cat([p.sizes for p in parts]),
        torch.cat([p.bits for p in parts]),
        torch.cat([p.rows + int(o) for p, o in zip(parts, offsets, strict=False)]),
        torch.cat([p.ids for p in parts]),
    )


def _tally(index: torch.Tensor, n: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``[n]`` sums of ``weights`` (default ones, int64) by ``index``; ``bincount`` without its range scans."""
    weights = torch.ones_like(index) if weights is None else weights
    return weights.new_zeros(n).index_add_(0, index, weights)


def _bit(bits: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``[M]`` float64 membership (0 or 1) of token ``ids[m]`` in the set of row ``rows[m]``."""
    words = bits[rows, ids // _WORD_BITS]
    return (torch.bitwise_right_shift(words, ids % _WORD_BITS) & 1).double()


def popcount(words: torch.Tensor) -> torch.Tensor:
    """Number of set bits of each int64 word (SWAR; arithmetic shifts are masked off)."""
    words = words - ((words >> 1) & 0x5555555555555555)
    words = (words & 0x3333333333333333) + ((words >> 2) & 0x3333333333333333)
    words = (words + (words >> 4)) & 0x0F0F0F0F0F0F0F0F
    return ((words * 0x0101010101010101) >> 56) & 0xFF


def adjacent_jaccard(sets: NucleusSets) -> torch.Tensor:
    """``[R - 1]`` float32 Jaccard overlap ``|A & B| / |A | B|`` of the sets of rows ``r`` and ``r + 1``.

    Exact: a pair with a listed side tests that side's ids against the other side's bitset;
    only pairs of two wide sets count common bits word by word.
    """
    n = len(sets)
    listed = _tally(sets.rows, n) == sets.sizes
    inter = torch.zeros(n - 1, dtype=torch.float64, device=sets.sizes.device)
    left = listed[sets.rows] & (sets.rows < n - 1)  # members tested against the next row
    rows = sets.rows[left]
    inter += _tally(rows, n - 1, _bit(sets.bits, rows + 1, sets.ids[left]))
    right = (sets.rows > 0) & listed[sets.rows] & ~listed[(sets.rows - 1).clamp_min(0)]
    rows = sets.rows[right] - 1  # members tested against the previous, unlisted row
    inter += _tally(rows, n - 1, _bit(sets.bits, rows, sets.ids[right]))
    wide = torch.nonzero(~listed[:-1] & ~listed[1:]).squeeze(-1)
    inter[wide] = popcount(sets.bits[wide] & sets.bits[wide + 1]).sum(-1).double()
    union = sets.sizes[:-1] + sets.sizes[1:] - inter.long()
    return inter.float() / union.clamp_min(1).float()


@dataclass(frozen=True)
class StreamResult:
    """Metrics of ``R`` streamed rows.

    Attributes:
        entropy: ``[R]`` float32 Shannon entropy, nats.
        renyi: ``[R, A]`` float32 Renyi entropies, nats.
        nucleus_size: ``[R]`` int64 top-p set size, 0 where the candidates could not settle it.
        top1_id: ``[R]`` int64 argmax token id, -1 where a row kept no candidate (size 0 then).
        member_rows: ``[M]`` int64 row of each member of the settled sets.
        member_ids: ``[M]`` int64 token id of each member.
        max_logit: ``[R]`` float32 largest logit ``m``.
        log_norm: ``[R]`` float64 ``log sum exp(z - m)``.
    """

    entropy: torch.Tensor
    renyi: torch.Tensor
    nucleus_size: torch.Tensor
    top1_id: torch.Tensor
    member_rows: torch.Tensor
    member_ids: torch.Tensor
    max_logit: torch.Tensor
    log_norm: torch.Tensor


class TileStream:
    """Online metrics of ``R`` rows of logits that arrive one vocabulary tile at a time.

    Tiles are vocabulary-major, ``[T, R]`` (column ``r`` holds row ``r``'s logits of tokens
    ``start .. start + T``), the layout a ``weight @ hidden.T`` product yields.  Per row it
    keeps the running maximum ``m`` and the sums ``S0 = sum exp(z - m)``,
    ``S1 = sum exp(z - m) (z - m)`` and ``sum exp(alpha (z - m))``, rescaled when ``m``
    grows, so Shannon and Renyi entropies and the log-normalizer follow at the end.  Top-p
    candidates are the tokens above a threshold that only rises (see ``CANDIDATE_LOG_P``):
    every token left out lies below the final threshold, so a set whose crossing token
    lies above it is exact.  A row with more than ``cap`` candidates stops collecting and is
    reported unsettled (size 0), which bounds memory.

    Args:
        n_rows: ``R``.
        vocab_size: ``V``, the total over all tiles.
        top_p: Nucleus mass in ``(0, 1]``.
        alphas: Renyi orders.
        cap: Most candidates kept per row.
        device: Where the running sums live.
    """

    def __init__(
        self,
        n_rows: int,
        vocab_size: int,
        *,
        top_p: float,
        alphas: Sequence[float],
        cap: int,
        device,
    ):
        self.target = check_top_p(top_p) - MASS_TOL
        self.alphas = check_alphas(alphas)
        self.orders = [a for a in self.alphas if a not in (0.0, 1.0, math.inf)]
        self.log_floor = max(math.log(max(1.0 - self.target, 1e-30) / vocab_size), CANDIDATE_LOG_P)
        self.cap = cap
        f64 = dict(dtype=torch.float64, device=device)
        self.top = torch.full((n_rows,), torch.finfo(torch.float32).min, device=device)  # [R]
        self.norm = torch.zeros(n_rows, **f64)  # [R] S0
        self.moment = torch.zeros(n_rows, **f64)  # [R] S1
        self.powers = torch.zeros(n_rows, len(self.orders), **f64)  # [R, A'] power sums
        self.finite = torch.zeros(n_rows, dtype=torch.int64, device=device)  # [R] support size
        self.threshold = torch.full((n_rows,), -math.inf, device=device)  # [R] candidate logit floor
        self.count = torch.zeros(n_rows, dtype=torch.int64, device=device)  # [R] candidates kept
        self.found: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def add(self, tile: torch.Tensor, start: int) -> None:
        """Fold in ``[T, R]`` float32 logits of tokens ``start .. start + T``."""
        inline = _INLINE_LOGITS if tile.device.type == "cpu" else tile.numel()  # accelerators: whole tiles
        blocks = tile.split(max(1, inline // tile.shape[1]))  # views of [t, R]
        maxima = torch.stack([block.amax(0) for block in blocks])  # [n_blocks, R]
        top = torch.maximum(self.top, maxima.amax(0))
        self._rescale(top)
        sums = _tile_sums(blocks, top, self.orders)  # [2 + A', R]
        self.norm += sums[0]
        self.moment += sums[1]
        self.powers += sums[2:].T
        if 0.0 in self.alphas:
            self.finite += (tile > -math.inf).sum(0)
        self._collect(blocks, maxima, start)

    def _rescale(self, top: torch.Tensor) -> None:
        shift = (self.top - top).double()  # [R] <= 0; about -3e38 before the first tile
        scale = shift.exp()
        self.moment = scale * (self.moment + shift * self.norm)
        self.norm *= scale
        if self.orders:
            self.powers *= (shift[:, None] * shift.new_tensor(self.orders)).exp()
        self.top = top

    def _collect(self, blocks: Sequence[torch.Tensor], maxima: torch.Tensor, start: int) -> None:
        lse = self.top.double() + self.norm.log()  # [R] log-normalizer of the tiles seen so far
        level = torch.minimum((lse + self.log_floor).float(), self.top)  # the maximum is always kept
        self.threshold = torch.maximum(self.threshold, level)
        found = []
        for block, block_max in zip(blocks, maxima, strict=True):
            found.append(_block_candidates(block, block_max, self.threshold, start))
            start += block.shape[0]
        row, ids, values = (torch.cat(parts) for parts in zip(*found, strict=True))
        self.found.append((row, ids, values))
        self.count += _tally(row, len(self.count))
        self.threshold[self.count > self.cap] = math.inf

    def finish(self) -> StreamResult:
        """Entropies, Renyi entropies, and the top-p sets the candidates settle."""
        log_norm = self.norm.log()  # [R] log S0 = logsumexp(z) - m
        entropy = (log_norm - self.moment / self.norm).clamp_min(0.0)
        renyi = torch.stack([self._renyi(a, log_norm, entropy) for a in self.alphas], dim=-1)
        rows, ids, values = (torch.cat(parts) for parts in zip(*self.found, strict=True))
        keep = values >= self.threshold[rows]  # every token at or above the final threshold
        self.found = []
        size, top1, member = _settle(rows[keep], ids[keep], values[keep], self.top, log_norm, self.target)
        return StreamResult(entropy.float(), renyi.float(), size, top1, *member, self.top, log_norm)

    def _renyi(self, alpha: float, log_norm: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        if alpha == 1.0:
            return entropy
        if math.isinf(alpha):
            return log_norm  # -log max p
        if alpha == 0.0:
            return self.finite.double().log()
        log_sum = self.powers[:, self.orders.index(alpha)].log() - alpha * log_norm  # log sum p^alpha
        return (log_sum / (1.0 - alpha)).clamp_min(0.0)


def _block_candidates(block: torch.Tensor, block_max: torch.Tensor, threshold: torch.Tensor, start: int):
    """``(row, id, logit)`` of each logit of a ``[t, R]`` block at or above its row's threshold.

    Only the rows whose block maximum ``[R]`` reaches the threshold are scanned.
    """
    cols = torch.nonzero(block_max >= threshold).squeeze(-1)  # [c]
    part = block.index_select(1, cols)  # [t, c]
    pos, col = torch.nonzero(part >= threshold[cols], as_tuple=True)
    return cols[col], pos + start, part[pos, col]


def _tile_sums(blocks: Sequence[torch.Tensor], top: torch.Tensor, orders: Sequence[float]) -> torch.Tensor:
    """``[2 + A', R]`` float64 sums ``S0``, ``S1`` and ``sum exp(alpha (z - m))`` of ``[t, R]`` blocks.

    Each block holds at most ``_INLINE_LOGITS`` logits, so its ops run on the calling thread;
    the float32 block sums are added up in float64.
    """
    n_rows = blocks[0].shape[1]
    total = torch.zeros(2 + len(orders), n_rows, dtype=torch.float64, device=blocks[0].device)
    part = blocks[0].new_empty(2 + len(orders), n_rows)
    for block in blocks:
        _block_sums(block, top, orders, part)
        total += part
    return total


def _block_sums(block: torch.Tensor, top: torch.Tensor, orders: Sequence[float], out: torch.Tensor) -> None:
    shifted = block - top  # [t, R] z - m, <= 0
    shifted2 = shifted * _LOG2E  # [t, R] the same in bits
    for i, alpha in enumerate(orders):
        if alpha != 0.5:  # floored at exp(-_EXP_FLOOR), as in _renyi_from_logp
            terms = (shifted2 * alpha).clamp_min_(-_EXP_FLOOR * _LOG2E).exp2_()
            torch.sum(terms, 0, out=out[2 + i])
    if 0.5 in orders:  # p = sqrt(p) ** 2: one exponential serves both
        roots = shifted2.mul_(0.5).exp2_()
        torch.sum(roots, 0, out=out[2 + orders.index(0.5)])
        probs = roots * roots
    else:
        probs = shifted2.exp2_()  # [t, R] unnormalized probabilities
    torch.sum(probs, 0, out=out[0])
    torch.linalg.vecdot(probs, shifted, dim=0, out=out[1])


def _settle(rows, ids, values, top, log_norm, target):
    """Top-p sets of the rows whose candidates reach ``target`` (see :meth:`TileStream.finish`).

    Candidates are ranked by logit within each row (stable sorts keep ids ascending among
    ties) and weighed ``exp(z - m - log S0)`` in float64, so a set is the one float64
    arithmetic finds from the float32 logits (float32 log-softmax weights err by ~1e-6).
    """
    n = len(top)
    order = torch.sort(values, descending=True, stable=True).indices
    order = order[torch.sort(rows[order], stable=True).indices]
    rows, ids, values = rows[order], ids[order], values[order]
    weights = (values.double() - top.double()[rows] - log_norm[rows]).exp()  # [C] probabilities
    mass = torch.cat([weights.new_zeros(1), weights.cumsum(0)])  # [C + 1] mass before each candidate
    counts = _tally(rows, n)
    starts = counts.cumsum(0) - counts
    cum = mass[1:] - mass[starts][rows]  # [C] mass of each row's candidates down to this one
    need = _tally(rows, n, (cum < target).long()) + 1
    total = mass[starts + counts] - mass[starts]  # [R] mass of each row's candidates
    settled = (counts > 0) & (total >= target)
    size = torch.where(settled, need, 0)
    top1 = torch.where(counts > 0, torch.cat([ids, ids.new_full((1,), -1)])[starts], -1)
    member = (torch.arange(len(rows), device=top.device) - starts[rows]) < size[rows]
    return size, top1, (rows[member], ids[member])


def bytes_per_logit() -> int:
    """Peak working bytes per logit entry in :func:`row_metrics` (sizes chunk budgets)."""
    # logits f32 + logp f32 + probs f32 + bin index i64 + float64 weights + masks + temps
    return 48
