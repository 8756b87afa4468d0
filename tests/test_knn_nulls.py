"""The nulls beside every kNN AUC: the stratified dummy, macro AUC, and planted nulls through the same code."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from entropy_lens.analysis.separability import folds, knn, nulls
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.verdicts.decision import shown_beyond

# One repeat of 5 folds keeps 100 draws within seconds; the table's defaults (3 repeats) behave alike.
PLANTED = KnnSettings(k=7, n_splits=5, n_repeats=1)
PLANTED_N = 40
# The planted-null contract (docs/verdicts.md): beyond its null shown in at most 5% of 100 null draws.
MAX_NULL_RATE = 0.05


def test_the_dummy_is_stratified_not_constant():
    """A "prior" (constant) dummy gives AUC 0.5 on every fold; the stratified dummy guesses, so its folds vary."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    res = knn.knn_auc(rng.normal(size=(60, 4)), y, KnnSettings(k=7, n_splits=5, n_repeats=2))
    assert res.dummy.std() > 0.02
    assert np.mean(res.dummy == 0.5) < 0.5
    row = res.summary()
    assert row["null_name"] == knn.NULL_NAME == "stratified dummy (same folds)"
    assert row["null_estimate"] == pytest.approx(res.dummy.mean())
    assert (row["null_low"], row["null_high"]) == (row["dummy_low"], row["dummy_high"])


def test_beyond_is_the_paired_fold_difference_with_the_corrected_interval():
    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 30)
    X = rng.normal(size=(60, 4)) + 1.5 * y[:, None]
    res = knn.knn_auc(X, y, KnnSettings(k=7, n_splits=5, n_repeats=2))
    row = res.summary()
    diff = res.knn - res.dummy
    half = 2.2621571627409915 * np.sqrt(diff.var(ddof=1) * (1 / diff.size + 1 / 4))  # t(0.975, 9) folds 10, 5 splits
    assert row["beyond"] == pytest.approx(diff.mean())
    assert row["beyond_low"] == pytest.approx(diff.mean() - half)
    assert row["beyond_high"] == pytest.approx(min(diff.mean() + half, 1.0))
    assert row["beyond_low"] > 0
    assert set(knn.TABLE_COLUMNS) >= {"null_name", "null_estimate", "null_low", "null_high", "beyond"}


def test_multiclass_auc_is_the_unweighted_macro_average_on_imbalanced_classes():
    """Weighted and macro averages differ when classes are imbalanced and separated unequally well."""
    y = np.array([0] * 10 + [1] * 3 + [2] * 3)
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(3), size=y.size)
    proba[y == 0] = [0.8, 0.1, 0.1]  # class 0 (the large one) is found perfectly, the small ones at random
    per_class = [roc_auc_score(y == c, proba[:, c]) for c in range(3)]
    macro = float(np.mean(per_class))
    weighted = float(np.average(per_class, weights=np.bincount(y)))
    assert abs(macro - weighted) > 0.05  # the data tell the two averages apart
    assert knn.fold_auc(y, proba) == pytest.approx(macro)


def test_knn_on_null_labels_beats_the_dummy_in_at_most_five_percent_of_draws():
    assert nulls.knn_planted_rate(PLANTED_N, draws=100, seed=0, settings=PLANTED, shown=shown_beyond) <= MAX_NULL_RATE


def test_knn_on_a_planted_signal_beats_the_dummy():
    assert nulls.knn_planted_rate(PLANTED_N, draws=10, seed=0, settings=PLANTED, shift=1.5, shown=shown_beyond) >= 0.9


def test_a_profile_no_better_than_its_baseline_is_rarely_shown_beyond_it():
    assert (
        nulls.baseline_planted_rate(PLANTED_N, draws=100, seed=0, settings=PLANTED, shown=shown_beyond) <= MAX_NULL_RATE
    )


def test_a_profile_with_more_signal_than_its_baseline_is_shown_beyond_it():
    # Power needs more folds than the null check: 3 repeats of 5 folds of 60 samples.
    settings = KnnSettings(k=7, n_splits=5, n_repeats=3)
    assert nulls.baseline_planted_rate(60, draws=10, seed=0, settings=settings, shift=1.0, shown=shown_beyond) >= 0.8


def test_planted_rates_refuse_too_few_samples():
    with pytest.raises(ValueError, match="n_samples must be an int >= 8"):
        nulls.knn_planted_rate(4, shown=shown_beyond)


def test_pooled_folds_keep_a_question_together_and_balance_the_styles():
    """MMLU pooled over styles: a question's prompts share one side of each split, and the folds balance the
    styles too where grouping alone would not (here styles of unequal size whose questions differ)."""
    rng = np.random.default_rng(3)
    questions = np.concatenate([np.repeat(np.arange(30), 2), np.arange(30, 60)])
    style = np.asarray(["base"] * 60 + ["instruct"] * 15 + ["chat"] * 15)
    y = (rng.uniform(size=90) > 0.5).astype(int)
    expected = np.asarray([60, 15, 15]) / 90
    worst = {}
    for name, strata in (("plain", None), ("stratified", style)):
        plan = folds.plan_folds(y, KnnSettings(k=5, n_splits=5, n_repeats=2), groups=questions, strata=strata)
        for _, train, test in plan.folds:
            assert not set(questions[train]) & set(questions[test])
        shares = [[np.mean(style[test] == s) for s in ("base", "instruct", "chat")] for _, _, test in plan.folds]
        worst[name] = float(np.abs(np.asarray(shares) - expected).max())
    assert worst["stratified"] < 0.1 < worst["plain"]
    with pytest.raises(ValueError, match="strata must hold one value per sample"):
        folds.plan_folds(y, groups=questions, strata=style[:5])


# --------------------------------------------------------------------------- the permutation null of a row


def _row(n_sources: int = 12, per_source: int = 3, shift: float = 0.0, constant: bool = False, seed: int = 0):
    """A grouped row: ``n_sources`` sources of ``per_source`` samples; labels vary within each source (each holds
    every class once) or, ``constant``, are one per source; features shifted by ``shift`` per class."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"s{i}" for i in range(n_sources)], per_source)
    if constant:
        y = np.repeat(np.arange(n_sources) % per_source, per_source)
    else:
        y = np.tile(np.arange(per_source), n_sources)
    X = rng.normal(size=(y.size, 5)) + shift * y[:, None]
    return X, y, groups


@pytest.mark.parametrize("constant", [False, True])
def test_a_permutation_draw_scores_as_the_row_code_scores_the_moved_features(constant):
    """Moving the features over the row's labels and folds gives the fold AUCs score_folds gives (same folds, same
    classifier, same dummy), for labels varying within sources and for labels constant within them."""
    from entropy_lens.analysis.separability import permutation

    X, y, groups = _row(constant=constant)
    plan = folds.plan_folds(y, PLANTED, groups=groups)
    scorer = permutation.PlanScorer(X, plan, PLANTED)
    kind = permutation.permutation_kind(plan.codes, groups)
    assert kind == (permutation.ACROSS if constant else permutation.WITHIN)
    rng = np.random.default_rng(1)
    for _ in range(5):
        order = permutation.source_permutation(groups, rng, kind)
        mine, theirs = scorer.score(order), knn.score_folds(X[order], plan, PLANTED)
        np.testing.assert_array_equal(mine.knn, theirs.knn)
        np.testing.assert_array_equal(mine.dummy, theirs.dummy)
        assert mine.summary() == theirs.summary()


def test_source_permutations_keep_a_source_features_together():
    from entropy_lens.analysis.separability import permutation

    groups = np.asarray(["a", "a", "b", "b", "c", "c", "c"])
    rng = np.random.default_rng(0)
    within = permutation.source_permutation(groups, rng, permutation.WITHIN)
    assert all(groups[within[i]] == groups[i] for i in range(groups.size))  # shuffled inside each source
    moved = [permutation.source_permutation(groups, rng, permutation.ACROSS) for _ in range(20)]
    for order in moved:
        for source in ("a", "b", "c"):
            came_from = set(groups[order[groups == source]])
            assert len(came_from) == 1  # a source takes one source's features, whole
        assert set(groups[order[groups == "c"]]) == {"c"}  # the only source of its size stays
    assert any(groups[order[0]] == "b" for order in moved)  # sources of one size exchange features
    y = np.asarray([0, 1, 0, 1, 0, 0, 1])
    assert permutation.permutation_kind(y, groups) == permutation.BOTH  # c holds other labels than a and b


def test_permutation_draws_stop_once_the_rate_bound_is_met_and_go_on_in_batches_up_to_400():
    """45 draws where none is shown (Wilson upper bound 0.079); more, in batches, while the bound stays above
    0.08, up to 400."""
    from entropy_lens.analysis.separability import permutation
    from entropy_lens.analysis.separability.targets import Samples
    from entropy_lens.core.draws import DrawSettings, wilson_high

    X, y, groups = _row()
    samples = Samples("", "m", X, y.astype(object), groups, None)
    never = list(permutation.row_draws(samples, PLANTED, lambda row: False, DrawSettings(), seed=0))
    assert len(never) == 45 and [d["draw"] for d in never] == list(range(45))
    assert {d["permutation"] for d in never} == {permutation.WITHIN}
    always = list(permutation.row_draws(samples, PLANTED, lambda row: True, DrawSettings(), seed=0))
    assert len(always) == 400
    some = list(permutation.row_draws(samples, PLANTED, lambda row: row["auc_mean"] > 0.6, DrawSettings(), 0))
    n_shown = sum(d["auc_mean"] > 0.6 for d in some)
    assert len(some) % 45 == 0 or len(some) == 400
    assert wilson_high(n_shown, len(some)) <= 0.08 or len(some) == 400
    assert len(some) == 45 or wilson_high(sum(d["auc_mean"] > 0.6 for d in some[:-45]), len(some) - 45) > 0.08
    assert wilson_high(0, 45) <= 0.08 < wilson_high(1, 45)
    with pytest.raises(ValueError, match="min_draws <= max_draws"):
        DrawSettings(min_draws=50, max_draws=40)


def test_the_permutation_table_draws_for_every_grouped_row(tmp_path):
    from synthetic import combined_dataset

    from entropy_lens.analysis.features import FeatureSettings
    from entropy_lens.analysis.separability import permutation
    from entropy_lens.analysis.separability.targets import Target, knn_table

    rng = np.random.default_rng(0)
    stories = np.repeat([f"s{i}" for i in range(10)], 3)
    task = np.tile(["count", "gist", "continue"], 10)
    shift = np.searchsorted(["continue", "count", "gist"], task) * 2.0
    ds = combined_dataset(
        {"m": rng.normal(size=(30, 3, 4)) + shift[:, None, None]},
        prompt_labels={"task": task, "story_id": stories},
    )
    targets = (Target("task", "tasks", "task", group_by="story_id"), Target("ungrouped", "tasks", "task"))
    features = FeatureSettings(grid_points=4)
    draws = permutation.permutation_table({"tasks": ds}, targets, alphas=[2.0], features=features, settings=PLANTED)
    assert list(draws.columns) == list(permutation.DRAW_COLUMNS)
    assert set(draws["target"]) == {"task"}  # a target without sources has no grouped row
    assert draws.groupby("measure").size().to_dict() == {"renyi(a=2)": 45, "shannon": 45}
    table = knn_table({"tasks": ds}, targets[:1], alphas=[2.0], features=features, settings=PLANTED)
    grouped = table[table["protocol"] == "grouped"].set_index("measure")
    assert (grouped["auc_mean"] > 0.95).all()  # the row separates its tasks ...
    assert draws["auc_mean"].mean() < 0.6  # ... its permuted draws do not
    assert (draws["n_groups"] == 10).all() and (draws["k"] == grouped["k"].iloc[0]).all()
