"""Decode per-block residuals through the model's own head, in memory-budgeted vocabulary tiles.

Each residual is decoded as the model decodes its last one: final norm (applied with
that residual's own statistics), unembedding in the weight dtype, then soft-capping
where the model has it.  The vocabulary is decoded in tiles: every (batch x layer) row
of a step against one tile of the unembedding is one efficient matrix product, and
:class:`~entropy_lens.lens.stream.TileStream` folds each tile into running sums, so the
``[rows, vocab]`` logits never exist at once and the unembedding is read once per step.
Tile width (and, for very many rows, row chunks) follow a memory budget.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from entropy_lens.lens.entropy import check_alphas
from entropy_lens.lens.metrics import bytes_per_logit
from entropy_lens.lens.nucleus import (
    NucleusSets,
    adjacent_jaccard,
    cat_sets,
    check_top_p,
    membership_bits,
    nucleus_given_norm,
    pair_jaccard,
    set_bits,
)
from entropy_lens.lens.stream import StreamResult, TileStream, log_norm_of
from entropy_lens.model.lens_model import LensModel

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_BYTES = 512 * 2**20
DEFAULT_ALPHAS = (0.5, 1.0, 5.0)
# Logits per tile: few enough products per step that thread barriers stay rare, and wide enough
# tiles that the product of every row with one runs near the machine's GEMM rate.
TILE_LOGITS = 2**22
# Narrowest tile worth a product of its own: below this the rows are chunked instead.
MIN_TILE = 2048
# Working bytes per logit of a tile (float32 logits, a weight-dtype product, candidate mask), per
# kept top-p candidate (row, id, logit, ranking temporaries); a row's membership bitset takes V/8.
TILE_BYTES_PER_LOGIT = 12
BYTES_PER_CANDIDATE = 32
MIN_CANDIDATE_CAP = 4096


@dataclass(frozen=True)
class LensSettings:
    """What is measured at every (token, layer).

    Attributes:
        top_p: Nucleus mass, in ``(0, 1]``.
        alphas: Renyi orders (``>= 0``, ``inf`` allowed).
        budget_bytes: Peak working memory for decoding one step's residuals.
        top_k: Also keep each cell's ``top_k`` most probable tokens and their probabilities
            (store variables ``top_ids``, ``top_probs``; what ``entropy-lens view`` shows on hover); 0: off.
    """

    top_p: float = 0.6
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    top_k: int = 0

    def __post_init__(self) -> None:
        check_top_p(self.top_p)
        object.__setattr__(self, "alphas", check_alphas(self.alphas))
        if not isinstance(self.budget_bytes, int) or self.budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be a positive integer, got {self.budget_bytes!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer (0: keep no top tokens), got {self.top_k!r}")

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> LensSettings:
        """The settings of the workflow config's ``lens`` section (``top_p``, ``alphas``, ``budget_mb``,
        and ``top_k``, 0 when absent)."""
        return cls(section["top_p"], tuple(section["alphas"]), section["budget_mb"] * 2**20, section.get("top_k", 0))


@torch.inference_mode()
def lens_logits(lm: LensModel, resid: torch.Tensor) -> torch.Tensor:
    """``[n, V]`` float32 logits of ``[n, d]`` residuals through norm, unembedding, soft-cap."""
    return head_logits(lm, resid)


def head_logits(lm: LensModel, resid: torch.Tensor) -> torch.Tensor:
    """:func:`lens_logits` under the caller's autograd mode (a fitted lens trains through the head)."""
    logits = lm.unembed(lm.final_norm(resid)).float()
    if lm.softcap:
        logits = lm.softcap * torch.tanh(logits / lm.softcap)
    return logits


def project_tile(lm: LensModel, normed_t: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """``[stop - start, n]`` float32 logits of tokens ``start .. stop`` (vocabulary-major).

    Args:
        lm: The model; its unembedding's ``weight`` (``[V, d]``) and optional ``bias``.
        normed_t: ``[d, n]`` final-normed residuals, transposed, in the weight dtype.
        start, stop: Token range of the tile.

    Returns:
        The tile as :func:`lens_logits` computes it: product in the weight dtype, then
        float32 and soft-capping.
    """
    weight = lm.unembed.weight[start:stop]  # [T, d]
    bias = getattr(lm.unembed, "bias", None)
    tile = torch.mm(weight, normed_t) if bias is None else torch.addmm(bias[start:stop, None], weight, normed_t)
    tile = tile.float()
    if lm.softcap:
        tile = tile.div_(lm.softcap).tanh_().mul_(lm.softcap)
    return tile


def rows_per_chunk(vocab_size: int, budget_bytes: int) -> int:
    """How many full rows of logits fit the budget; raises if not even one does.

    Full rows are decoded only for the rare rows whose top-p set the streamed candidates
    cannot settle (exact histogram search of :mod:`entropy_lens.lens.nucleus`).
    """
    per_row = vocab_size * bytes_per_logit()
    if budget_bytes < per_row:
        raise ValueError(
            f"chunk budget of {budget_bytes} bytes is below one row of logits "
            f"({per_row} bytes for vocab {vocab_size}); raise budget_bytes"
        )
    return budget_bytes // per_row


@dataclass(frozen=True)
class TilePlan:
    """How one step's rows are decoded: ``rows`` at a time, ``width`` tokens per tile.

    Attributes:
        rows: Rows per chunk (all of them unless the budget says otherwise).
        width: Tokens per vocabulary tile.
        cap: Most top-p candidates kept per row.
    """

    rows: int
    width: int
    cap: int

    def bytes(self, vocab_size: int) -> int:
        """Peak working bytes of one chunk under this plan."""
        per_row = vocab_size // 8 + self.cap * BYTES_PER_CANDIDATE + self.width * TILE_BYTES_PER_LOGIT
        return self.rows * per_row


def plan_tiles(n_rows: int, vocab_size: int, budget_bytes: int) -> TilePlan:
    """Rows per chunk and tile width for ``n_rows`` rows within ``budget_bytes``.

    Rows are chunked only when even ``MIN_TILE``-wide tiles of all of them would not fit;
    chunks are then of even size.  Tiles are about ``TILE_LOGITS / rows`` wide and of even
    width, narrower if the budget asks.
    """
    rows_per_chunk(vocab_size, budget_bytes)  # the full-row fallback must fit
    cap = min(vocab_size, max(MIN_CANDIDATE_CAP, vocab_size // 8))
    fixed = vocab_size // 8 + cap * BYTES_PER_CANDIDATE
    narrowest = min(vocab_size, MIN_TILE)
    rows = max(1, min(n_rows, budget_bytes // (fixed + narrowest * TILE_BYTES_PER_LOGIT)))
    rows = -(-n_rows // -(-n_rows // rows))  # even chunks
    fit = (budget_bytes // rows - fixed) // TILE_BYTES_PER_LOGIT
    width = min(vocab_size, fit, max(narrowest, TILE_LOGITS // rows))
    width = -(-vocab_size // -(-vocab_size // width))  # even tiles
    if width < vocab_size:  # whole cache lines, as long as the budget allows
        width = min(width + -width % 64, max(64, fit - fit % 64))
    return TilePlan(rows, width, cap)


@dataclass
class StepMetrics:
    """Metrics of one step for ``B`` rows and ``L`` layers (numpy, float32/int32)."""

    entropy: np.ndarray  # [B, L]
    renyi: np.ndarray  # [B, L, A]
    nucleus_size: np.ndarray  # [B, L]
    nucleus_jaccard: np.ndarray  # [B, L]
    top1_id: np.ndarray  # [B, L]
    nucleus_jaccard_cross: np.ndarray | None = None  # [B, L]; with a partner only
    top_ids: np.ndarray | None = None  # [B, L, K] int32, by decreasing probability (LensSettings.top_k > 0)
    top_probs: np.ndarray | None = None  # [B, L, K] float32


def cross_rows(partner: torch.Tensor, n_layers: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The flattened ``(b, l)`` rows of the cross-prompt pairs: layer ``l`` of row ``b`` with layer
    ``l + 1`` of row ``partner[b]``, for every ``b`` with a partner and ``l < L - 1``.

    Args:
        partner: ``[B]`` int64 partner row of each row, ``-1`` for none; distinct where set.
        n_layers: Layers ``L`` per row.

    Returns:
        ``(left, right)``: ``[K]`` rows ``b * L + l`` and ``partner[b] * L + l + 1``; ``left`` is
        also the cell of a flattened ``[B, L]`` array that the pair's value goes to.
    """
    if partner.ndim != 1 or bool(((partner < -1) | (partner >= partner.shape[0])).any()):
        raise ValueError(f"partner must be [B] rows in -1..B-1, got {partner.tolist()}")
    has = torch.nonzero(partner >= 0).squeeze(-1)  # [b]
    layers = torch.arange(n_layers - 1, device=partner.device)
    left = (has[:, None] * n_layers + layers[None, :]).reshape(-1)
    right = (partner[has][:, None] * n_layers + layers[None, :] + 1).reshape(-1)
    return left, right


@torch.inference_mode()
def decode_residuals(
    lm: LensModel, resid: torch.Tensor, settings: LensSettings, partner: torch.Tensor | None = None
) -> StepMetrics:
    """Lens metrics for residuals ``[B, L, d]`` of one step, decoded in vocabulary tiles.

    Rows are flattened as ``(b, l)`` so adjacent layers are adjacent rows; when rows are
    chunked, the last top-p set of a chunk is carried into the next for the Jaccard overlap.

    Args:
        lm: The model whose head decodes the residuals.
        resid: ``[B, L, d]`` residuals after each block.
        settings: What is measured.
        partner: ``[B]`` int64 partner row of each row (``-1``: none), rows distinct: adds
            ``nucleus_jaccard_cross``, the overlap of layer ``l``'s set with layer ``l + 1``'s
            set of the partner (:func:`cross_rows`), the cross-prompt null of the adjacent overlap.
            The step's sets are then kept until its last chunk (``V / 8`` bytes per row).
    """
    batch, n_layers, _ = resid.shape
    flat = resid.reshape(batch * n_layers, -1)
    plan = plan_tiles(flat.shape[0], lm.vocab_size, settings.budget_bytes)
    parts: list[StreamResult] = []
    tops: list[tuple[torch.Tensor, torch.Tensor]] = []
    overlaps: list[torch.Tensor] = []
    kept: list[NucleusSets] = []
    carry: NucleusSets | None = None
    for start in range(0, flat.shape[0], plan.rows):
        result, sets, top = _decode_chunk(lm, flat[start : start + plan.rows], settings, plan)
        joined = sets if carry is None else cat_sets([carry, sets])
        overlaps.append(adjacent_jaccard(joined))
        carry = sets.last()
        parts.append(result)
        kept += [] if partner is None else [sets]
        tops.append(top)
    jac = torch.cat([*overlaps, torch.full((1,), math.nan, device=flat.device)])
    jac = jac.reshape(batch, n_layers)
    jac[:, -1] = math.nan  # the last block has no next layer
    cross = None if partner is None else _cross_jaccard(cat_sets(kept), partner.to(flat.device), batch, n_layers)
    metrics = _to_numpy(parts, jac, batch, n_layers, cross)
    if settings.top_k:
        ids, probs = (torch.cat(part).cpu().numpy().reshape(batch, n_layers, -1) for part in zip(*tops, strict=True))
        metrics = dataclasses.replace(metrics, top_ids=ids.astype(np.int32), top_probs=probs.astype(np.float32))
    return metrics


def _cross_jaccard(sets: NucleusSets, partner: torch.Tensor, batch: int, n_layers: int) -> torch.Tensor:
    """``[B, L]`` Jaccard of layer ``l`` of row ``b`` with layer ``l + 1`` of ``partner[b]`` (NaN: no pair)."""
    if partner.shape != (batch,):
        raise ValueError(f"partner must hold one row per batch row ({batch}), got shape {tuple(partner.shape)}")
    left, right = cross_rows(partner, n_layers)
    cross = torch.full((batch * n_layers,), math.nan, device=partner.device)
    cross[left] = pair_jaccard(sets, left, right)
    return cross.reshape(batch, n_layers)


def _decode_chunk(lm: LensModel, resid: torch.Tensor, settings: LensSettings, plan: TilePlan):
    """Metrics, top-p sets and top-k ``(ids, probabilities)`` (``[n, K]``) of one chunk of ``[n, d]`` residuals."""
    normed_t = lm.final_norm(resid).T  # [d, n]
    stream = TileStream(
        resid.shape[0], lm.vocab_size, top_p=settings.top_p, alphas=settings.alphas, cap=plan.cap, device=resid.device
    )
    k = min(settings.top_k, lm.vocab_size)
    values = resid.new_full((0, resid.shape[0]), -math.inf, dtype=torch.float32)  # [k', n] running top logits
    ids = torch.empty((0, resid.shape[0]), dtype=torch.long, device=resid.device)
    for start in range(0, lm.vocab_size, plan.width):
        tile = project_tile(lm, normed_t, start, min(start + plan.width, lm.vocab_size))  # [T, n]
        stream.add(tile, start)
        if k:
            values, ids = _merge_top(values, ids, tile, start, k)
    result, sets = _settle_open_rows(lm, resid, stream.finish(), settings, plan)
    probs = (values.T.double() - result.max_logit.double()[:, None] - result.log_norm[:, None]).exp()
    return result, sets, (ids.T, probs.float())


def _merge_top(values: torch.Tensor, ids: torch.Tensor, tile: torch.Tensor, start: int, k: int):
    """The ``k`` largest of the running ``[k', n]`` top logits (and their ids) and a ``[T, n]`` tile's."""
    tile_values, tile_ids = tile.topk(min(k, tile.shape[0]), dim=0)  # [k, n]
    values, order = torch.cat([values, tile_values]).topk(min(k, values.shape[0] + tile_values.shape[0]), dim=0)
    return values, torch.cat([ids, tile_ids + start]).gather(0, order)


def _settle_open_rows(lm, resid, result: StreamResult, settings: LensSettings, plan: TilePlan):
    """Decode in full the rows whose top-p set the streamed candidates left open (rare).

    Returns:
        The completed result, and the chunk's sets as :class:`~entropy_lens.lens.nucleus.NucleusSets`.
    """
    size, top1 = result.nucleus_size.clone(), result.top1_id.clone()
    bits = membership_bits(len(size), lm.vocab_size, resid.device)
    set_bits(bits, result.member_rows, result.member_ids)
    rows, ids = [result.member_rows], [result.member_ids]
    todo = torch.nonzero(size == 0).squeeze(-1)
    if todo.numel():
        logger.debug("decoding %d of %d rows in full: top-p set wider than the candidates", len(todo), len(size))
    for part in todo.split(rows_per_chunk(lm.vocab_size, settings.budget_bytes)):
        logits = lens_logits(lm, resid[part])  # [f, V]
        top = logits.max(-1).values  # [f]; this product's own rounding, not the stream's
        norm = (top, log_norm_of(logits, top))
        size[part], mask = nucleus_given_norm(logits, *norm, settings.top_p)
        top1[part] = logits.argmax(-1)
        local, token = torch.nonzero(mask, as_tuple=True)
        set_bits(bits, part[local], token)
        listed = size[part][local] <= plan.cap  # wide sets stay bitsets only
        rows.append(part[local][listed])
        ids.append(token[listed])
    sets = NucleusSets(size, bits, torch.cat(rows), torch.cat(ids))
    done = dataclasses.replace(result, nucleus_size=size, top1_id=top1, member_rows=sets.rows, member_ids=sets.ids)
    return done, sets


def _to_numpy(
    parts: list[StreamResult], jac: torch.Tensor, batch: int, n_layers: int, cross: torch.Tensor | None
) -> StepMetrics:
    def cat(attr: str, dtype) -> np.ndarray:
        values = torch.cat([getattr(p, attr) for p in parts]).cpu().numpy().astype(dtype)
        return values.reshape(batch, n_layers, *values.shape[1:])

    return StepMetrics(
        entropy=cat("entropy", np.float32),
        renyi=cat("renyi", np.float32),
        nucleus_size=cat("nucleus_size", np.int32),
        nucleus_jaccard=jac.cpu().numpy().astype(np.float32),
        top1_id=cat("top1_id", np.int32),
        nucleus_jaccard_cross=None if cross is None else cross.cpu().numpy().astype(np.float32),
    )


def gather_logprobs(logits: torch.Tensor, ids: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """``[B, C]`` float32 log-probabilities of token ``ids[b][c]`` under ``[B, V]`` logits."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    index = torch.as_tensor(np.asarray(ids), dtype=torch.long, device=logp.device)  # [B, C]
    return logp.gather(1, index).cpu().numpy()
