"""How prompts become batches: one order and one padding for every caller.

Prompts go to the model sorted by token length (ties in the order given, so a table's order breaks
them), ``batch_size`` at a time, left padded with an attention mask, positions counted along the
mask so that a padded row computes what it would alone. Extraction, its shards, choice scoring,
layer skipping and generation all batch through here: a shard is the slice of :func:`batch_order`
the whole job would batch, and it is only the same work because both order the same way.

Sources.  The cross-prompt null of the expansion claims pairs each prompt with a prompt of *another*
source (story, topic, question; docs/verdicts.md, "The right units") in its batch (:func:`batch_partners`: a
cycle through the batch, which the analysis finds again with :func:`partner_cycles`).  Length order alone puts
a story's prompts, which are about as long as each other, into the same batches, so extraction passes each
prompt's source and :func:`batch_order` keeps at most half of a batch from one source: each batch takes the
shortest prompts left whose source has room in it, so a prompt waits only until a batch has room for its source
(the cost, padding to a longer prompt, is measured in docs/results.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def length_order(lengths: Sequence[int]) -> np.ndarray:
    """Row indices sorted by length, ties in the given order (a stable sort)."""
    return np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")


def _check_batch_size(batch_size: int) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def batch_order(lengths: Sequence[int], batch_size: int, sources: Sequence[Hashable] | None = None) -> np.ndarray:
    """Every row in the order it is batched: consecutive ``batch_size`` rows make one batch.

    Without ``sources``, :func:`length_order`.  With them, each batch is filled from the rows left in
    length order, taking a row only while its source holds fewer than ``batch_size // 2`` (at least 1)
    of the batch's rows; a batch that finds no such row takes the next rows in length order.  Every batch
    with at most half of its rows from one source gives each row a partner of another source
    (:func:`batch_partners`).

    Args:
        lengths: ``[N]`` token length of each row.
        batch_size: Rows per batch.
        sources: ``[N]`` source of each row (a story, topic, question), or ``None``.

    Returns:
        ``[N]`` row indices.
    """
    batch_size = _check_batch_size(batch_size)
    order = length_order(lengths)
    if sources is None:
        return order
    source = np.asarray([str(s) for s in sources], dtype=object)
    if source.shape != (len(lengths),):
        raise ValueError(f"sources must hold one value per row ({len(lengths)}), got {source.shape[0]}")
    cap = max(batch_size // 2, 1)
    left, out = list(order), []
    while left:
        taken: list[int] = []
        counts: dict[str, int] = {}
        for row in left:
            if len(taken) == batch_size:
                break
            if counts.get(source[row], 0) < cap:
                taken.append(row)
                counts[source[row]] = counts.get(source[row], 0) + 1
        chosen = set(taken)
        rest = [row for row in left if row not in chosen]
        taken += rest[: batch_size - len(taken)]  # no room left for any other source: length order
        chosen = set(taken)
        left = [row for row in left if row not in chosen]
        out += taken
    return np.asarray(out, dtype=np.int64)


def batches(lengths: Sequence[int], batch_size: int, sources: Sequence[Hashable] | None = None) -> Iterator[np.ndarray]:
    """The rows of each batch, in :func:`batch_order`, ``batch_size`` at a time (the last may be shorter).

    Raises:
        ValueError: for a ``batch_size`` that is not a positive integer.
    """
    order = batch_order(lengths, batch_size, sources)
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def batch_partners(
    rows: Sequence[int], sources: Sequence[Hashable] | None = None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The partner of each row of one batch: the next row of one cycle through the batch, of another source.

    The one rule for the cross-prompt null of the expansion claims: extraction compares layer ``l`` of a row with
    layer ``l + 1`` of its partner and records the partner in the store, which the analysis reads back.  The rows
    are laid out by source (the largest source first; rows within a source, and sources of equal count, in batch
    order, or shuffled by ``rng``), and that list is dealt around a cycle, its first half on every other place and
    its second half between them: no two neighbours share a source whenever no source holds more than half of the
    batch, and each row's partner is the next row of the cycle.  So every partner is distinct and of another source,
    and the batch is one cycle of the partner map (the analysis finds the batch again:
    :func:`partner_cycles`).  Where one source holds ``m`` rows, more than half, only ``2 (B - m)`` rows can have
    distinct partners of another source: the other sources' rows and as many of the largest source's, swapped in
    pairs; the rest get ``-1``.  A batch of one source (or of one row) has no partner.  Without ``sources`` every
    row is its own source.

    Args:
        rows: The batch's rows (prompt indices), in batch order.
        sources: ``[B]`` the source of each row, or ``None``.
        rng: Shuffles the rows within a source and the order of sources of equal count (extraction seeds it
            from the batch's prompts, so a shard job draws what the whole job draws); ``None``: batch order.

    Returns:
        ``[B]`` int64 partner row (a prompt index of ``rows``) of each row, or ``-1``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    source = np.asarray([str(s) for s in sources], dtype=object) if sources is not None else rows.astype(str)
    if source.shape != rows.shape:
        raise ValueError(f"sources must hold one value per row of the batch ({rows.size}), got {source.shape[0]}")
    out = np.full(rows.size, -1, dtype=np.int64)
    names, first, counts = np.unique(source, return_index=True, return_counts=True)
    if names.size < 2:
        return out
    tie = rng.permutation(names.size) if rng is not None else first
    laid = []
    for name in names[np.lexsort((tie, -counts))]:
        members = np.flatnonzero(source == name)
        laid += (rng.permutation(members) if rng is not None else members).tolist()
    largest = int(counts.max())
    if 2 * largest <= rows.size:
        cycle = np.empty(rows.size, dtype=np.int64)
        half = (rows.size + 1) // 2
        cycle[0::2], cycle[1::2] = laid[:half], laid[half:]
        out[cycle] = rows[np.roll(cycle, -1)]
        return out
    major, others = laid[:largest], laid[largest:]
    for a, b in zip(major, others, strict=False):
        out[a], out[b] = rows[b], rows[a]
    return out


def partner_cycles(partner: np.ndarray) -> list[np.ndarray]:
    """The cycles of a ``[P]`` partner map (prompt indices, ``-1``: none) of more than one prompt, each from its
    lowest prompt on: the batches :func:`batch_partners` dealt (a batch where one source held more than half
    shows as pairs)."""
    partner = np.asarray(partner, dtype=np.int64)
    seen = np.zeros(partner.size, dtype=bool)
    out = []
    for start in range(partner.size):
        if seen[start] or partner[start] < 0:
            continue
        cycle, here = [], start
        while here >= 0 and not seen[here]:
            seen[here] = True
            cycle.append(here)
            here = int(partner[here])
        if here == start and len(cycle) > 1:
            out.append(np.asarray(cycle, dtype=np.int64))
    return out


def shard_slice(
    lengths: Sequence[int], index: int, size: int, sources: Sequence[Hashable] | None = None, batch_size: int = 1
) -> np.ndarray:
    """Rows of shard ``index`` (``size`` prompts each): its slice of :func:`batch_order`, in row order.

    A shard job batching these rows (ordered again, with their sources) runs the batches the whole job
    would, when ``size`` is a multiple of ``batch_size``.
    """
    return np.sort(batch_order(lengths, batch_size, sources)[index * size : (index + 1) * size])


def left_pad(batch: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``[B, S]`` int64, padded on the left."""
    import torch  # the batch order and partners serve analysis jobs, which do not load torch

    width = max(len(ids) for ids in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, ids in enumerate(batch):
        input_ids[row, width - len(ids) :] = torch.as_tensor(ids, dtype=torch.long)
        mask[row, width - len(ids) :] = 1
    return input_ids.to(device), mask.to(device)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids ``[B, S]`` counted along a left-padded attention mask (0 on the padding)."""
    return (mask.cumsum(-1) - 1).clamp_min(0)


def padded(batch: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The model inputs of a batch of token-id prompts: ``input_ids``, ``attention_mask``, ``position_ids``."""
    input_ids, mask = left_pad(batch, pad_id, device)
    return {"input_ids": input_ids, "attention_mask": mask, "position_ids": positions(mask)}
