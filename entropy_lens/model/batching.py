"""How prompts become batches: one order and one padding for every caller.

Prompts go to the model sorted by token length (ties in the order given, so a table's order breaks
them), ``batch_size`` at a time, left padded with an attention mask, positions counted along the
mask so that a padded row computes what it would alone. Extraction, its shards, choice scoring,
layer skipping and generation all batch through here: a shard is the slice of :func:`length_order`
the whole job would batch, and it is only the same work because both sort the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch


def length_order(lengths: Sequence[int]) -> np.ndarray:
    """Row indices sorted by length, ties in the given order (a stable sort)."""
    return np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")


def batches(lengths: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """The rows of each batch, in :func:`length_order`, ``batch_size`` at a time (the last may be shorter).

    Raises:
        ValueError: for a ``batch_size`` that is not a positive integer.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    order = length_order(lengths)
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def batch_partners(rows: Sequence[int]) -> np.ndarray:
    """The partner of each row of one batch: the next row of the batch, the last row's the first.

    The one rule for the cross-prompt null of the adjacent-layer overlap: extraction compares layer
    ``l`` of a row with layer ``l + 1`` of its partner and records the partner in the store, which
    the analysis reads back.  A batch of one has no partner (``-1``).

    Args:
        rows: The batch's rows (prompt indices), in batch order.

    Returns:
        ``[B]`` int64 partner row (a prompt index of ``rows``) of each row, or ``-1``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    return np.roll(rows, -1) if rows.size > 1 else np.full(rows.size, -1, dtype=np.int64)


def shard_slice(lengths: Sequence[int], index: int, size: int) -> np.ndarray:
    """Rows of shard ``index`` (``size`` prompts each): its slice of :func:`length_order`, in row order.

    A shard job batching these rows (sorted again) runs the batches the whole job would, when ``size``
    is a multiple of the batch size.
    """
    return np.sort(length_order(lengths)[index * size : (index + 1) * size])


def left_pad(batch: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``[B, S]`` int64, padded on the left."""
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
