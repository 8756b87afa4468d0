"""Verdict rules on synthetic data whose answer is known: separable, inseparable, undecidable."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic import combined_dataset

from entropy_lens.analysis.expansion.overlap import nucleus_overlap
from entropy_lens.analysis.separability import knn, settings
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.verdicts import decision, rules

SETTINGS = settings.KnnSettings(k=29, n_splits=5, n_repeats=3)


def _grouped_gaussian(n_groups: int, per_group: int, shift: float, seed: int = 0):
    """Three classes; each group (a 'story') holds ``per_group`` near-twins of every class."""
    rng = np.random.default_rng(seed)
    rows, labels, groups = [], [], []
    for g in range(n_groups):
        centre = rng.normal(size=8) * 2.0  # the source's own offset, shared by its twins
        for c in range(3):
            for _ in range(per_group):
                rows.append(centre + shift * np.eye(8)[c] + rng.normal(size=8) * 0.3)
                labels.append(f"c{c}")
                groups.append(f"g{g}")
    return np.asarray(rows), np.asarray(labels), np.asarray(groups)


def _verdict(result: knn.AucResult) -> decision.Verdict:
    row = result.summary()
    return rules.separability(
        decision.Interval(row["auc_mean"], row["auc_low"], row["auc_high"]),
        decision.Interval(row["beyond"], row["beyond_low"], row["beyond_high"]),
        k_used=result.k,
        k_study=SETTINGS.k,
        n_groups=result.n_groups,
    )


def test_separable_classes_are_reproduced():
    X, y, groups = _grouped_gaussian(20, 4, shift=3.0)
    verdict = _verdict(knn.knn_auc(X, y, SETTINGS, groups=groups))
    assert verdict.verdict == decision.REPRODUCED, verdict.why
    assert "lies above 50 and the paired excess over the dummy" in verdict.why


def test_inseparable_classes_are_not_reproduced():
    X, y, groups = _grouped_gaussian(40, 4, shift=0.0, seed=1)
    result = knn.knn_auc(X, y, SETTINGS, groups=groups)
    verdict = _verdict(result)
    assert verdict.verdict == decision.NOT_REPRODUCED, verdict.why


def test_grouped_folds_remove_the_near_twin_leak():
    """Without group structure in the labels, only near-twins make classes 'separable'."""
    rng = np.random.default_rng(2)
    centres = rng.normal(size=(30, 8)) * 3.0
    groups = np.repeat(np.arange(30), 6)
    X = centres[groups] + rng.normal(size=(groups.size, 8)) * 0.05
    y = np.where(np.arange(30) % 2 == 0, "a", "b")[groups]  # a label fixed per source, unrelated to X
    study = knn.knn_auc(X, y, settings.KnnSettings(k=5, n_splits=5, n_repeats=2))
    grouped = knn.knn_auc(X, y, settings.KnnSettings(k=5, n_splits=5, n_repeats=2), groups=groups)
    assert study.knn.mean() > 0.9  # the twin of each test prompt sits in the training fold
    assert grouped.knn.mean() < 0.75 and grouped.grouped and grouped.n_groups == 30


def test_too_few_prompts_for_the_study_k_is_inconclusive():
    X, y, groups = _grouped_gaussian(4, 2, shift=3.0)  # 24 prompts: training folds below k = 29
    result = knn.knn_auc(X, y, SETTINGS, groups=groups)
    verdict = _verdict(result)
    assert result.k < 29
    assert verdict.verdict == decision.INCONCLUSIVE and "k=29" in verdict.why


def test_too_few_sources_and_unscored_rows_are_inconclusive():
    auc, dummy = decision.Interval(0.9, 0.85, 0.95), decision.Interval(0.4, 0.3, 0.5)
    few = rules.separability(auc, dummy, k_used=29, k_study=29, n_groups=3)
    assert few.verdict == decision.INCONCLUSIVE and "only 3 independent sources" in few.why
    skipped = rules.separability(
        decision.Interval(math.nan, math.nan, math.nan),
        dummy,
        k_used=None,
        k_study=29,
        n_groups=0,
        skipped="class counts {'a': 1}",
    )
    assert skipped.verdict == decision.INCONCLUSIVE and "class counts" in skipped.why


def test_an_interval_too_wide_to_decide_is_inconclusive():
    wide = rules.separability(
        decision.Interval(0.62, 0.45, 0.79), decision.Interval(0.12, -0.05, 0.29), k_used=29, k_study=29, n_groups=10
    )
    assert wide.verdict == decision.INCONCLUSIVE and "cannot rule out" in wide.why
    # above chance, but the paired excess over the dummy on the same folds reaches 0: the same pairing as the
    # beyond-chance reading decides both
    above_chance_not_dummy = rules.separability(
        decision.Interval(0.7, 0.58, 0.82), decision.Interval(0.15, -0.01, 0.31), k_used=29, k_study=29, n_groups=10
    )
    assert above_chance_not_dummy.verdict == decision.INCONCLUSIVE
    paired = rules.separability(
        decision.Interval(0.7, 0.58, 0.82), decision.Interval(0.15, 0.05, 0.25), k_used=29, k_study=29, n_groups=10
    )
    assert paired.verdict == decision.REPRODUCED  # unpaired, the dummy's 0.45-0.65 would overlap the AUC's 0.58


def _rho(value: decision.Interval, n: int = 50) -> decision.Verdict:
    return rules.above_threshold(value, threshold=rules.SPEARMAN_THRESHOLD, n=n, statistic="rho")


def test_threshold_rule_of_the_spearman_and_overlap_rows():
    assert _rho(decision.Interval(0.8, 0.75, 0.85)).verdict == decision.REPRODUCED
    assert _rho(decision.Interval(0.2, 0.1, 0.3)).verdict == decision.NOT_REPRODUCED
    assert _rho(decision.Interval(0.55, 0.4, 0.7)).verdict == decision.INCONCLUSIVE
    assert _rho(decision.Interval(0.8, 0.75, 0.85), n=3).verdict == decision.INCONCLUSIVE
    assert _rho(decision.Interval(math.nan, math.nan, math.nan)).verdict == decision.INCONCLUSIVE
    # just either side of the bar
    assert _rho(decision.Interval(0.52, 0.501, 0.55)).verdict == decision.REPRODUCED
    assert _rho(decision.Interval(0.48, 0.45, 0.499)).verdict == decision.NOT_REPRODUCED


def _acc(hits: int, n: int) -> decision.Interval:
    return decision.Interval(hits / n, *wilson_interval(hits, n))


def test_accuracy_rules_use_the_better_of_chance_and_the_majority_letter():
    assert rules.accuracy(_acc(60, 100), chance=0.25, majority=0.3).verdict == decision.REPRODUCED
    assert rules.accuracy(_acc(25, 400), chance=0.25, majority=0.27).verdict == decision.NOT_REPRODUCED
    # 40% beats chance but not a gold-letter share of 40%: a constant answer would do as well
    beaten = rules.accuracy(_acc(40, 100), chance=0.25, majority=0.4)
    assert beaten.verdict != decision.REPRODUCED and "majority-letter" in beaten.why
    assert rules.accuracy(_acc(4, 12), chance=0.25, majority=0.3).verdict == decision.INCONCLUSIVE


def test_letter_bias_and_chance_make_correctness_inconclusive():
    biased = rules.answers_at_chance(_acc(50, 100), 0.25, majority_share=1.0, majority_letter="A")
    assert biased is not None and biased.verdict == decision.INCONCLUSIVE and "'A' answered for 100%" in biased.why
    at_chance = rules.answers_at_chance(_acc(26, 100), 0.25, majority_share=0.4, majority_letter="B")
    assert at_chance is not None and "at chance" in at_chance.why
    assert rules.answers_at_chance(_acc(60, 100), 0.25, majority_share=0.4, majority_letter="B") is None


def _renyi(difference: decision.Interval) -> decision.Verdict:
    return rules.renyi_equivalence(difference, n_groups=40, unit="questions")


def test_renyi_equivalence_rule_on_each_side_of_the_margin():
    assert _renyi(decision.Interval(0.01, -0.03, 0.045)).verdict == decision.REPRODUCED
    assert _renyi(decision.Interval(-0.01, -0.055, 0.03)).verdict == decision.INCONCLUSIVE  # reaches -5 points
    assert _renyi(decision.Interval(-0.10, -0.14, -0.06)).verdict == decision.NOT_REPRODUCED
    assert _renyi(decision.Interval(0.08, 0.051, 0.11)).verdict == decision.NOT_REPRODUCED
    # the same estimate as Shannon with a wider interval is a power statement, not a difference
    wide = _renyi(decision.Interval(-0.004, -0.07, 0.06))
    assert wide.verdict == decision.INCONCLUSIVE and "about" in wide.why and "would decide" in wide.why
    assert _renyi(decision.Interval(math.nan, math.nan, math.nan)).verdict == decision.INCONCLUSIVE


def test_renyi_equivalence_planted_null_is_not_reproduced():
    """An order carrying nothing of Shannon's signal: its paired difference is far below 0."""
    rng = np.random.default_rng(3)
    shannon = rng.normal(0.9, 0.02, 15)
    noise = rng.normal(0.5, 0.05, 15)
    diff = noise - shannon
    lo, hi = knn.corrected_t_interval(diff, 1 / 4, bounds=(-1.0, 1.0))
    assert _renyi(decision.Interval(float(diff.mean()), lo, hi)).verdict == decision.NOT_REPRODUCED


def test_renyi_summary_over_rows():
    R, N, U = decision.REPRODUCED, decision.NOT_REPRODUCED, decision.INCONCLUSIVE
    assert rules.renyi_summary([R, R, R]).verdict == R
    assert rules.renyi_summary([R, N, U]).verdict == N
    assert rules.renyi_summary([R, U]).verdict == U
    assert rules.renyi_summary([]).verdict == U


def test_held_out_family_rule_counts_models_with_the_exact_interval():
    def share(own: int, models: int) -> decision.Interval:
        ci = stats.binomtest(own, models).proportion_ci(method="exact")
        return decision.Interval(own / models, float(ci.low), float(ci.high))

    assert rules.held_out_family(share(8, 8), bar=1 / 3, n_models=8, to_decide=4).verdict == decision.REPRODUCED
    assert rules.held_out_family(share(0, 12), bar=1 / 3, n_models=12, to_decide=4).verdict == (decision.NOT_REPRODUCED)
    assert rules.held_out_family(share(3, 6), bar=1 / 3, n_models=6, to_decide=4).verdict == decision.INCONCLUSIVE
    two = rules.held_out_family(share(2, 2), bar=1 / 3, n_models=2, to_decide=4)  # one same-family pair
    assert two.verdict == decision.INCONCLUSIVE and two.why.endswith("4 would decide it")
    assert "2 held-out models cannot clear the bar 33.3%" in two.why


def test_precondition_and_extension_words():
    assert (
        decision.PRECONDITION_WORDS[decision.REPRODUCED] == "met"
        and decision.PRECONDITION_WORDS[decision.NOT_REPRODUCED] == "not met"
    )
    assert set(decision.EXTENSION_WORDS) == set(decision.VERDICTS)


def test_verdict_values_are_checked():
    with pytest.raises(ValueError, match="verdict must be one of"):
        decision.Verdict("maybe", "")


def test_corrected_interval_is_wider_than_the_naive_one():
    scores = np.random.default_rng(0).uniform(0.6, 0.8, 15)
    lo, hi = knn.corrected_t_interval(scores, test_train_ratio=1 / 4)
    naive = 2.145 * scores.std(ddof=1) / math.sqrt(scores.size)
    assert lo < scores.mean() < hi and (hi - lo) / 2 > 1.5 * naive
    assert all(math.isnan(v) for v in knn.corrected_t_interval(scores[:1], 0.25))


def _overlap_verdict(levels: np.ndarray, *, n_tokens: int = 5, n_layers: int = 9, seed: int = 0) -> decision.Verdict:
    """The containment verdict on a store whose prompt p has adjacent-layer containments around ``levels[p]``.

    Every nucleus holds 20 tokens, so a Jaccard of J means a containment of 2J / (1 + J).
    """
    rng = np.random.default_rng(seed)
    shape = (levels.size, n_tokens, n_layers)
    containment = np.clip(levels[:, None, None] + 0.05 * rng.normal(size=shape), 0.01, 1)
    jaccard = containment / (2 - containment)
    jaccard[:, :, -1] = np.nan  # the last layer has no successor
    ds = combined_dataset(
        {"m": 2.0 + rng.normal(size=shape)}, jaccard={"m": jaccard}, nucleus={"m": np.full(shape, 20, np.int32)}
    )
    table = nucleus_overlap(ds, n_boot=300)
    row = table[table["statistic"] == "containment"].iloc[0]
    value = decision.Interval(row["mean"], row["ci_low"], row["ci_high"])
    return rules.above_threshold(
        value, threshold=rules.CONTAINMENT_THRESHOLD, n=int(row["n_prompts"]), statistic="containment"
    )


def test_overlap_rule_on_prompt_clusters():
    rng = np.random.default_rng(1)
    shared = _overlap_verdict(rng.normal(0.7, 0.05, 30))
    assert shared.verdict == decision.REPRODUCED and "lies above 0.5" in shared.why
    assert _overlap_verdict(rng.normal(0.3, 0.05, 30)).verdict == decision.NOT_REPRODUCED
    assert _overlap_verdict(rng.normal(0.5, 0.05, 30)).verdict == decision.INCONCLUSIVE
    few = _overlap_verdict(np.full(4, 0.8))
    assert few.verdict == decision.INCONCLUSIVE and "only 4 prompts (need 6)" in few.why


def test_overlap_interval_counts_prompts_not_cells():
    """Eight prompts, half sharing 90% and half 15%: 320 cells pin the cell mean, eight prompts do not."""
    levels = np.tile([0.9, 0.15], 4)
    verdict = _overlap_verdict(levels, n_tokens=5, n_layers=9)
    assert verdict.verdict == decision.INCONCLUSIVE and "straddles 0.5" in verdict.why, verdict.why


def test_units_to_decide_follows_the_square_root_law():
    # estimate 0.1, half-width 0.2 at 100 units: the half-width reaches the margin 0.1 at 100 * (0.2 / 0.1)^2.
    assert decision.units_to_decide(decision.Interval(0.1, -0.1, 0.3), 100, [(0.0, True)]) == 400
    # the half facing the threshold counts: an asymmetric interval, thresholds on either side
    assert decision.units_to_decide(decision.Interval(0.1, 0.0, 0.5), 100, [(0.0, True)]) == 100
    assert decision.units_to_decide(decision.Interval(0.1, 0.0, 0.5), 100, [(0.3, False)]) == 400
    # the decision reached first (the farthest threshold on the deciding side) sets the number
    assert decision.units_to_decide(decision.Interval(0.52, 0.45, 0.59), 10, [(0.5, True), (0.55, False)]) == 55
    assert decision.units_to_decide(decision.Interval(0.5, 0.4, 0.6), 10, [(0.5, True), (0.5, False)]) == math.inf
    assert decision.units_to_decide(decision.Interval(math.nan, 0.4, 0.6), 10, [(0.0, True)]) == math.inf


def test_units_to_decide_predicts_a_fresh_sample_of_that_size():
    """Measured on 40 units: fresh samples of the predicted size from the measured mean and spread
    decide about half the time (their interval just reaches the threshold), four times as many almost always."""
    rng = np.random.default_rng(0)
    first = rng.normal(0.15, 1.0, 40)
    mean, sd = first.mean(), first.std(ddof=1)
    half = 1.96 * sd / math.sqrt(first.size)
    needed = int(decision.units_to_decide(decision.Interval(mean, mean - half, mean + half), 40, [(0.0, True)]))
    assert 40 < needed < 10_000

    def decided(n: int) -> float:
        draws = rng.normal(mean, sd, size=(400, n))
        return float(np.mean(draws.mean(axis=1) - 1.96 * draws.std(axis=1, ddof=1) / math.sqrt(n) > 0))

    assert 0.4 < decided(needed) < 0.6
    assert decided(4 * needed) > 0.95


def test_undecided_rows_give_the_units_that_would_decide_them():
    excess = decision.Interval(0.12, 0.02, 0.22)
    wide = rules.separability(
        decision.Interval(0.62, 0.45, 0.79), excess, k_used=29, k_study=29, n_groups=10, unit="stories"
    )
    # the AUC above 50 is the slower: 10 * (0.17 / 0.12) ** 2 = 20.07
    assert "effect too small to decide with 10 stories: about 21 would decide it" in wide.why
    rho = _rho(decision.Interval(0.55, 0.4, 0.7))
    assert "with 50 prompts: about 450 would" in rho.why
    acc = rules.accuracy(decision.Interval(0.3, 0.2, 0.4), chance=0.25, majority=0.2, n=100)
    assert "with 100 questions: about 400 would" in acc.why
    containment = rules.above_threshold(
        decision.Interval(0.55, 0.45, 0.65), threshold=0.5, n=20, statistic="containment"
    )
    assert "with 20 prompts: about 80 would" in containment.why
    on_threshold = _rho(decision.Interval(0.5, 0.4, 0.6))
    assert "no feasible number of prompts would" in on_threshold.why
    assert (
        "too small" not in rules.accuracy(decision.Interval(0.3, 0.2, 0.4), chance=0.25, majority=0.2).why
    )  # n unknown


def test_shape_claims_give_the_sources_that_would_decide_them():
    stats = {"rise": decision.Interval(-0.2, -0.4, 0.0), "refine": decision.Interval(0.5, 0.3, 0.7)}
    verdict = rules.family_shape(
        rules.GPT_SHAPE, {**stats, "rise": decision.Interval(-0.2, -0.4, 0.1)}, n_sources=10, third_layers=3
    )
    assert verdict.verdict == decision.INCONCLUSIVE and "with 10 sources: about 23 would" in verdict.why
    failing = {**stats, "rise": decision.Interval(0.1, -0.1, 0.3)}  # on the wrong side: the first part to fail decides
    assert "about 40 would" in rules.family_shape(rules.GPT_SHAPE, failing, n_sources=10, third_layers=3).why


def test_separability_sources_needed_wait_for_the_slower_of_the_auc_and_the_paired_excess():
    auc, excess, n = decision.Interval(0.629, 0.548, 0.710), decision.Interval(0.095, -0.04, 0.23), 160
    why = rules.separability(auc, excess, k_used=None, k_study=29, n_groups=n, unit="questions").why
    needed = int(why.split("about ")[1].split(" would")[0].replace(",", ""))
    assert needed == math.ceil(n * ((0.095 + 0.04) / 0.095) ** 2)  # the excess is the slower: 324


# --------------------------------------------------------------------------- nulls, degenerate intervals, claims


def test_a_zero_width_interval_decides_nothing_in_every_rule():
    point = decision.Interval(0.5, 0.5, 0.5)
    assert decision.degenerate(point).startswith("an interval of zero width")
    assert decision.degenerate(decision.Interval(0.5, 0.4, 0.6)) == ""
    assert (
        rules.above_threshold(decision.Interval(0.9, 0.9, 0.9), threshold=0.5, n=40, statistic="rho").verdict
        == decision.INCONCLUSIVE
    )
    assert rules.separability(point, point, k_used=29, k_study=29, n_groups=10).verdict == decision.INCONCLUSIVE
    assert rules.renyi_equivalence(decision.Interval(0.0, 0.0, 0.0), n_groups=10).verdict == decision.INCONCLUSIVE
    gap = rules.family_not_size(decision.Interval(0.2, 0.2, 0.2), n_samples=20)
    assert gap.verdict == decision.INCONCLUSIVE and "zero width" in gap.why
    # the same estimates with a real interval decide
    assert (
        rules.above_threshold(decision.Interval(0.9, 0.8, 0.95), threshold=0.5, n=40, statistic="rho").verdict
        == decision.REPRODUCED
    )


def test_decide_reads_both_sides_of_its_bar_and_the_margin():
    words = decision.Decision(reproduced="{text} above", not_reproduced="{text} below", inconclusive="{text} between")
    at = dict(bar=0.5, n=40, unit="prompts", words=words, text="x")
    assert decision.decide(decision.Interval(0.7, 0.6, 0.8), **at).verdict == decision.REPRODUCED
    assert decision.decide(decision.Interval(0.3, 0.2, 0.4), **at).verdict == decision.NOT_REPRODUCED
    assert decision.decide(decision.Interval(0.5, 0.4, 0.6), **at).verdict == decision.INCONCLUSIVE
    # with a margin, "not reproduced" must rule out even an effect of the margin
    assert decision.decide(decision.Interval(0.45, 0.4, 0.52), margin=0.05, **at).verdict == decision.NOT_REPRODUCED
    assert decision.decide(decision.Interval(0.5, 0.4, 0.56), margin=0.05, **at).verdict == decision.INCONCLUSIVE
    assert decision.decide(decision.Interval(0.7, 0.6, 0.8), **{**at, "n": 3}).why == "only 3 prompts (need 6)"


def test_a_test_needs_every_yes_condition_and_any_no_condition():
    high, low, open_ = (
        decision.Interval(0.7, 0.6, 0.8),
        decision.Interval(-0.7, -0.8, -0.6),
        decision.Interval(0.0, -0.1, 0.1),
    )
    both_above = decision.Test(
        yes=(decision.Side(high, 0.0), decision.Side(open_, -0.5)), no=(decision.Side(low, 0.0, above=False),)
    )
    assert both_above.answer() == decision.REPRODUCED
    one_short = decision.Test(
        yes=(decision.Side(high, 0.0), decision.Side(open_, 0.0)), no=(decision.Side(high, 0.0, above=False),)
    )
    assert one_short.answer() == decision.INCONCLUSIVE
    one_fails = decision.Test(
        yes=(decision.Side(open_, 0.0),), no=(decision.Side(high, 1.0, above=False), decision.Side(open_, 0.5))
    )
    assert one_fails.answer() == decision.NOT_REPRODUCED


def test_a_closed_side_counts_an_end_on_the_bar():
    touching = decision.Interval(0.1, 0.05, 0.2)
    assert not decision.Side(touching, 0.05).holds() and decision.Side(touching, 0.05, closed=True).holds()
    assert decision.inside(touching, 0.05).answer() == decision.NOT_REPRODUCED  # outside the open band +-0.05
    assert decision.inside(decision.Interval(0.0, -0.04, 0.04), 0.05).answer() == decision.REPRODUCED


def test_units_of_a_test_wait_for_its_slowest_yes_and_its_fastest_no():
    value = decision.Interval(0.02, -0.03, 0.07)  # half-width 0.05 on 100 units, inside +-0.1 needs both ends
    band = decision.inside(value, 0.1)
    lower, upper = (
        decision.units_to_decide(value, 100, [(-0.1, True)]),
        decision.units_to_decide(value, 100, [(0.1, False)]),
    )
    assert (lower, upper) == (18, 40)  # 100 (0.05 / 0.12)^2 and 100 (0.05 / 0.08)^2, rounded up
    assert band.units(100) == max(lower, upper)
    # yes (above 0.1) and one no (below -0.1) lie behind the estimate: the other no (above 0) decides it
    either = decision.Test(
        yes=(decision.Side(value, 0.1),), no=(decision.Side(value, -0.1, above=False), decision.Side(value, 0.0))
    )
    assert either.units(100) == decision.units_to_decide(value, 100, [(0.0, True)]) == 625


def test_beyond_null_three_ways_and_a_null_that_reaches_the_bar():
    null = decision.Interval(0.92, 0.9, 0.94)
    shown = decision.beyond_null(
        decision.Null("cross-prompt", null, decision.Interval(0.15, 0.12, 0.18), margin=0.1), n=40, unit="prompts"
    )
    assert shown.word == decision.SHOWN
    flat = decision.Null("cross-prompt", null, decision.Interval(0.01, -0.02, 0.04), margin=0.1, bar=0.5)
    not_shown = decision.beyond_null(flat, n=40, unit="prompts")
    assert not_shown.word == decision.NOT_SHOWN and "without the claim" in not_shown.why and "0.5" in not_shown.why
    wide = decision.beyond_null(
        decision.Null("x", null, decision.Interval(0.05, -0.05, 0.15), margin=0.1), n=40, unit="prompts"
    )
    assert wide.word == decision.UNDECIDED_BEYOND and "would decide it" in wide.why
    point = decision.beyond_null(
        decision.Null("x", null, decision.Interval(0.05, 0.05, 0.05), margin=0.1), n=40, unit="prompts"
    )
    assert point.word == decision.UNDECIDED_BEYOND and "zero width" in point.why


def test_a_fixed_null_shifts_the_interval_by_its_bar():
    null = decision.fixed_null("chance", decision.Interval(0.4, 0.3, 0.5), 0.25, margin=0.1)
    assert (null.beyond.estimate, null.beyond.low, null.beyond.high) == pytest.approx((0.15, 0.05, 0.25))
    assert decision.beyond_null(null, n=100, unit="questions").word == decision.SHOWN


def test_planted_null_fixed_bar_rules_show_beyond_at_most_5_percent():
    """Accuracy on answers drawn at chance: the fixed-bar null (chance) is shown beyond in at most 5% of draws."""
    rng = np.random.default_rng(0)
    shown = 0
    for _ in range(100):
        correct = int((rng.random(120) < 0.25).sum())
        estimate, low, high = correct / 120, *wilson_interval(correct, 120)
        null = decision.fixed_null(
            "chance", decision.Interval(estimate, low, high), 0.25, margin=decision.NULL_MARGINS["accuracy"]
        )
        shown += decision.beyond_null(null, n=120, unit="questions").word == decision.SHOWN
    assert shown <= 5


def test_claim_verdicts_count_claims_not_rows():
    from entropy_lens.verdicts import claim_verdicts

    finding = claim_verdicts.ROLE_WORDS["finding"]
    # every: one reproducing row no longer carries a claim whose other rows are undecided
    assert claim_verdicts.combine(["reproduced", "inconclusive"], *finding) == "inconclusive"
    assert claim_verdicts.combine(["reproduced", "reproduced"], *finding) == "reproduced"
    assert claim_verdicts.combine(["reproduced", "not reproduced"], *finding) == claim_verdicts.MIXED
    assert claim_verdicts.combine(["not reproduced", "inconclusive"], *finding) == "not reproduced"
    assert claim_verdicts.combine(["inconclusive"], *finding) == "inconclusive"
    extension = claim_verdicts.ROLE_WORDS["extension"]
    assert claim_verdicts.combine(["random more critical"] * 2, *extension) == "random more critical"
    assert claim_verdicts.combine(["random more critical", "undecided"], *extension) == "undecided"
    assert claim_verdicts.combine(["random more critical", "no difference"], *extension) == claim_verdicts.MIXED
    rows = pd.DataFrame(
        {
            "claim": ["a"] * 8 + ["b"],
            "role": ["finding"] * 9,
            "model": [f"m{i}" for i in range(8)] + ["all"],
            "verdict": ["reproduced"] * 8 + ["inconclusive"],
            "why": [""] * 8 + ["not run: dataset 'x' is disabled"],
            "beyond_verdict": ["not shown"] * 7 + ["undecided", ""],
            "beyond_why": ["the null reaches the bar"] * 8 + [""],
        }
    )
    claims = claim_verdicts.claim_verdicts(rows).set_index("claim")
    assert len(claims) == 2  # eight rows of claim a are one claim
    assert claims.loc["a", "verdict"] == "reproduced" and claims.loc["a", "beyond_null"] == "not shown"
    assert claims.loc["a", "rows"] == "reproduced ×8"
    assert claims.loc["b", "verdict"] == "not run" and claims.loc["b", "beyond_null"] == claim_verdicts.NO_NULL
