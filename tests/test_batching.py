"""One batching for every caller: the sharded and unsharded orders agree, padding keeps positions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from entropy_lens.model.batching import (
    batch_order,
    batch_partners,
    batches,
    length_order,
    padded,
    partner_cycles,
    shard_slice,
)

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


def _stories(n: int, per_story: int = 12) -> list[str]:
    """Sources as a story set has them: a story's prompts are about as long as each other."""
    return [f"story{i // per_story}" for i in range(n)]


def _story_lengths(n: int, per_story: int = 12, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(40 + 10 * (i // per_story) + rng.integers(0, 3)) for i in range(n)]


def test_source_aware_batches_keep_at_most_half_of_a_batch_from_one_source():
    """Length order alone puts a story's prompts into one batch; with sources no batch holds more than half."""
    lengths, sources = _story_lengths(96), _stories(96)
    alone = [batch for batch in batches(lengths, BATCH)]
    assert max(most_of_one_source(sources, batch) for batch in alone) == BATCH  # the defect: one-story batches
    mixed = list(batches(lengths, BATCH, sources))
    assert sorted(row for batch in mixed for row in batch) == list(range(96))
    assert max(most_of_one_source(sources, batch) for batch in mixed) <= BATCH // 2
    # length order is kept within a small tolerance: no row moves further than one story's prompts
    place, rank = np.empty(96, dtype=int), np.empty(96, dtype=int)
    place[np.concatenate(mixed)], rank[length_order(lengths)] = np.arange(96), np.arange(96)
    assert np.abs(place - rank).max() <= 12


def most_of_one_source(sources: list[str], batch: np.ndarray) -> int:
    """The most rows of one source in ``batch``."""
    counts = np.unique([sources[r] for r in batch], return_counts=True)[1]
    return int(counts.max())


def test_without_sources_the_order_is_the_length_order():
    lengths = _lengths(50)
    assert batch_order(lengths, BATCH).tolist() == length_order(lengths).tolist()
    distinct = [str(i) for i in range(50)]  # every row its own source: nothing to keep apart
    assert batch_order(lengths, BATCH, distinct).tolist() == length_order(lengths).tolist()


@pytest.mark.parametrize("shard_size", [BATCH, 3 * BATCH])
def test_source_aware_shards_run_the_batches_of_the_whole_job(shard_size):
    lengths, sources = _story_lengths(90), _stories(90)
    whole = [batch.tolist() for batch in batches(lengths, BATCH, sources)]
    sharded, index = [], 0
    while (rows := shard_slice(lengths, index, shard_size, sources, BATCH)).size:
        shard_sources = [sources[r] for r in rows]
        sharded += [rows[batch].tolist() for batch in batches([lengths[r] for r in rows], BATCH, shard_sources)]
        index += 1
    assert sharded == whole


@pytest.mark.parametrize(
    ("sources", "want"),
    [
        (["a", "a", "b", "b"], [12, 13, 11, 10]),  # the cycle 10 12 11 13: each row paired with the other source
        (["a", "b", "c", "d"], [12, 13, 11, 10]),  # every row its own source: dealt the same way
        (["a", "a", "a", "b"], [13, -1, -1, 10]),  # one source holds 3 of 4: only 2 (4 - 3) rows can pair
        (["a", "a", "a", "a"], [-1, -1, -1, -1]),  # one source: no partner
    ],
)
def test_batch_partners_are_distinct_rows_of_another_source(sources, want):
    rows = np.arange(10, 14)
    partners = batch_partners(rows, sources)
    assert partners.tolist() == want
    paired = partners >= 0
    assert len(set(partners[paired].tolist())) == int(paired.sum())
    of = dict(zip(rows.tolist(), sources, strict=True))
    assert all(of[int(r)] != of[int(p)] for r, p in zip(rows[paired], partners[paired], strict=True))


def test_drawn_partners_make_each_batch_one_cycle_of_other_source_rows():
    """Over random batches where no source holds more than half: every partner is distinct, of another source,
    and the batch is one cycle of the partner map, which partner_cycles finds again."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        size = int(rng.integers(2, 17))
        sources = rng.integers(0, int(rng.integers(2, 6)), size=size).astype(str)
        if np.unique(sources, return_counts=True)[1].max() * 2 > size:
            continue
        rows = rng.permutation(40)[:size]
        partner_of = dict(zip(rows.tolist(), batch_partners(rows, sources, rng).tolist(), strict=True))
        of = dict(zip(rows.tolist(), sources, strict=True))
        assert all(of[r] != of[p] for r, p in partner_of.items())
        partner = np.full(40, -1)
        partner[list(partner_of)] = list(partner_of.values())
        (cycle,) = partner_cycles(partner)
        assert sorted(cycle.tolist()) == sorted(rows.tolist())


def test_batch_partners_without_sources_are_dealt_around_the_batch():
    assert batch_partners(np.asarray([4, 9, 2])).tolist() == [2, 4, 9]
    assert batch_partners(np.asarray([4])).tolist() == [-1]
    with pytest.raises(ValueError, match="sources must hold one value per row of the batch"):
        batch_partners(np.asarray([1, 2]), ["a"])
    assert [c.tolist() for c in partner_cycles(np.asarray([1, 0, -1, 4, 3, 2]))] == [[0, 1], [3, 4]]


def test_batches_refuse_a_batch_size_that_is_not_positive():
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        next(batches([3, 4], 0))


def test_padding_is_on_the_left_and_positions_follow_the_mask():
    inputs = padded([[5, 6, 7], [8]], pad_id=0, device=torch.device("cpu"))
    assert inputs["input_ids"].tolist() == [[5, 6, 7], [0, 0, 8]]
    assert inputs["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    assert inputs["position_ids"].tolist() == [[0, 1, 2], [0, 0, 0]]
