"""Top-p nucleus sets: the exact search over full rows of logits, and sets as bitsets.

:func:`nucleus` finds the smallest set of most probable tokens whose mass reaches
``top_p`` for ``[R, V]`` logits, as ``[R]`` sizes and an ``[R, V]`` bool mask; :func:`jaccard`
compares two masks row by row.  :class:`NucleusSets` hold the sets of many rows as bitsets
plus id lists (what the streamed decoding of :mod:`entropy_lens.lens.stream` yields), whose
overlap :func:`pair_jaccard` computes exactly for any pairs of rows (adjacent rows:
:func:`adjacent_jaccard`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from entropy_lens.lens.entropy import log_probs

# Cumulative probability mass is compared with ``top_p - MASS_TOL``: float32 sums of a
# full distribution land within ~1e-7 of 1, so ``top_p = 1`` still closes the nucleus.
MASS_TOL = 1e-6
_HIST_BINS = 1024
_MAX_CANDIDATES = 2048
_MAX_LEVELS = 6
# Rows whose top-p set lies within their _TOPK_FIRST most probable tokens skip the histogram.
_TOPK_FIRST = 256
_WORD_BITS = 64


def check_top_p(top_p: float) -> float:
    """Return ``top_p`` as float or raise ``ValueError`` unless ``0 < top_p <= 1``."""
    if not isinstance(top_p, (int, float)) or not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")
    return float(top_p)


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
    return nucleus_from_logp(log_probs(logits), top_p)


def nucleus_given_norm(
    logits: torch.Tensor, max_logit: torch.Tensor, log_norm: torch.Tensor, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`nucleus` of ``[R, V]`` logits whose maximum and ``log sum exp(z - m)`` are known.

    The normalizer from :class:`~entropy_lens.lens.stream.TileStream` (or
    :func:`~entropy_lens.lens.stream.log_norm_of`) sums in float64; ``log_softmax`` sums in
    float32, whose ~1e-5 relative error over 262k terms can move a set's size by one.  ``top_p`` is the
    decoding's (:class:`~entropy_lens.lens.decoding.LensSettings` checked it).
    """
    logp = (logits - max_logit[:, None]).sub_(log_norm.float()[:, None])
    return nucleus_from_logp(logp, top_p)


def nucleus_from_logp(
    logp: torch.Tensor, top_p: float, probs: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`nucleus` of ``[R, V]`` log-probabilities; pass ``probs`` (their exponentials) if already computed."""
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
        lo, hi = _refine(logp, probs, cand=cand, member=member, mass_above=mass_above, bounds=(lo, hi), target=target)
    _close_with_topk(probs, cand, member, mass_above, target)
    return count_true(member), member


def _refine(
    logp: torch.Tensor,
    probs: torch.Tensor,
    *,
    cand: torch.Tensor,
    member: torch.Tensor,
    mass_above: torch.Tensor,
    bounds: tuple[torch.Tensor, torch.Tensor],
    target: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One histogram level: move whole bins above the crossing bin into ``member``.

    ``logp`` and ``probs`` are ``[R, V]``; ``cand`` and ``member`` ``[R, V]`` bool masks and ``mass_above``
    the ``[R]`` float64 mass already in ``member``, all three updated in place; ``bounds`` the ``[R]``
    log-probability range still searched. Returns the next level's bounds."""
    lo, hi = bounds
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


def tally(index: torch.Tensor, n: int, weights: torch.Tensor | None = None) -> torch.Tensor:
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
    """``[R - 1]`` float32 Jaccard overlap ``|A & B| / |A | B|`` of the sets of rows ``r`` and ``r + 1``."""
    n = len(sets)
    rows = torch.arange(n - 1, device=sets.sizes.device)
    return pair_jaccard(sets, rows, rows + 1)


def pair_jaccard(sets: NucleusSets, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``[K]`` float32 Jaccard overlap ``|A & B| / |A | B|`` of the sets of rows ``left[k]`` and ``right[k]``.

    Exact: a pair with a listed side tests that side's ids against the other side's bitset;
    only pairs of two wide sets count common bits word by word.  Adjacent layers
    (:func:`adjacent_jaccard`) and the cross-prompt pairs of extraction both come through here.

    Args:
        sets: The sets of ``R`` rows.
        left: ``[K]`` int64 rows, each at most once.
        right: ``[K]`` int64 rows, each at most once.

    Raises:
        ValueError: when a row repeats within ``left`` or within ``right``.
    """
    n, k = len(sets), int(left.shape[0])
    for name, side in (("left", left), ("right", right)):
        if side.shape != (k,) or torch.unique(side).numel() != k:
            raise ValueError(f"pair_jaccard needs {k} distinct rows in {name}; got {side.tolist()}")
    if k == 0:
        return torch.zeros(0, device=sets.sizes.device)
    listed = tally(sets.rows, n) == sets.sizes
    pair_of = torch.full((2, n), -1, dtype=torch.int64, device=sets.sizes.device)
    pair_of[0, left] = pair_of[1, right] = torch.arange(k, device=sets.sizes.device)
    inter = torch.zeros(k, dtype=torch.float64, device=sets.sizes.device)
    pair = pair_of[0, sets.rows]  # members of listed left rows, tested against the right row
    use = (pair >= 0) & listed[sets.rows]
    inter += tally(pair[use], k, _bit(sets.bits, right[pair[use]], sets.ids[use]))
    pair = pair_of[1, sets.rows]  # members of listed right rows whose left row is not listed
    use = (pair >= 0) & listed[sets.rows]
    use &= ~listed[left[pair.clamp_min(0)]]
    inter += tally(pair[use], k, _bit(sets.bits, left[pair[use]], sets.ids[use]))
    wide = torch.nonzero(~listed[left] & ~listed[right]).squeeze(-1)
    inter[wide] = popcount(sets.bits[left[wide]] & sets.bits[right[wide]]).sum(-1).double()
    union = sets.sizes[left] + sets.sizes[right] - inter.long()
    return inter.float() / union.clamp_min(1).float()
