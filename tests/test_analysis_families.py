"""Family fingerprints on constructed families with known shapes and sizes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from synthetic import combined_dataset, lazy, linear_profiles

from entropy_lens.analysis.families import clustering, shapes
from entropy_lens.analysis.families.pairs import family_size_pairs, size_pairs
from entropy_lens.analysis.families.profiles import layer_profiles, mean_profiles, sample_profiles
from entropy_lens.store import schema

SHAPES = {
    "rise": lambda d: 1.0 + 3.0 * d,
    "fall": lambda d: 4.0 - 3.0 * d,
    "hump": lambda d: 1.0 + 3.0 * np.sin(np.pi * d),
}
SIZES = {"small": (6, 500_000_000), "large": (12, 5_000_000_000)}


def _families_store(tmp_path=None, n_prompts=6, n_tokens=3, noise=0.1):
    """Three families x two sizes; sizes cross families, so size buckets cannot explain shapes."""
    rng = np.random.default_rng(0)
    profiles, families, n_params = {}, {}, {}
    for fam, shape in SHAPES.items():
        for size, (n_layers, params) in SIZES.items():
            name = f"{fam}-{size}"
            depth = schema.depth_of(np.arange(n_layers), n_layers).astype(float)
            profiles[name] = shape(depth) + noise * rng.normal(size=(n_prompts, n_tokens, n_layers))
            families[name], n_params[name] = fam, params
    profiles["rise-small"][0, 1:] = np.nan  # an early stop
    ds = combined_dataset(profiles, families=families, n_params=n_params)
    return ds if tmp_path is None else lazy(ds, tmp_path)


def test_linear_profiles_of_different_depths_resample_to_the_same_grid_curve():
    ds = combined_dataset(
        {"a": linear_profiles(2, 3, 4, slope=2.0, offset=1.0), "b": linear_profiles(2, 3, 10, slope=2.0, offset=1.0)}
    )
    means = mean_profiles(layer_profiles(ds), grid_points=7)
    grid = means[schema.DEPTH].values
    assert grid[0] == pytest.approx(0.25) and grid[-1] == 1.0
    np.testing.assert_allclose(means.sel(model="a").values, 1.0 + 2.0 * grid, rtol=1e-6)
    np.testing.assert_allclose(means.sel(model="b").values, 1.0 + 2.0 * grid, rtol=1e-6)


def test_layer_profiles_average_valid_tokens_and_keep_padding(tmp_path):
    prof = np.ones((2, 3, 2))
    prof[0, 2] = np.nan
    prof[1] = 4.0
    ds = lazy(combined_dataset({"a": prof, "b": np.ones((2, 3, 4))}), tmp_path)
    lp = layer_profiles(ds)
    np.testing.assert_allclose(lp.sel(model="a").values[:2], (2 * 1.0 + 3 * 4.0) / 5)
    assert np.isnan(lp.sel(model="a").values[2:]).all()
    assert int(lp.sel(model="b")[schema.N_LAYERS]) == 4


def test_clusters_follow_family_not_size(tmp_path):
    samples = sample_profiles(_families_store(tmp_path), grid_points=16)
    assert samples.sizes == {"sample": 36, "grid": 16}
    scores = clustering.clustering_scores(samples).set_index("grouping")
    assert scores.loc["family", "ari_models"] == pytest.approx(1.0)
    assert scores.loc["family", "ari_samples"] == pytest.approx(1.0)
    assert scores.loc["family", "silhouette_samples"] > 0.5
    assert scores.loc["family", "silhouette_models"] > 0.5
    assert scores.loc["size", "ari_models"] < 0.3
    assert scores.loc["size", "silhouette_samples"] < 0.2
    assert scores.loc["size", "n_groups"] == 2 and scores.loc["family", "n_models"] == 6


def test_distances_and_linkage_of_model_means():
    ds = combined_dataset({"one": np.ones((2, 2, 3)), "three": np.full((2, 2, 5), 3.0)})
    means = mean_profiles(layer_profiles(ds), grid_points=5)
    dist = clustering.model_distances(means)
    assert dist.loc["one", "three"] == pytest.approx(2.0) and dist.loc["three", "one"] == pytest.approx(2.0)
    assert dist.loc["one", "one"] == 0.0
    assert clustering.linkage_matrix(means).shape == (1, 4)
    with pytest.raises(ValueError, match="clustering needs >= 2 models"):
        clustering.linkage_matrix(means.isel(model=[0]))


def test_size_buckets():
    got = clustering.size_buckets([5e8, 1e9, 3e9, 4e9, 9e9])
    assert got.tolist() == ["<1B", "1B-4B", "1B-4B", ">=4B", ">=4B"]
    assert clustering.size_buckets([1e8, 0], edges=(5e8,)).tolist() == ["<500M", clustering.UNKNOWN_SIZE]


def test_embeddings_have_one_row_per_sample(caplog):
    samples = sample_profiles(_families_store(n_prompts=2), grid_points=8)
    pca = clustering.embed_samples(samples, method="pca")
    assert len(pca) == 12 and np.isfinite(pca[["x", "y"]].to_numpy()).all()
    assert set(pca.columns) >= {"model", "prompt", "family", "n_params", "x", "y"}
    with caplog.at_level(logging.WARNING):
        tsne = clustering.embed_samples(samples, method="tsne", perplexity=30.0)
    assert len(tsne) == 12 and np.isfinite(tsne[["x", "y"]].to_numpy()).all()
    assert "perplexity" in caplog.text
    with pytest.raises(ValueError, match="embedding method must be one of"):
        clustering.embed_samples(samples, method="umap")


def test_size_pairs_recover_a_known_subsampling():
    rng = np.random.default_rng(5)
    big = rng.uniform(1.0, 4.0, size=12)
    small = big[1::2]  # depths (2l + 2) / 12 = (l + 1) / 6: exact layers of the big model
    other = rng.uniform(1.0, 4.0, size=6)
    ds = combined_dataset(
        {
            "q-1.5b": np.broadcast_to(big, (2, 2, 12)).copy(),
            "q-0.5b": np.broadcast_to(small, (2, 2, 6)).copy(),
            "z-0.5b": np.broadcast_to(other, (2, 2, 6)).copy(),
            "z-1.5b": np.broadcast_to(big, (2, 2, 12)).copy(),
        },
        families={"q-1.5b": "q", "q-0.5b": "q", "z-0.5b": "z", "z-1.5b": "z"},
    )
    lp = layer_profiles(ds)
    assert family_size_pairs(lp) == [("q-0.5b", "q-1.5b"), ("z-0.5b", "z-1.5b")]
    pairs = size_pairs(lp).set_index("family")
    assert pairs.loc["q", "rmse_subsampled"] == pytest.approx(0.0, abs=1e-6)
    assert pairs.loc["q", "mae_subsampled"] == pytest.approx(0.0, abs=1e-6)
    assert pairs.loc["q", "corr_depth"] > 0.8
    assert pairs.loc["z", "rmse_subsampled"] > 0.3
    assert pairs.loc["q", "small_layers"] == 6 and pairs.loc["q", "large_layers"] == 12


def test_shape_descriptors_of_a_known_profile():
    ds = combined_dataset({"m": np.broadcast_to(np.array([1.0, 3.0, 2.0, 5.0]), (1, 1, 4)).copy()})
    row = shapes.shape_descriptors(layer_profiles(ds)).iloc[0]
    assert (row["start"], row["final"], row["peak"], row["peak_depth"]) == pytest.approx((1.0, 5.0, 5.0, 1.0))
    assert (row["max_rise"], row["max_rise_depth"]) == pytest.approx((3.0, 1.0))
    assert (row["max_fall"], row["max_fall_depth"]) == pytest.approx((-1.0, 0.75))
