"""One batching for every caller: the sharded and unsharded orders agree, padding keeps positions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from entropy_lens.model.batching import batches, length_order, padded, shard_slice

BATCH = 4


def _lengths(n: int, seed: int = 0) -> list[int]:
    """Prompt lengths with many ties (where an unstable sort would reorder rows)."""
    return np.random.default_rng(seed).integers(3, 9, size=n).tolist()


def test_length_order_breaks_ties_in_row_order():
    lengths = _lengths(300)
    order = length_order(lengths)
    keys = [(lengths[row], row) for row in order]
    assert keys == sorted(keys)


@pytest.mark.parametrize("shard_size", [BATCH, 3 * BATCH, 40])
def test_shard_jobs_run_the_batches_of_the_whole_job(shard_size):
    """Each shard job gets its rows in table order and batches them again; together they run the whole
    job's batches, in its order."""
    lengths = _lengths(203)
    whole = [batch.tolist() for batch in batches(lengths, BATCH)]
    sharded, index = [], 0
    while (rows := shard_slice(lengths, index, shard_size)).size:
        assert rows.tolist() == sorted(rows.tolist()), "a shard's rows are in table order"
        sharded += [rows[batch].tolist() for batch in batches([lengths[r] for r in rows], BATCH)]
        index += 1
    assert sharded == whole
    assert sorted(row for batch in whole for row in batch) == list(range(len(lengths)))


def test_batches_refuse_a_batch_size_that_is_not_positive():
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        next(batches([3, 4], 0))


def test_padding_is_on_the_left_and_positions_follow_the_mask():
    inputs = padded([[5, 6, 7], [8]], pad_id=0, device=torch.device("cpu"))
    assert inputs["input_ids"].tolist() == [[5, 6, 7], [0, 0, 8]]
    assert inputs["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    assert inputs["position_ids"].tolist() == [[0, 1, 2], [0, 0, 0]]
