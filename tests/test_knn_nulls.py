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
# Contract of issue 36: beyond-null shown in at most 5% of 100 null draws.
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
