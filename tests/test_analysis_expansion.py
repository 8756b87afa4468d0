"""Expansion/pruning statistics on constructed profiles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from synthetic import combined_dataset, lazy

from entropy_lens.analysis import expansion as E
from entropy_lens.core.intervals import cluster_bootstrap_correlation


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
    table = E.expansion_spearman(_store(tmp_path)).set_index("model")
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
    row = E.expansion_spearman(ds, n_boot=400).iloc[0]
    assert row["n_prompts"] == p and row["n"] == p * t * (layers - 1)
    assert row["ci_low"] < row["spearman"] < row["ci_high"]
    d_h, d_n, _, _ = E.layer_deltas(h, nucleus)
    ranks = (stats.rankdata(d_h), stats.rankdata(d_n))
    row_lo, row_hi = cluster_bootstrap_correlation(*ranks, np.arange(d_h.size), n_boot=400)
    assert row["ci_high"] - row["ci_low"] > 1.5 * (row_hi - row_lo)


def test_sample_size_counts_valid_adjacent_layer_pairs_only():
    table = E.expansion_spearman(_store()).set_index("model")
    assert table.loc["up", "n"] == (5 * 4 - 2) * (6 - 1)  # 2 masked tokens, 5 layer pairs
    assert table.loc["down", "n"] == 5 * 4 * (3 - 1)  # padded layers 3..5 never enter


def test_layer_deltas_are_differences_of_adjacent_layers():
    h = np.array([[[1.0, 3.0, 2.0]]])
    n = np.array([[[5, 9, -1]]])
    d_h, d_n, layer, prompt = E.layer_deltas(h, n)
    assert d_h.tolist() == [2.0] and d_n.tolist() == [4.0] and layer.tolist() == [1] and prompt.tolist() == [0]
    d_h, d_n, _, _ = E.layer_deltas(h, np.array([[[1, 4, 2]]]), log_nucleus=True)
    np.testing.assert_allclose(d_n, [np.log(4), np.log(0.5)])
    with pytest.raises(ValueError, match=r"share a \[P, T, L\] shape"):
        E.layer_deltas(h, n[..., :2])


def test_spearman_is_nan_on_constant_input():
    rho, p = E.spearman(np.ones(10), np.arange(10.0))
    assert np.isnan(rho) and np.isnan(p)


def test_nucleus_overlap_summarizes_valid_cells():
    h = np.ones((2, 3, 4))
    h[1, 2] = np.nan
    jac = np.broadcast_to(np.array([0.2, 0.4, 0.6, np.nan]), (2, 3, 4)).copy()
    ds = combined_dataset({"m": h}, jaccard={"m": jac})
    row = E.nucleus_overlap(ds, quantiles=(0.0, 0.5, 1.0)).iloc[0]
    assert row["n"] == 5 * 3
    assert row["mean"] == pytest.approx(0.4)
    assert (row["q00"], row["q50"], row["q100"]) == pytest.approx((0.2, 0.4, 0.6))
    by_depth = E.overlap_by_depth(ds)
    assert by_depth["layer"].tolist() == [0, 1, 2]
    np.testing.assert_allclose(by_depth["mean"], [0.2, 0.4, 0.6])
    np.testing.assert_allclose(by_depth["depth"], [0.25, 0.5, 0.75])
    with pytest.raises(ValueError, match=r"quantiles must lie in \[0, 1\]"):
        E.nucleus_overlap(ds, quantiles=(50,))


def test_expansion_points_subsample_and_carry_depth():
    pts = E.expansion_points(_store(), max_points=7, seed=0)
    assert pts.groupby("model").size().to_dict() == {"up": 7, "down": 7}
    up = pts[pts["model"] == "up"]
    np.testing.assert_allclose(up["depth"], (up["layer"] + 1) / 6, rtol=1e-6)
    np.testing.assert_allclose(up["delta_nucleus"], 64 * up["delta_entropy"])


def test_study_figures_are_the_papers():
    assert E.STUDY_SPEARMAN == {
        "Llama-3.2-1B": 0.8250,
        "Llama-3.2-3B": 0.7365,
        "Gemma-2-2B": 0.8804,
        "Gemma-2-9B": 0.8540,
    }
