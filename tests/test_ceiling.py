"""A ceiling is decided: fold AUCs at 1 (or 0) in every fold take the exact interval over the row's sources."""

from __future__ import annotations

import numpy as np
import pytest

from entropy_lens.analysis.separability import knn, settings
from entropy_lens.core import folds
from entropy_lens.verdicts import decision, rules

GROUPED = settings.KnnSettings(k=5, n_splits=5, n_repeats=3)


def test_every_fold_at_the_ceiling_takes_the_exact_interval_over_its_sources():
    assert folds.ceiling_interval(np.ones(15), 20) == pytest.approx((0.025 ** (1 / 20), 1.0))
    assert folds.ceiling_interval(np.zeros(15), 20) == pytest.approx((0.0, 1 - 0.025 ** (1 / 20)))
    assert folds.ceiling_interval(np.ones(15), 10, 0.9)[0] == pytest.approx(0.05 ** (1 / 10))
    # one fold off the bound, too few folds, no source: not a ceiling
    assert folds.ceiling_interval(np.r_[np.ones(14), 0.99], 20) is None
    assert folds.ceiling_interval(np.ones(folds.MIN_CEILING_FOLDS - 1), 20) is None
    assert folds.ceiling_interval(np.ones(15), 0) is None
    # below the ceiling, the corrected resampled t as before
    scores = np.linspace(0.8, 0.95, 15)
    assert folds.fold_score_interval(scores, 0.25, 20) == folds.corrected_t_interval(scores, 0.25)


def _perfect(n_groups: int = 20):
    """Two classes far apart, each source holding one sample of each class."""
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], n_groups)
    X = rng.normal(size=(y.size, 4)) * 0.01 + 10.0 * y[:, None]
    return X, y, np.repeat(np.arange(n_groups), 2)


def test_a_perfect_separation_is_decided_not_left_at_zero_width():
    X, y, groups = _perfect()
    result = knn.knn_auc(X, y, GROUPED, groups=groups)
    assert np.all(result.knn == 1.0)
    row = result.summary()
    assert (row["auc_low"], row["auc_high"]) == pytest.approx((0.025 ** (1 / 20), 1.0))
    assert knn.ceiling_note(result.knn, result.n_groups) == "ceiling: every fold 100; exact interval over 20 sources"
    auc = decision.Interval(row["auc_mean"], row["auc_low"], row["auc_high"])
    excess = decision.Interval(row["beyond"], row["beyond_low"], row["beyond_high"])
    verdict = rules.separability(auc, excess, k_used=result.k, k_study=GROUPED.k, n_groups=result.n_groups)
    assert verdict.verdict == decision.REPRODUCED, verdict.why


def test_a_zero_width_interval_from_too_few_folds_stays_undecided():
    X, y, groups = _perfect()
    two = settings.KnnSettings(k=5, n_splits=2, n_repeats=1)
    result = knn.knn_auc(X, y, two, groups=groups)
    row = result.summary()
    assert row["auc_low"] == row["auc_high"] == 1.0  # two folds: the corrected t's zero width, kept
    assert knn.ceiling_note(result.knn, result.n_groups) == ""
    auc = decision.Interval(row["auc_mean"], row["auc_low"], row["auc_high"])
    excess = decision.Interval(row["beyond"], row["beyond_low"], row["beyond_high"])
    verdict = rules.separability(auc, excess, k_used=result.k, k_study=two.k, n_groups=result.n_groups)
    assert verdict.verdict == decision.INCONCLUSIVE and "zero width" in verdict.why
