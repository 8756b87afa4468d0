"""Lens metrics of logits that arrive one vocabulary tile at a time.

:class:`TileStream` computes the metrics of :mod:`entropy_lens.lens.entropy` and the top-p
sets of :mod:`entropy_lens.lens.nucleus` from ``[T, R]`` tiles (online log-sum-exp), so
``[R, V]`` never has to exist at once.  Rows whose top-p set the streamed candidates leave
open are decoded again in full, with their own normalizer from :func:`log_norm_of`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from entropy_lens.lens.entropy import EXP_FLOOR, check_alphas
from entropy_lens.lens.nucleus import MASS_TOL, tally

# A streamed row keeps as top-p candidates the tokens whose log-probability (against the mass seen
# so far) reaches max(log((1 - top_p) / V), CANDIDATE_LOG_P). The first bound is certain to hold the
# whole set (the tokens below it weigh less than 1 - top_p together); CANDIDATE_LOG_P keeps wide
# vocabularies to ~1.4k candidates per row instead of ~7.5k (gemma3-270m), and on the three embedded
# models every top-p = 0.6 set lay above it. A row whose set does not is decoded again in full.
CANDIDATE_LOG_P = -11.0
# Streamed sums run in blocks of at most this many logits: torch runs an op that small on the
# calling thread (its intra-op grain size), so no thread barrier is crossed per op. On a CPU shared
# with other work, a barrier waits for a descheduled thread: ~8 ms each, measured here on 2 cores.
_INLINE_LOGITS = 32768
# exp2 rather than exp: torch hands exp and sqrt to MKL's vector library inside a parallel loop of
# grain 2048, which crosses a barrier even for small blocks; exp2 keeps the 32768 grain.
_LOG2E = 1.4426950408889634


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
        self.target = float(top_p) - MASS_TOL  # checked once, by LensSettings
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
        self.count += tally(row, len(self.count))
        self.threshold[self.count > self.cap] = math.inf

    def finish(self) -> StreamResult:
        """Entropies, Renyi entropies, and the top-p sets the candidates settle."""
        log_norm = self.norm.log()  # [R] log S0 = logsumexp(z) - m
        entropy = (log_norm - self.moment / self.norm).clamp_min(0.0)
        renyi = torch.stack([self._renyi(a, log_norm, entropy) for a in self.alphas], dim=-1)
        rows, ids, values = (torch.cat(parts) for parts in zip(*self.found, strict=True))
        keep = values >= self.threshold[rows]  # every token at or above the final threshold
        self.found = []
        size, top1, member = _settle(
            (rows[keep], ids[keep], values[keep]), top=self.top, log_norm=log_norm, target=self.target
        )
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
        if alpha != 0.5:  # floored at exp(-EXP_FLOOR), as in renyi_from_logp
            terms = (shifted2 * alpha).clamp_min_(-EXP_FLOOR * _LOG2E).exp2_()
            torch.sum(terms, 0, out=out[2 + i])
    if 0.5 in orders:  # p = sqrt(p) ** 2: one exponential serves both
        roots = shifted2.mul_(0.5).exp2_()
        torch.sum(roots, 0, out=out[2 + orders.index(0.5)])
        probs = roots * roots
    else:
        probs = shifted2.exp2_()  # [t, R] unnormalized probabilities
    torch.sum(probs, 0, out=out[0])
    torch.linalg.vecdot(probs, shifted, dim=0, out=out[1])


def _settle(
    candidates: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    *,
    top: torch.Tensor,
    log_norm: torch.Tensor,
    target: float,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Top-p sets of the rows whose candidates reach ``target`` (see :meth:`TileStream.finish`).

    ``candidates`` are the ``[C]`` row, token id and logit of each candidate; ``top`` the ``[R]`` max
    logit ``m`` and ``log_norm`` the ``[R]`` float64 ``log S0`` of each row.

    Candidates are ranked by logit within each row (stable sorts keep ids ascending among
    ties) and weighed ``exp(z - m - log S0)`` in float64, so a set is the one float64
    arithmetic finds from the float32 logits (float32 log-softmax weights err by ~1e-6).
    """
    rows, ids, values = candidates
    n = len(top)
    order = torch.sort(values, descending=True, stable=True).indices
    order = order[torch.sort(rows[order], stable=True).indices]
    rows, ids, values = rows[order], ids[order], values[order]
    weights = (values.double() - top.double()[rows] - log_norm[rows]).exp()  # [C] probabilities
    mass = torch.cat([weights.new_zeros(1), weights.cumsum(0)])  # [C + 1] mass before each candidate
    counts = tally(rows, n)
    starts = counts.cumsum(0) - counts
    cum = mass[1:] - mass[starts][rows]  # [C] mass of each row's candidates down to this one
    need = tally(rows, n, (cum < target).long()) + 1
    total = mass[starts + counts] - mass[starts]  # [R] mass of each row's candidates
    settled = (counts > 0) & (total >= target)
    size = torch.where(settled, need, 0)
    top1 = torch.where(counts > 0, torch.cat([ids, ids.new_full((1,), -1)])[starts], -1)
    member = (torch.arange(len(rows), device=top.device) - starts[rows]) < size[rows]
    return size, top1, (rows[member], ids[member])


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
