"""Expansion/pruning statistics on constructed profiles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.expansion import nulls, planted, spearman
from entropy_lens.analysis.expansion.overlap import (
    CONTAINMENT_SIZE_CHANGES,
    DEPTH_COLUMNS,
    containment_from_jaccard,
    nucleus_overlap,
    overlap_by_depth,
)
from entropy_lens.core.intervals import cluster_bootstrap_correlation
from entropy_lens.verdicts.decision import shown_beyond


def _entropy(shape, seed=0):
    # Multiples of 1/64: exact in float32 (the store's dtype), and 64 * H is an integer nucleus size.
    return np.random.default_rng(seed).integers(0, 192, size=shape) / 64.0


def _store(tmp_path=None):
    h_a = _entropy((5, 4, 6), seed=1)
    h_a[0, 2:] = np.nan  # early stop: 2 valid tokens
    h_b = _entropy((5, 4, 3), seed=2)
    nucleus = {
        "up": np.where(np.isfinite(h_a), 10 + 64 * np.nan_to_num(h_a), -1).astype(np.int32),
        "down": (1000 - 64 * h_b).astype(np.int32),
    }
    ds = combined_dataset({"up": h_a, "down": h_b}, families={"up": "f1", "down": "f2"}, nucleus=nucleus)
    return ds if tmp_path is None else lazy(ds, tmp_path)


def test_spearman_is_one_on_monotone_data_and_minus_one_on_antitone(tmp_path):
    table = spearman.expansion_spearman(_store(tmp_path)).set_index("model")
    assert table.loc["up", "spearman"] == pytest.approx(1.0)
    assert table.loc["down", "spearman"] == pytest.approx(-1.0)
    assert table.loc["up", "family"] == "f1" and table.loc["down", "n_layers"] == 3


def test_spearman_interval_resamples_prompts_not_rows():
    """Rows of one prompt share a prompt effect: the prompt bootstrap must be wider than a row bootstrap."""
    rng = np.random.default_rng(0)
    p, t, layers = 12, 20, 8
    prompt_effect = rng.normal(size=(p, 1, 1)) * np.linspace(0, 3, layers)  # each prompt its own slope
    h = np.cumsum(rng.normal(size=(p, t, layers)) * 0.3, axis=2) + prompt_effect
    nucleus = np.rint(np.exp(np.clip(h, -2, 6)) + 1 + rng.integers(0, 3, size=h.shape)).astype(np.int32)
    ds = combined_dataset({"m": h}, families={"m": "f"}, nucleus={"m": nucleus})
    row = spearman.expansion_spearman(ds, n_boot=400).iloc[0]
    assert row["n_prompts"] == p and row["n"] == p * t * (layers - 1)
    assert row["ci_low"] < row["spearman"] < row["ci_high"]
    d_h, d_n, _, _ = spearman.layer_deltas(h, nucleus)
    ranks = (stats.rankdata(d_h), stats.rankdata(d_n))
    row_lo, row_hi = cluster_bootstrap_correlation(*ranks, np.arange(d_h.size), n_boot=400)
    assert row["ci_high"] - row["ci_low"] > 1.5 * (row_hi - row_lo)


def test_sample_size_counts_valid_adjacent_layer_pairs_only():
    table = spearman.expansion_spearman(_store()).set_index("model")
    assert table.loc["up", "n"] == (5 * 4 - 2) * (6 - 1)  # 2 masked tokens, 5 layer pairs
    assert table.loc["down", "n"] == 5 * 4 * (3 - 1)  # padded layers 3..5 never enter


def test_layer_deltas_are_differences_of_adjacent_layers():
    h = np.array([[[1.0, 3.0, 2.0]]])
    n = np.array([[[5, 9, -1]]])
    d_h, d_n, layer, prompt = spearman.layer_deltas(h, n)
    assert d_h.tolist() == [2.0] and d_n.tolist() == [4.0] and layer.tolist() == [1] and prompt.tolist() == [0]
    d_h, d_n, _, _ = spearman.layer_deltas(h, np.array([[[1, 4, 2]]]), log_nucleus=True)
    np.testing.assert_allclose(d_n, [np.log(4), np.log(0.5)])
    with pytest.raises(ValueError, match=r"share a \[P, T, L\] shape"):
        spearman.layer_deltas(h, n[..., :2])


def test_spearman_is_nan_on_constant_input():
    rho, p = spearman.spearman(np.ones(10), np.arange(10.0))
    assert np.isnan(rho) and np.isnan(p)


def _overlap_store():
    """Model ``m``: equal sizes (3 tokens), Jaccard 0.2 / 0.4 / 0.6 by layer, one masked token.

    Model ``grow``: the nucleus doubles, doubles, then halves (10, 20, 40, 20 tokens), each
    time keeping every token of the smaller set: Jaccard 0.5, containment 1.
    """
    h = np.ones((2, 3, 4))
    h[1, 2] = np.nan
    jac = np.broadcast_to(np.array([0.2, 0.4, 0.6, np.nan]), (2, 3, 4)).copy()
    nested = np.broadcast_to(np.array([0.5, 0.5, 0.5, np.nan]), (2, 3, 4)).copy()
    grow = np.broadcast_to(np.array([10, 20, 40, 20], dtype=np.int32), (2, 3, 4)).copy()
    return combined_dataset({"m": h, "grow": h}, jaccard={"m": jac, "grow": nested}, nucleus={"grow": grow})


def test_nucleus_overlap_summarizes_valid_cells_per_statistic():
    ds = _overlap_store()
    table = nucleus_overlap(ds, quantiles=(0.0, 0.5, 1.0))
    assert table.columns[:2].tolist() == ["model", "statistic"]
    assert list(zip(table["model"], table["statistic"], strict=True)) == [
        ("m", "jaccard"),
        ("m", "containment"),
        ("m", "containment_size_changes"),
        ("grow", "jaccard"),
        ("grow", "containment"),
        ("grow", "containment_size_changes"),
    ]
    rows = table.set_index(["model", "statistic"])
    both = rows.drop(index="containment_size_changes", level="statistic")
    assert (both["n"] == 5 * 3).all() and (both["n_prompts"] == 2).all()
    # m's sets keep their size (3 tokens): no cell for the size-change row; grow's always change size
    assert rows.loc[("m", "containment_size_changes"), "n"] == 0
    assert rows.loc[("grow", "containment_size_changes"), ["n", "mean"]].tolist() == pytest.approx([15, 1.0])
    assert (rows["both_singleton_share"] == 0).all()
    jac, con = rows.loc[("m", "jaccard")], rows.loc[("m", "containment")]
    assert jac["mean"] == pytest.approx(0.4)
    assert (jac["q00"], jac["q50"], jac["q100"]) == pytest.approx((0.2, 0.4, 0.6))
    # equal sizes a = b: containment = 2J / (1 + J)
    assert (con["q00"], con["q50"], con["q100"]) == pytest.approx((1 / 3, 4 / 7, 3 / 4))
    assert con["mean"] == pytest.approx((1 / 3 + 4 / 7 + 3 / 4) / 3)
    assert rows.loc[("grow", "jaccard"), "mean"] == pytest.approx(0.5)
    assert rows.loc[("grow", "containment"), ["mean", "q00", "q100"]].tolist() == pytest.approx([1.0, 1.0, 1.0])
    for model in ("m", "grow"):
        stats_cols = ["mean", "ci_low", "ci_high", "q00", "q50", "q100"]
        assert (rows.loc[(model, "containment"), stats_cols] >= rows.loc[(model, "jaccard"), stats_cols]).all()
    with pytest.raises(ValueError, match=r"quantiles must lie in \[0, 1\]"):
        nucleus_overlap(ds, quantiles=(50,))


def test_overlap_by_depth_gives_both_statistics_per_layer_with_intervals():
    by_depth = overlap_by_depth(_overlap_store())
    assert by_depth.columns.tolist() == list(DEPTH_COLUMNS)
    m = by_depth[by_depth["model"] == "m"].set_index(["statistic", "layer"])
    assert m.loc["jaccard"].index.tolist() == [0, 1, 2]  # the last layer has no successor
    np.testing.assert_allclose(m.loc["jaccard", "mean"], [0.2, 0.4, 0.6], rtol=1e-6)
    np.testing.assert_allclose(m.loc["containment", "mean"], [1 / 3, 4 / 7, 3 / 4], rtol=1e-6)
    np.testing.assert_allclose(m.loc["jaccard", "depth"], [0.25, 0.5, 0.75])
    assert (m["n"] == 5).all() and (m["n_prompts"] == 2).all()
    grow = by_depth[by_depth["model"] == "grow"].set_index("statistic")
    np.testing.assert_allclose(grow.loc["containment", "mean"], [1.0, 1.0, 1.0])


def test_overlap_by_depth_interval_resamples_prompts_and_contains_the_mean():
    """Prompts at different overlap levels: every layer's interval is wide, and holds the mean."""
    rng = np.random.default_rng(3)
    levels = rng.uniform(0.2, 0.8, size=10)
    jac = np.clip(levels[:, None, None] + 0.02 * rng.normal(size=(10, 6, 5)), 0, 1)
    jac[..., -1] = np.nan
    sizes = rng.integers(5, 50, size=(10, 6, 5)).astype(np.int32)
    small, large = np.minimum(sizes[..., :-1], sizes[..., 1:]), np.maximum(sizes[..., :-1], sizes[..., 1:])
    jac[..., :-1] = np.minimum(jac[..., :-1], small / large)  # a Jaccard the sizes allow
    ds = combined_dataset({"m": np.ones((10, 6, 5))}, jaccard={"m": jac}, nucleus={"m": sizes})
    by_depth = overlap_by_depth(ds, n_boot=300, seed=1)
    assert len(by_depth) == 2 * 4
    assert (by_depth["ci_low"] < by_depth["mean"]).all() and (by_depth["mean"] < by_depth["ci_high"]).all()
    assert (by_depth["ci_high"] - by_depth["ci_low"] > 0.05).all()  # ten prompts, not sixty cells
    again = overlap_by_depth(ds, n_boot=300, seed=1)
    assert again.equals(by_depth)


def test_containment_of_a_nucleus_that_doubles_keeping_every_token_is_one():
    old, new = set(range(10)), set(range(20))
    jaccard = len(old & new) / len(old | new)
    assert jaccard == 0.5
    cells = np.array([[[jaccard, jaccard, np.nan]]], dtype=np.float32)  # grows 10 -> 20, shrinks 20 -> 10
    containment = containment_from_jaccard(cells, np.array([[[len(old), len(new), len(old)]]], dtype=np.int32))
    assert containment[0, 0, :2].tolist() == [1.0, 1.0] and np.isnan(containment[0, 0, 2])


def _random_chain(rng, n_layers, vocab):
    """Top-p sets of consecutive layers, each a random subset sharing part of the previous one."""
    sets = [set(rng.choice(vocab, size=rng.integers(1, 500), replace=False).tolist())]
    for _ in range(n_layers - 1):
        share = rng.random()  # the fraction of the previous set that stays
        keep = {t for t in sets[-1] if rng.random() < share}
        fresh = set(rng.choice(vocab, size=rng.integers(0, 2 * len(sets[-1]) + 1), replace=False).tolist())
        sets.append(keep | fresh or {0})
    return sets


def test_derived_containment_equals_containment_of_explicit_sets():
    rng = np.random.default_rng(7)
    p, t, n_layers, vocab = 4, 5, 6, 200_000
    jaccard = np.full((p, t, n_layers), np.nan, dtype=np.float32)  # float32 as in the store
    sizes = np.full((p, t, n_layers), -1, dtype=np.int32)
    direct = np.full((p, t, n_layers), np.nan)
    for i, j in np.ndindex(p, t - 1):  # the last token slot stays masked
        sets = _random_chain(rng, n_layers, vocab)
        sizes[i, j] = [len(s) for s in sets]
        for layer, (a, b) in enumerate(itertools.pairwise(sets)):
            jaccard[i, j, layer] = len(a & b) / len(a | b)
            direct[i, j, layer] = len(a & b) / min(len(a), len(b))
    derived = containment_from_jaccard(jaccard, sizes)
    assert np.array_equal(np.isnan(derived), np.isnan(direct))
    assert np.nanmin(direct) < 0.2 and np.nanmax(direct) > 0.8  # the sets span a range of overlaps
    np.testing.assert_allclose(derived, direct, rtol=0, atol=1e-6)


def test_containment_is_nan_where_a_size_is_masked_and_checks_its_input():
    jaccard = np.array([[[0.5, 0.5, np.nan]]])
    out = containment_from_jaccard(jaccard, np.array([[[4, -1, 4]]]))
    assert np.isnan(out).all()
    with pytest.raises(ValueError, match=r"share a \[P, T, L\] shape"):
        containment_from_jaccard(jaccard, np.array([[[4, 4]]]))
    with pytest.raises(ValueError, match=r"jaccard must lie in \[0, 1\]; got values from 0.5 to 1.5"):
        containment_from_jaccard(np.array([[[0.5, 1.5, np.nan]]]), np.array([[[4, 4, 4]]]))


def test_expansion_points_subsample_and_carry_depth():
    pts = spearman.expansion_points(_store(), max_points=7, seed=0)
    assert pts.groupby("model").size().to_dict() == {"up": 7, "down": 7}
    up = pts[pts["model"] == "up"]
    np.testing.assert_allclose(up["depth"], (up["layer"] + 1) / 6, rtol=1e-6)
    np.testing.assert_allclose(up["delta_nucleus"], 64 * up["delta_entropy"])


def test_cross_deltas_pair_layer_l_with_the_partner_next_layer():
    h = np.array([[[1.0, 2.0, 4.0]], [[3.0, 5.0, np.nan]]])  # [P=2, T=1, L=3]
    n = np.array([[[1, 2, 4]], [[3, 6, -1]]], dtype=np.int32)
    d_h, d_n, d_h0, d_n0, prompt = nulls.cross_deltas(h, n, np.array([1, 0]))
    # valid on both sides: layers (0, 1) of each prompt; prompt 0's partner is NaN at layer 2,
    # prompt 1 itself is NaN there
    np.testing.assert_array_equal(prompt, [0, 1])
    np.testing.assert_array_equal(d_h, [1.0, 2.0])
    np.testing.assert_array_equal(d_n, [1, 3])
    np.testing.assert_array_equal(d_h0, [5.0 - 1.0, 2.0 - 3.0])
    np.testing.assert_array_equal(d_n0, [6 - 1, 2 - 3])
    with pytest.raises(ValueError, match=r"partner be \[P\]"):
        nulls.cross_deltas(h, n, np.array([1]))


def test_cross_cells_derive_the_partner_containment_and_select_size_changes():
    jac = np.array([[[0.5, np.nan]], [[1.0, np.nan]]], dtype=np.float32)
    cross = np.array([[[0.25, np.nan]], [[0.0, np.nan]]], dtype=np.float32)
    sizes = np.array([[[2, 4]], [[3, 3]]], dtype=np.int32)
    cells = nulls.cross_cells(jac, cross, sizes, np.array([1, 0]))
    obs, null = cells[nulls.CONTAINMENT]
    # prompt 0: J 0.5 of sizes 2 and 4 -> |A & B| = 2, containment 1; vs its partner's 3: J 1/4 -> 1/2
    np.testing.assert_allclose(obs[:, 0, 0], [1.0, 1.0])
    np.testing.assert_allclose(null[:, 0, 0], [0.25 * 5 / 1.25 / 2, 0.0])
    obs, null = cells[CONTAINMENT_SIZE_CHANGES]
    assert np.isfinite(obs[:, 0, 0]).tolist() == [True, False]  # 2 -> 4 changes, 3 -> 3 does not
    assert np.isfinite(null[:, 0, 0]).tolist() == [True, True]  # 2 vs the partner's 3, 3 vs the partner's 4
    assert nulls.both_singleton_share(np.array([[[1, 1, 2]], [[1, 1, -1]]])) == pytest.approx(2 / 3)


def test_the_null_reads_the_recorded_partner_and_falls_back_to_extraction_rule():
    ds = planted.planted_store(planted.planted_logits(np.random.default_rng(0), 5, signal=False))
    ds = ds.assign_coords(partner=(("model", "prompt"), np.asarray([["p0003", "", "p0000", "p0001", "p0002"]])))
    index, name, unpartnered = nulls.partners(ds, "planted")
    assert index.tolist() == [3, -1, 0, 1, 2] and name == nulls.RECORDED and unpartnered == 1
    index, name, unpartnered = nulls.partners(ds.drop_vars("partner"), "planted")
    assert index.tolist() == [3, 4, 0, 1, 2] and name == nulls.NEXT_IN_STORE and unpartnered == 0  # one cycle
    none = ds.assign_coords(partner=(("model", "prompt"), np.full((1, 5), "", dtype=object)))  # an older store
    assert nulls.partners(none, "planted")[1] == nulls.NEXT_IN_STORE
    table = spearman.expansion_spearman(ds.drop_vars("partner"), n_boot=200)
    assert (
        table.columns.tolist() == list(spearman.SPEARMAN_COLUMNS) and table["null_name"].iloc[0] == nulls.NEXT_IN_STORE
    )
    overlap = nucleus_overlap(ds.drop_vars(["partner", "nucleus_jaccard_cross"]), n_boot=200)
    assert overlap["statistic"].tolist() == ["jaccard", "containment", "containment_size_changes"]
    assert overlap["null_estimate"].isna().all()  # a store extracted without the cross-prompt overlap


def _story_store(recorded_partner: list[str] | None = None):
    """Six prompts of three stories (two each); each story shares a strong effect on how entropy moves."""
    ds = planted.planted_store(planted.planted_logits(np.random.default_rng(3), 6, signal=False))
    ds = ds.assign_coords(story_id=("prompt", np.asarray(["s0", "s0", "s1", "s1", "s2", "s2"], dtype=object)))
    ds = ds.assign_attrs(dataset="tasks")
    if recorded_partner is not None:
        ds = ds.assign_coords(partner=(("model", "prompt"), np.asarray([recorded_partner], dtype=object)))
    return ds


def test_a_partner_of_the_prompt_own_source_is_not_used_and_is_counted():
    """A store extracted when partners were the next prompt of the batch: same-story partners leave the null."""
    ds = _story_store(["p0001", "p0000", "p0004", "p0005", "p0002", "p0003"])  # 0 <-> 1 share story s0
    index, _, unpartnered = nulls.partners(ds, "planted")
    assert index.tolist() == [-1, -1, 4, 5, 2, 3] and unpartnered == 2
    table = spearman.expansion_spearman(ds, n_boot=200).iloc[0]
    assert table["null_unpartnered"] == 2 and table["n_sources"] == 3 and table["n_prompts"] == 6
    overlap = nucleus_overlap(ds, n_boot=200)
    assert (overlap["null_unpartnered"] == 2).all() and (overlap["n_sources"] == 3).all()
    # without a recorded partner, extraction's rule over the whole store: every partner of another story
    index, _, unpartnered = nulls.partners(ds.drop_vars("partner"), "planted")
    stories = ds.story_id.values
    assert unpartnered == 0 and all(stories[i] != stories[j] for i, j in enumerate(index))
    with pytest.raises(ValueError, match="partner and sources must hold one value per prompt"):
        nulls.other_source(np.arange(3), np.arange(2))


def test_expansion_intervals_resample_sources_not_prompts():
    """Prompts of one story share its effect: the interval is the story-cluster bootstrap, over 3 units."""
    ds = _story_store()
    entropy = ds.entropy.values[0].astype(np.float64)
    nucleus = ds.nucleus_size.values[0]
    row = spearman.expansion_spearman(ds, n_boot=300).iloc[0]
    d_h, d_n, _, prompt = spearman.layer_deltas(entropy, nucleus)
    ranks = (stats.rankdata(d_h), stats.rankdata(d_n))
    stories = nulls.source_codes(ds.story_id.values, 6)
    assert (row["ci_low"], row["ci_high"]) == cluster_bootstrap_correlation(*ranks, stories[prompt], n_boot=300)
    assert (row["ci_low"], row["ci_high"]) != cluster_bootstrap_correlation(*ranks, prompt, n_boot=300)
    overlap = nucleus_overlap(ds, n_boot=300).set_index("statistic")
    assert (overlap["n_sources"] == 3).all() and (overlap["n_prompts"] == 6).all()
    by_depth = overlap_by_depth(ds, n_boot=300)
    assert (by_depth["n_prompts"] == 6).all()


def test_blank_partners_are_another_sample_of_one_shared_context():
    ds = planted.planted_store(planted.planted_logits(np.random.default_rng(0), 4, signal=False))
    table = spearman.expansion_spearman(ds.assign_attrs(dataset="blank"), n_boot=200).iloc[0]
    assert table["null_name"] == nulls.RECORDED_SAMPLE and table["n_sources"] == 4


def test_spearman_null_is_mechanical_but_a_prompt_specific_coupling_is_shown():
    """Within each prompt N = c_i exp(H): Delta N tracks Delta H of the same prompt; across prompts
    the scales c_i differ by orders of magnitude, so the cross-prompt pairs do not."""
    rng = np.random.default_rng(0)
    h = rng.uniform(0.5, 3.0, size=(20, 4, 6))
    scale = np.exp(rng.uniform(0, 6, size=(20, 1, 1)))
    ds = combined_dataset({"m": h}, nucleus={"m": np.rint(scale * np.exp(h)).astype(np.int32) + 1})
    row = spearman.expansion_spearman(ds, n_boot=500).iloc[0]
    assert row["spearman"] > 0.9 and row["null_estimate"] < 0.5
    assert row["beyond_low"] > 0 and row["null_name"] == nulls.NEXT_IN_STORE and row["null_n"] == 20 * 4 * 5


def test_planted_null_spearman_is_shown_beyond_its_null_in_at_most_five_percent_of_draws():
    assert planted.spearman_planted_rate(12, draws=100, n_boot=200, shown=shown_beyond) <= 0.05


def test_planted_null_containment_is_shown_beyond_its_null_in_at_most_five_percent_of_draws():
    assert planted.overlap_planted_rate(12, shown=shown_beyond, draws=100, n_boot=200) <= 0.05


def test_planted_tables_carry_the_null_of_their_rates():
    ds = planted.planted_store(planted.planted_logits(np.random.default_rng(1), 12, signal=True))
    overlap = nucleus_overlap(ds, n_boot=200).set_index("statistic")
    assert (overlap["null_name"] == nulls.RECORDED).all() and (overlap["beyond_low"] > 0).all()
    assert (
        (overlap["null_n"] == 12 * planted.PLANTED_TOKENS * (planted.PLANTED_LAYERS - 1))
        .loc[["jaccard", "containment"]]
        .all()
    )
    rho_row = spearman.expansion_spearman(ds, n_boot=200).iloc[0]
    assert rho_row["null_estimate"] > 0.5  # entropy and nucleus size rank together in any one distribution


def test_planted_persisting_shortlists_are_shown_beyond_the_containment_null():
    assert planted.overlap_planted_rate(12, shown=shown_beyond, draws=5, n_boot=200, signal=True) == 1.0
    assert (
        planted.overlap_planted_rate(
            12, shown=shown_beyond, draws=5, n_boot=200, signal=True, statistic=CONTAINMENT_SIZE_CHANGES
        )
        == 1.0
    )
    with pytest.raises(ValueError, match="statistic must be one of"):
        planted.overlap_planted_rate(12, shown=shown_beyond, draws=1, statistic="overlap")


# --------------------------------------------------------------------------- planted draws on the row's design


def _cycled_store(n_prompts: int = 16, seed: int = 0):
    """A planted store of four stories whose partners were dealt as extraction deals them, in batches of 8."""
    from entropy_lens.model.batching import batch_partners

    ds = planted.planted_store(planted.planted_logits(np.random.default_rng(seed), n_prompts, signal=False))
    stories = np.asarray([f"s{i % 4}" for i in range(n_prompts)], dtype=object)
    partner = np.full(n_prompts, -1)
    rng = np.random.default_rng(seed)
    for start in range(0, n_prompts, 8):
        rows = np.arange(start, min(start + 8, n_prompts))
        partner[rows] = batch_partners(rows, stories[rows], rng)
    ids = ds.prompt.values
    ds = ds.assign_coords(story_id=("prompt", stories), partner=(("model", "prompt"), ids[partner][None, :]))
    return ds.assign_attrs(dataset="tasks")


def test_the_spearman_draws_read_a_second_pairing_in_each_recorded_batch():
    from entropy_lens.analysis.expansion import planted_draws
    from entropy_lens.core.draws import DrawSettings

    ds = _cycled_store()
    batches = planted_draws.recorded_batches(ds, "planted")
    assert sorted(len(b) for b in batches) == [8, 8]  # the batches are the cycles of the recorded partners
    recorded = nulls.recorded_partners(ds, "planted")
    rng = np.random.default_rng(0)
    stories = ds.story_id.values
    for _ in range(10):
        second = planted_draws.second_pairing(batches, stories, rng, avoid=recorded)
        has = second >= 0
        assert (second[has] != recorded[has]).all() and (stories[second[has]] != stories[has]).all()
        assert all(np.isin(second[b][second[b] >= 0], b).all() for b in batches)  # within the batch
    draws = planted_draws.spearman_draws(ds, n_boot=200, seed=0, draws=DrawSettings(min_draws=3))
    assert list(draws.columns) == list(planted_draws.DRAW_COLUMNS) and len(draws) == 3
    assert (draws["design"] == planted_draws.OWN_DATA).all() and (draws["n_sources"] == 4).all()
    np.testing.assert_allclose(draws["observed"] - draws["null_estimate"], draws["beyond"])
    row = spearman.expansion_spearman(ds, n_boot=200).iloc[0]
    assert (draws["null_estimate"] == row["null_estimate"]).all()  # the row's own null, beside a second pairing


def test_simulated_top_p_sets_are_the_lens_sets_and_the_overlap_draws_keep_the_row_counts():
    import torch

    from entropy_lens.analysis.expansion import planted_draws
    from entropy_lens.core.draws import DrawSettings
    from entropy_lens.lens import metrics

    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((400, 64)) * np.exp(rng.uniform(-0.5, 1.5, size=(400, 1)))).astype(np.float32)
    want = metrics.row_metrics(torch.from_numpy(logits), top_p=planted_draws.TOP_P, alphas=(1.0,)).nucleus_mask
    np.testing.assert_array_equal(planted_draws.nucleus_members(logits), want.numpy())
    ds = _cycled_store()
    draws = planted_draws.overlap_draws(ds, n_boot=200, seed=0, draws=DrawSettings(min_draws=2))
    assert draws.groupby("statistic").size().to_dict() == {
        "containment": 2,
        "containment_size_changes": 2,
        "jaccard": 2,
    }
    jaccard = draws[draws["statistic"] == "jaccard"]
    assert (jaccard["null_n"] == 16 * planted.PLANTED_TOKENS * (planted.PLANTED_LAYERS - 1)).all()
    assert (draws["design"] == planted_draws.SIMULATED).all()
