"""Same-family pairs against other families, on constructed families whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.families import pairs, scales
from entropy_lens.analysis.families.gaps import ALIGNMENT_GAP, FAMILY_GAP, RESOLUTION_GAP, STATISTICS, resolution_gap
from entropy_lens.core.intervals import bootstrap_group_means, percentile_interval
from entropy_lens.store import schema
from entropy_lens.verdicts import decision, rules

SIZES = {"small": 6, "large": 12}
VOCAB = 50_000


def _store(
    shapes: dict[str, dict[str, object]],
    *,
    n_samples: int = 20,
    noise: float = 0.1,
    seed: int = 0,
    vocab: dict[str, int] | None = None,
):
    """Models ``{family}-{size}`` whose samples are ``shapes[family][size](depth)`` plus per-sample noise.

    ``vocab``: model -> vocabulary size (default :data:`VOCAB`; ``{}`` leaves the coordinate out).
    """
    rng = np.random.default_rng(seed)
    profiles, families = {}, {}
    for family, by_size in shapes.items():
        for size, shape in by_size.items():
            n_layers = SIZES[size]
            depth = schema.depth_of(np.arange(n_layers), n_layers).astype(float)
            level = noise * rng.normal(size=(n_samples, 1, 1))  # a sample's own offset, shared by its tokens
            profiles[f"{family}-{size}"] = shape(depth) + level + 0.01 * rng.normal(size=(n_samples, 2, n_layers))
            families[f"{family}-{size}"] = family
    ds = combined_dataset(profiles, families=families, vocab_sizes={m: (vocab or {}).get(m, VOCAB) for m in profiles})
    return ds.drop_vars(scales.VOCAB_SIZE) if vocab == {} else ds


def rise(d):
    return 1.0 + 3.0 * d


def fall(d):
    return 4.0 - 3.0 * d


def hump(d):
    return 1.0 + 3.0 * np.sin(np.pi * d)


def _rows(ds, scale=scales.NATS, **kwargs):
    """One scale's rows of the family gap and the resolution gap, by ``(statistic, family)``."""
    table = pairs.family_pairs(ds, n_boot=300, **kwargs)
    mine = table[(table["scale"] == scale) & (table["statistic"] != ALIGNMENT_GAP)]
    return {(r["statistic"], r["family"]): r for r in mine.to_dict("records")}


def _by_scale(ds, statistic, family, **kwargs):
    """``{scale: row}`` of one statistic and family."""
    table = pairs.family_pairs(ds, n_boot=300, **kwargs)
    mine = table[(table["statistic"] == statistic) & (table["family"] == family)]
    assert mine["scale"].is_unique
    return {r["scale"]: r for r in mine.to_dict("records")}


def _verdict(row) -> decision.Verdict:
    gap = decision.Interval(row["gap"], row["gap_low"], row["gap_high"])
    if row["statistic"] == FAMILY_GAP:
        return rules.family_not_size(gap, n_samples=int(row["n_samples"]), nearest=row["nearest"])
    return rules.size_resolution(gap, n_samples=int(row["n_samples"]))


def test_families_with_their_own_schedule_reproduce_both_claims(tmp_path):
    ds = lazy(_store({f.__name__: {"small": f, "large": f} for f in (rise, fall, hump)}), tmp_path)
    rows = _rows(ds, grid_points=16)
    assert len(rows) == 6
    for (statistic, family), row in rows.items():
        verdict = _verdict(row)
        assert verdict.verdict == decision.REPRODUCED, (statistic, family, verdict.why)
        assert row["gap_low"] <= row["gap"] <= row["gap_high"] and row["n_other"] == 4 and row["n_samples"] == 20
    assert rows[(RESOLUTION_GAP, "rise")]["same"] < 0.1  # the same line, read at the smaller model's depths
    assert "lies above 0" in _verdict(rows[(FAMILY_GAP, "rise")]).why


def test_profiles_set_by_size_not_family_are_not_reproduced():
    """Both families' small models rise and their large models fall: size, not family, sets the profile."""
    ds = _store({"a": {"small": rise, "large": fall}, "b": {"small": rise, "large": fall}})
    rows = _rows(ds)
    for key, row in rows.items():
        verdict = _verdict(row)
        assert verdict.verdict == decision.NOT_REPRODUCED, (key, verdict.why)
        assert "lies below 0" in verdict.why
    assert rows[(FAMILY_GAP, "a")]["nearest"] in {"b-small", "b-large"}
    assert rows[(RESOLUTION_GAP, "a")]["nearest"] == "b-small"


def test_an_effect_lost_in_sample_noise_is_inconclusive_with_the_samples_it_needs():
    """Family b is family a shifted by 0.3 nats; samples scatter by 1 nat: 20 samples cannot tell."""
    shift = {"small": lambda d: rise(d) + 0.3, "large": lambda d: rise(d) + 0.3}
    ds = _store({"a": {"small": rise, "large": rise}, "b": shift}, n_samples=20, noise=1.0, seed=3)
    for row in _rows(ds).values():
        verdict = _verdict(row)
        assert verdict.verdict == decision.INCONCLUSIVE and "straddles 0" in verdict.why, verdict.why
        assert "effect too small to decide with 20 blank samples per model: about" in verdict.why


def test_one_family_has_no_gap_and_few_samples_are_inconclusive():
    ds = _store({"a": {"small": rise, "large": rise}}, n_samples=4)
    rows = _rows(ds)
    assert set(rows) == {(FAMILY_GAP, "a"), (RESOLUTION_GAP, "a")}
    row = rows[(FAMILY_GAP, "a")]
    assert row["n_other"] == 0 and math.isnan(row["gap"]) and row["same"] >= 0
    assert _verdict(row).verdict == decision.INCONCLUSIVE and "not computed" in _verdict(row).why
    aligned = _by_scale(_store({"a": {"small": rise, "large": rise}}, n_samples=4), ALIGNMENT_GAP, "a")
    assert all(math.isfinite(r["gap"]) for r in aligned.values())  # the alignment gap needs the pair alone
    few = _rows(_store({"a": {"small": rise, "large": rise}, "b": {"small": fall}}, n_samples=4))
    assert "only 4 blank samples" in _verdict(few[(FAMILY_GAP, "a")]).why
    assert pairs.family_pairs(_store({"a": {"small": rise}, "b": {"small": fall}})).empty  # no pair


def test_every_pair_has_each_statistic_on_each_scale_and_bad_scales_are_refused():
    ds = _store({"a": {"small": rise, "large": rise}, "b": {"small": fall, "large": fall}})
    table = pairs.family_pairs(ds, n_boot=50)
    assert tuple(table.columns) == pairs.COLUMNS and pairs.COLUMNS[:2] == ("statistic", "scale")
    assert len(table) == 2 * len(STATISTICS) * len(scales.SCALES)
    assert set(zip(table["statistic"], table["scale"], strict=True)) == {
        (t, s) for t in STATISTICS for s in scales.SCALES
    }
    only = pairs.family_pairs(ds, n_boot=50, scales=(scales.CENTRED,))
    assert set(only["scale"]) == {scales.CENTRED} and len(only) == 2 * len(STATISTICS)
    for bad in ("nats", (), ("nats", "bits")):
        with pytest.raises(ValueError, match="scales must be a non-empty sequence of"):
            pairs.family_pairs(ds, scales=bad)


def test_normalized_scale_removes_a_vocabulary_offset():
    """Family a's sizes share a shape in units of log V but not V; b-small has a's small vocabulary."""
    vocab = {"a-small": 1_000, "a-large": 50_000, "b-small": 1_000}

    def shape(offset, model):
        return lambda d: (offset + 0.6 * d) * math.log(vocab[model])

    shapes = {
        "a": {"small": shape(0.2, "a-small"), "large": shape(0.2, "a-large")},
        "b": {"small": shape(0.25, "b-small")},
    }
    ds = _store(shapes, noise=0.05, vocab=vocab)
    gap = _by_scale(ds, FAMILY_GAP, "a")
    assert gap[scales.NATS]["same"] > 1.0 and gap[scales.NORMALIZED]["same"] < 0.01
    assert (
        gap[scales.NATS]["gap_high"] < 0 < gap[scales.NORMALIZED]["gap_low"]
    )  # in nats the vocabulary hides the family
    assert gap[scales.NORMALIZED]["nearest"] == "b-small"
    assert gap[scales.NORMALIZED]["nearest_value"] == pytest.approx(0.05, abs=0.01)  # a fraction of log V
    assert _by_scale(ds, RESOLUTION_GAP, "a")[scales.NORMALIZED]["same"] < 0.01


def test_centred_scale_removes_a_constant_offset():
    ds = _store({"a": {"small": rise, "large": lambda d: rise(d) + 2.0}, "b": {"small": fall, "large": fall}})
    gap = _by_scale(ds, FAMILY_GAP, "a")
    assert gap[scales.NATS]["same"] == pytest.approx(2.0, abs=0.1)
    # not 0: each model is centred on its own layers, whose mean depth is 7/12 at 6 layers and 13/24 at 12
    assert gap[scales.CENTRED]["same"] == pytest.approx(3 * (7 / 12 - 13 / 24), abs=0.02)
    assert gap[scales.NATS]["gap_high"] < 0 < gap[scales.CENTRED]["gap_low"]


def test_a_schedule_sampled_at_more_depths_aligns_on_normalized_depth_without_another_family():
    rows = _by_scale(_store({"a": {"small": rise, "large": rise}}), ALIGNMENT_GAP, "a")
    assert set(rows) == set(scales.SCALES)
    for scale, row in rows.items():
        assert 0 < row["gap_low"] <= row["gap"] <= row["gap_high"], scale
        assert row["nearest"] == "" and row["n_other"] == 0 and row["n_samples"] == 20
    nats = rows[scales.NATS]
    assert nats["same"] < 0.1  # r_norm: the same line read at the smaller model's depths
    r_abs = 0.25 * math.sqrt(np.mean(np.arange(1, 7) ** 2))  # layer l: 3 (l + 1) (1/6 - 1/12) nats apart
    assert nats["nearest_value"] == pytest.approx(r_abs, abs=0.1)
    assert nats["gap"] == pytest.approx(nats["nearest_value"] - nats["same"])


def test_a_larger_model_that_shares_the_first_layers_aligns_on_layer_index():
    """The 12-layer model repeats the 6-layer one layer for layer, then falls: absolute alignment is exact."""

    def head_then_fall(d):
        return np.where(d <= 0.5, rise(2 * d), rise(1.0) - 6 * (d - 0.5))

    ds = _store({"a": {"small": rise, "large": head_then_fall}, "b": {"small": fall}})
    for scale, row in _by_scale(ds, ALIGNMENT_GAP, "a").items():
        assert row["gap_low"] <= row["gap"] <= row["gap_high"] < 0, scale
    nats = _by_scale(ds, ALIGNMENT_GAP, "a")[scales.NATS]
    assert nats["nearest_value"] < 0.1 < nats["same"]  # r_abs near 0, r_norm not


def test_normalized_scale_needs_each_models_vocabulary_size():
    shapes = {"a": {"small": rise, "large": rise}}
    with pytest.raises(ValueError, match="model 'a-small' has vocab_size missing"):
        pairs.family_pairs(_store(shapes, vocab={}), n_boot=10)
    with pytest.raises(ValueError, match="model 'a-large' has vocab_size 0; scale 'normalized'"):
        pairs.family_pairs(_store(shapes, vocab={"a-large": 0}), n_boot=10)
    kept = pairs.family_pairs(_store(shapes, vocab={}), n_boot=10, scales=(scales.NATS, scales.CENTRED))
    assert set(kept["scale"]) == {scales.NATS, scales.CENTRED}


def test_resolution_reads_the_larger_model_at_the_smaller_models_depths():
    rng = np.random.default_rng(5)
    big = rng.uniform(1.0, 4.0, size=12)
    depths = {"s": schema.depth_of(np.arange(6), 6).astype(float), "l": schema.depth_of(np.arange(12), 12)}
    depths["o"] = depths["s"][2:]  # a model that covers only the deeper 4 of the small model's depths
    means = {"s": big[None, 1::2], "l": big[None], "o": big[None, 5::2] + 1.0}
    same, values, gaps = resolution_gap(means, depths, np.empty(0), ("s", "l"), ["o"])
    assert same[0] == pytest.approx(0.0, abs=1e-9)  # depths (l + 1) / 6 are layers of the 12-layer model
    assert values[0, 0] == pytest.approx(1.0) and gaps[0, 0] == pytest.approx(1.0)


def test_each_models_samples_are_resampled_on_their_own():
    constant, noisy = np.ones((10, 3)), np.random.default_rng(0).normal(size=(40, 3))
    a, b = bootstrap_group_means([constant, noisy], n_boot=200, seed=1)
    assert a.shape == (200, 3) and b.shape == (200, 3)
    np.testing.assert_allclose(a, 1.0)  # a model whose samples agree has no spread, whatever the other's
    low, high = percentile_interval(b[:, 0])
    assert low < noisy[:, 0].mean() < high and 0.3 < high - low < 1.0  # about 2 x 1.96 / sqrt(40)
    with pytest.raises(ValueError, match="non-empty 2-D"):
        bootstrap_group_means([np.ones(3)])
