"""Feature matrices: metric selection, masked-token rules, modes, depth resampling."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from synthetic import ALPHAS, combined_dataset, lazy, linear_profiles, renyi_from_entropy

from entropy_lens.analysis.bands import profile_bands
from entropy_lens.analysis.depth import depth_grid, resample_depth
from entropy_lens.analysis.features import (
    MASK_RULES,
    FeatureSettings,
    apply_mask_rule,
    metric_array,
    model_features,
    pooled_features,
    token_features,
    valid_lengths,
)
from entropy_lens.store import schema


def _masked_profiles() -> np.ndarray:
    """Three prompts, 5 tokens, 2 layers; valid lengths 5, 3, 4; values encode (prompt, token, layer)."""
    p = np.arange(3)[:, None, None] * 100 + np.arange(5)[None, :, None] * 10 + np.arange(2)[None, None, :] + 1.0
    p[1, 3:] = np.nan
    p[2, 4:] = np.nan
    return p


def test_valid_lengths_count_leading_finite_slots():
    assert valid_lengths(_masked_profiles()).tolist() == [5, 3, 4]


def test_truncate_cuts_every_prompt_to_the_shortest_valid_length():
    prof = _masked_profiles()
    out, keep = apply_mask_rule(prof, "truncate")
    assert keep.all()
    assert out.shape == (3, 3, 2)
    np.testing.assert_array_equal(out, prof[:, :3])


def test_last_fills_masked_slots_with_the_last_valid_token_profile():
    prof = _masked_profiles()
    out, _ = apply_mask_rule(prof, "last")
    assert out.shape == prof.shape and np.isfinite(out).all()
    np.testing.assert_array_equal(out[0], prof[0])
    np.testing.assert_array_equal(out[1, 3], prof[1, 2])
    np.testing.assert_array_equal(out[1, 4], prof[1, 2])
    np.testing.assert_array_equal(out[2, 4], prof[2, 3])
    assert (out != 0).all()  # nothing zero-filled


@pytest.mark.parametrize("rule", MASK_RULES)
def test_prompts_without_a_valid_token_are_dropped_with_a_warning(rule, caplog):
    prof = _masked_profiles()
    prof[1] = np.nan
    with caplog.at_level(logging.WARNING):
        out, keep = apply_mask_rule(prof, rule)
    assert keep.tolist() == [True, False, True]
    assert out.shape[0] == 2 and np.isfinite(out).all()
    assert "no valid token" in caplog.text


def test_all_masked_profiles_are_an_error():
    with pytest.raises(ValueError, match="no prompt has a valid"):
        apply_mask_rule(np.full((2, 3, 2), np.nan), "last")


def test_unknown_mask_rule_is_an_error():
    with pytest.raises(ValueError, match="mask_rule must be one of"):
        apply_mask_rule(_masked_profiles(), "zero")


def test_feature_modes_have_the_documented_values():
    prof = np.arange(2 * 6 * 3, dtype=float).reshape(2, 6, 3)
    np.testing.assert_array_equal(token_features(prof, "concat"), prof.reshape(2, 18))
    np.testing.assert_array_equal(token_features(prof, "mean"), prof.mean(axis=1))
    windows = token_features(prof, "windows", n_windows=3)
    expected = np.concatenate([prof[:, i : i + 2].mean(axis=1) for i in (0, 2, 4)], axis=1)
    np.testing.assert_array_equal(windows, expected)


def test_more_windows_than_tokens_is_an_error():
    with pytest.raises(ValueError, match="exceeds the 2 usable token slots"):
        token_features(np.zeros((1, 2, 3)), "windows", n_windows=3)


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match="feature mode must be one of"):
        FeatureSettings(mode="max")
    with pytest.raises(ValueError, match="n_windows must be a positive int"):
        FeatureSettings(n_windows=0)


def _store(tmp_path=None):
    rng = np.random.default_rng(1)
    short = rng.uniform(1, 3, size=(4, 5, 3))
    short[1, 2:] = np.nan
    ds = combined_dataset(
        {"short": short, "deep": rng.uniform(1, 3, size=(4, 5, 6))},
        families={"short": "a", "deep": "b"},
        prompt_labels={"task": ["x", "x", "y", "y"]},
    )
    return ds if tmp_path is None else lazy(ds, tmp_path)


def test_metric_array_selects_renyi_at_alpha_and_checks_arguments():
    ds = _store()
    got = metric_array(ds, schema.RENYI, ALPHAS[1]).values
    np.testing.assert_allclose(got, renyi_from_entropy(ds[schema.ENTROPY].values, ALPHAS[1]), rtol=1e-6)
    with pytest.raises(ValueError, match="takes no alpha"):
        metric_array(ds, schema.ENTROPY, 2.0)
    with pytest.raises(ValueError, match="needs an alpha"):
        metric_array(ds, schema.RENYI)
    with pytest.raises(ValueError, match=r"available alphas: \[0.5, 2.0\]"):
        metric_array(ds, schema.RENYI, 3.0)
    with pytest.raises(ValueError, match="metric must be one of"):
        metric_array(ds, "nucleus_size")


def test_model_features_use_real_layers_and_match_on_a_lazy_store(tmp_path):
    eager, lazy_ds = _store(), _store(tmp_path)
    settings = FeatureSettings(mode="concat", mask_rule="truncate")
    a = model_features(eager, "short", settings=settings)
    b = model_features(lazy_ds, "short", settings=settings)
    assert a.X.shape == (4, 2 * 3)  # truncated to 2 valid tokens, 3 real layers (store is 6 wide)
    np.testing.assert_array_equal(a.X, b.X)
    assert list(a.prompts) == list(eager.indexes[schema.PROMPT])
    assert np.isfinite(a.X).all()


def test_model_features_keep_requested_prompt_order():
    ds = _store()
    ids = ["p0003", "p0000"]
    feats = model_features(ds, "deep", prompts=ids, settings=FeatureSettings(mode="mean"))
    assert list(feats.prompts) == ids
    expected = ds[schema.ENTROPY].sel(model="deep", prompt=ids).values.mean(axis=1)
    np.testing.assert_allclose(feats.X, expected, rtol=1e-6)


def test_unknown_model_is_an_error():
    with pytest.raises(ValueError, match="model 'nope' is not in the store"):
        model_features(_store(), "nope")


def test_resample_depth_equals_np_interp():
    rng = np.random.default_rng(0)
    depth = np.sort(rng.uniform(0.1, 1.0, 7))
    values = rng.normal(size=(3, 4, 7))
    grid = np.linspace(0.0, 1.0, 11)
    got = resample_depth(values, depth, grid)
    expected = np.apply_along_axis(lambda v: np.interp(grid, depth, v), -1, values)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_linear_profiles_at_different_depths_map_exactly_onto_the_grid():
    grid = depth_grid([4, 10], 9)
    assert grid[0] == pytest.approx(0.25) and grid[-1] == 1.0
    for n in (4, 10):
        prof = linear_profiles(1, 1, n, slope=2.0, offset=0.5)[0, 0]
        np.testing.assert_allclose(resample_depth(prof, schema.depth_of(np.arange(n), n), grid), 0.5 + 2.0 * grid)


def test_resample_rejects_padded_depths():
    with pytest.raises(ValueError, match="strictly increasing"):
        resample_depth(np.zeros(3), np.array([0.5, 1.0, np.nan]), np.linspace(0.5, 1, 3))


def test_pooled_features_stack_models_on_the_common_grid():
    ds = _store()
    feats = pooled_features(ds, settings=FeatureSettings(mode="mean", grid_points=5))
    assert feats.X.shape == (8, 5)
    assert list(feats.models) == ["short"] * 4 + ["deep"] * 4
    # "mean" over the "last"-filled short prompt: token 1 is repeated into slots 2..4.
    short = ds[schema.ENTROPY].sel(model="short").values[:, :, :3].astype(float)
    short[1, 2:] = short[1, 1]
    grid = depth_grid([3, 6], 5)
    expected = resample_depth(short.mean(axis=1), schema.depth_of(np.arange(3), 3), grid)
    np.testing.assert_allclose(feats.X[:4], expected, rtol=1e-6)


def test_profile_bands_average_valid_tokens_per_label():
    prof = np.zeros((4, 3, 2))
    prof[:2] = 1.0
    prof[2:] = 2.0
    prof[3, 2] = np.nan  # masked slot must not pull the mean down
    ds = combined_dataset({"m": prof}, prompt_labels={"task": ["x", "x", "y", "y"]})
    bands = profile_bands(ds, "m", "task", band="std")
    assert set(bands["value"]) == {"x", "y"}
    y = bands[bands["value"] == "y"]
    np.testing.assert_allclose(y["mean"], 2.0)
    np.testing.assert_allclose(y["upper"] - y["lower"], 0.0)
    assert (y["n"] == 2).all()
    np.testing.assert_allclose(y["depth"], [0.5, 1.0])
    with pytest.raises(ValueError, match="band must be one of"):
        profile_bands(ds, "m", "task", band="iqr")
    with pytest.raises(ValueError, match="label 'style' is not a coordinate on 'prompt'"):
        profile_bands(ds, "m", "style")
