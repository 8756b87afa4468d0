"""Family shapes on constructed profiles of known shape: statistics, intervals over sources, verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.families import shapes
from entropy_lens.core.intervals import bootstrap_mean_statistic
from entropy_lens.store import schema
from entropy_lens.verdicts import decision, rules

SHAPES = {
    "gpt": lambda d: 5.0 - 4.0 * d,  # starts high, falls all the way
    "llama": lambda d: np.where(d <= 0.2, 1.0, np.where(d < 0.9, 4.0, 1.5)),  # low, plateau, refine
    "line": lambda d: 1.0 + 3.0 * d,  # rises to the end: neither
    "flat": lambda d: 3.0 + 0.0 * d,
}


def _profiles(shape, n_layers: int, *, n_prompts: int = 12, noise: float = 0.1, seed: int = 0) -> np.ndarray:
    depth = schema.depth_of(np.arange(n_layers), n_layers).astype(float)
    rng = np.random.default_rng(seed)
    return SHAPES[shape](depth) + noise * rng.normal(size=(n_prompts, 3, n_layers))


def _verdict(row, claim: str) -> decision.Verdict:
    stats = {s: decision.Interval(row[s], row[f"{s}_low"], row[f"{s}_high"]) for s in shapes.STATISTICS}
    return rules.family_shape(claim, stats, n_sources=int(row["n_sources"]), third_layers=int(row["third_layers"]))


def test_statistics_of_exact_shapes():
    depth = schema.depth_of(np.arange(12), 12).astype(float)
    first, middle, last = shapes.thirds(depth)
    assert first.sum() == middle.sum() == last.sum() == 4  # depths 1/12 .. 4/12, 5/12 .. 8/12, 9/12 .. 12/12
    line = shapes.shape_statistics(SHAPES["line"](depth)[None], depth)[0]
    # line: rise = 3 * (mean middle depth - mean first depth) = 3 * 4/12; refine = 3 * (6.5/12 - 10.5/12);
    # drift = slope 3 over a third of depth, over the range 3 * 11/12
    np.testing.assert_allclose(line, [1.0, 3 * (6.5 / 12 - 10.5 / 12), (3 / 3) / (3 * 11 / 12)], rtol=1e-6)
    assert np.isnan(shapes.shape_statistics(SHAPES["flat"](depth)[None], depth)[0, 2])  # no range: no drift
    two = schema.depth_of(np.arange(2), 2)  # depths 0.5 and 1: no first third
    assert np.isnan(shapes.shape_statistics(np.ones((1, 2)), two)).all()


def test_refine_reads_the_last_third_not_the_final_block():
    """A plateau whose final block alone drops by 3 nats refines by a quarter of that over a third of 12."""
    depth = schema.depth_of(np.arange(12), 12).astype(float)
    profile = np.where(np.arange(12) == 11, 1.0, 4.0)
    refine = shapes.shape_statistics(profile[None], depth)[0, 1]
    assert refine == pytest.approx(3.0 / 4)  # the last layer alone would say 3.0


def test_each_family_shape_is_told_apart(tmp_path):
    ds = combined_dataset(
        {
            "g": _profiles("gpt", 12),
            "l": _profiles("llama", 24, seed=1),
            "x": _profiles("line", 12, seed=2),
        },
        families={"g": "gpt2", "l": "llama", "x": "qwen"},
    )
    table = shapes.profile_shapes(lazy(ds, tmp_path), n_boot=300).set_index("model")
    assert list(table.columns) == list(shapes.COLUMNS[1:])
    assert table.loc["g", "family"] == "gpt2" and table.loc["l", "n_sources"] == 12
    verdicts = {(m, c): _verdict(table.loc[m], c).verdict for m in table.index for c in rules.SHAPE_CLAIMS}
    assert verdicts[("g", rules.GPT_SHAPE)] == decision.REPRODUCED
    assert verdicts[("g", rules.LLAMA_SHAPE)] == decision.NOT_REPRODUCED
    assert verdicts[("l", rules.LLAMA_SHAPE)] == decision.REPRODUCED
    assert verdicts[("l", rules.GPT_SHAPE)] == decision.NOT_REPRODUCED
    assert verdicts[("x", rules.GPT_SHAPE)] == verdicts[("x", rules.LLAMA_SHAPE)] == decision.NOT_REPRODUCED
    why = _verdict(table.loc["x"], rules.LLAMA_SHAPE).why
    assert "refines (last third below the middle third): refine" in why and "fails" in why


def test_noise_without_shape_is_inconclusive():
    ds = combined_dataset({"n": _profiles("flat", 12, noise=2.0)}, families={"n": "llama"})
    row = shapes.profile_shapes(ds, n_boot=300).iloc[0]
    verdict = _verdict(row, rules.LLAMA_SHAPE)
    assert verdict.verdict == decision.INCONCLUSIVE and "open" in verdict.why, verdict.why


def test_intervals_resample_sources_not_prompts():
    """Twelve prompts from two stories are two sources: too few to read a shape."""
    ds = combined_dataset({"g": _profiles("gpt", 12)}, prompt_labels={"story_id": ["s0"] * 6 + ["s1"] * 6})
    row = shapes.profile_shapes(ds, n_boot=200).iloc[0]
    assert row["n_prompts"] == 12 and row["n_sources"] == 2
    verdict = _verdict(row, rules.GPT_SHAPE)
    assert verdict.verdict == decision.INCONCLUSIVE and "only 2 independent sources" in verdict.why


def test_too_few_layers_and_masked_prompts():
    few = combined_dataset({"g": _profiles("gpt", 4)})  # one layer in the first third
    row = shapes.profile_shapes(few, n_boot=100).iloc[0]
    assert row["third_layers"] == 1
    assert "too few layers" in _verdict(row, rules.GPT_SHAPE).why
    profiles = _profiles("gpt", 12)
    profiles[0] = np.nan  # a prompt with no valid token
    row = shapes.profile_shapes(combined_dataset({"g": profiles}), n_boot=100).iloc[0]
    assert row["n_prompts"] == 11 and row["n_sources"] == 11


def test_bootstrap_mean_statistic():
    rows = np.random.default_rng(0).normal(loc=2.0, size=(200, 3))
    low, high = bootstrap_mean_statistic(rows, lambda m: m[:, :2], n_boot=500)
    assert low.shape == (2,) and (low < 2.0).all() and (high > 2.0).all() and (high - low < 0.5).all()
    low, high = bootstrap_mean_statistic(rows[:1], lambda m: m, n_boot=50)
    assert np.isnan(low).all() and np.isnan(high).all()
    with pytest.raises(ValueError, match="rows must be a 2-D"):
        bootstrap_mean_statistic(rows[:, 0], lambda m: m)


def test_shape_verdict_rules():
    def stats(rise, refine, drift):
        return {
            n: decision.Interval(sum(v) / 2, *v) for n, v in zip(shapes.STATISTICS, (rise, refine, drift), strict=True)
        }

    ok = dict(n_sources=20, third_layers=4)
    assert rules.family_shape(rules.GPT_SHAPE, stats((-2, -1), (1, 2), (0.5, 0.6)), **ok).verdict == decision.REPRODUCED
    assert (
        rules.family_shape(rules.GPT_SHAPE, stats((-2, 0.1), (1, 2), (0.5, 0.6)), **ok).verdict == decision.INCONCLUSIVE
    )
    assert (
        rules.family_shape(rules.LLAMA_SHAPE, stats((1, 2), (1, 2), (0.05, 0.2)), **ok).verdict == decision.REPRODUCED
    )
    wide = rules.family_shape(rules.LLAMA_SHAPE, stats((1, 2), (1, 2), (0.1, 0.4)), **ok)
    assert wide.verdict == decision.INCONCLUSIVE and "plateaus" in wide.why and "open" in wide.why
    no_plateau = rules.family_shape(rules.LLAMA_SHAPE, stats((1, 2), (1, 2), (0.3, 0.4)), **ok)
    assert no_plateau.verdict == decision.NOT_REPRODUCED
    unscored = stats((1, 2), (1, 2), (math.nan, math.nan))
    assert "no interval for ['drift']" in rules.family_shape(rules.LLAMA_SHAPE, unscored, **ok).why
    with pytest.raises(ValueError, match="unknown shape claim 'mistral'"):
        rules.family_shape("mistral", unscored, **ok)
