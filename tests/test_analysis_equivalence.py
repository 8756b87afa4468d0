"""Paired Rényi-minus-Shannon kNN AUC on synthetic stores whose Rényi information is known."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.separability import equivalence, folds, targets
from entropy_lens.analysis.separability.knn import knn_auc, score_folds
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.store import schema

FAST = KnnSettings(k=7, n_splits=5, n_repeats=3)
TASK = targets.Target("task", "tasks", "task", group_by="story_id")
N_PROMPTS = 120  # 60 stories of two prompts, 30 per class


def _with_renyi(ds, alpha: float, values: np.ndarray):
    """``ds`` with the single model's Rényi profiles at ``alpha`` replaced by ``values`` ``[P, T, L]``."""
    i = int(np.flatnonzero(np.isclose(ds[schema.ALPHA].values, alpha))[0])
    ds[schema.RENYI].values[0, :, :, : values.shape[2], i] = values
    return ds


def _store(renyi: dict, seed: int = 0):
    """One model; task ``b`` lifts Shannon by 0.8 nats everywhere; ``renyi(shannon, rng)`` builds each order."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(["a", "b"], N_PROMPTS // 2)
    stories = np.asarray([f"s{i // 2}" for i in range(N_PROMPTS)])
    shannon = rng.normal(size=(N_PROMPTS, 3, 4)) + 0.8 * (labels == "b")[:, None, None]
    ds = combined_dataset({"m": shannon}, prompt_labels={"task": labels, "story_id": stories})
    for alpha, build in renyi.items():
        ds = _with_renyi(ds, alpha, build(shannon, rng))
    return ds


def _same_information(shannon, rng):
    return shannon + rng.normal(scale=0.05, size=shannon.shape)


def _noise(shannon, rng):
    return rng.normal(size=shannon.shape)


def test_same_information_gives_a_narrow_interval_around_zero_and_noise_a_clearly_negative_one(tmp_path):
    ds = lazy(_store({0.5: _same_information, 2.0: _noise}), tmp_path)
    table = equivalence.renyi_equivalence({"tasks": ds}, [TASK], settings=FAST)
    assert list(table.columns) == list(equivalence.EQUIVALENCE_COLUMNS)
    same, noise = (table[table["alpha"] == a].iloc[0] for a in (0.5, 2.0))
    assert same["measure"] == "renyi(a=0.5)" and noise["measure"] == "renyi(a=2)"
    assert same["shannon_auc"] == noise["shannon_auc"] > 0.9  # Shannon scored once, reused
    assert same["ci_low"] <= same["difference"] <= same["ci_high"]
    assert -0.05 < same["ci_low"] <= 0.0 <= same["ci_high"] < 0.05
    assert noise["renyi_auc"] < 0.65
    assert noise["difference"] == pytest.approx(noise["renyi_auc"] - noise["shannon_auc"])
    assert noise["ci_high"] < -0.2  # not clipped at 0: a difference can be negative
    assert (table["n_samples"] == N_PROMPTS).all() and (table["n_groups"] == N_PROMPTS // 2).all()
    assert (table["n_folds"] == 15).all() and (table["note"] == "").all()


def _paired_aucs(X_shannon, X_renyi, y, settings, groups):
    """Both feature sets scored on one fold plan, as renyi_equivalence scores them."""
    plan = folds.plan_folds(y, settings, groups=groups)
    return score_folds(X_shannon, plan, settings), score_folds(X_renyi, plan, settings)


def test_identical_features_differ_by_exactly_zero_on_every_fold():
    rng = np.random.default_rng(1)
    y = np.repeat(["a", "b"], 40)
    groups = np.asarray([f"s{i // 2}" for i in range(80)])
    X = rng.normal(size=(80, 6)) + 0.5 * (y == "b")[:, None]
    shannon, renyi = _paired_aucs(X, X.copy(), y, FAST, groups)
    assert shannon.knn.size == 15 and 0.6 < shannon.knn.mean() < 1.0 and shannon.knn.std() > 0
    np.testing.assert_array_equal(renyi.knn - shannon.knn, 0.0)
    assert equivalence.difference_interval(shannon, renyi) == (0.0, 0.0, 0.0)
    # The folds are knn_auc's (the knn table's) folds too; other folds would not pair.
    np.testing.assert_array_equal(knn_auc(X, y, FAST, groups=groups).knn, shannon.knn)
    reshuffled = knn_auc(X, y, KnnSettings(k=7, n_splits=5, n_repeats=3, seed=1), groups=groups)
    assert np.abs(reshuffled.knn - shannon.knn).max() > 0.01


def test_identical_renyi_in_a_store_gives_zero_difference_on_identical_folds():
    ds = _store({0.5: lambda shannon, rng: shannon, 2.0: _noise})
    row = equivalence.renyi_equivalence({"tasks": ds}, [TASK], alphas=[0.5], settings=FAST).iloc[0]
    assert row["difference"] == 0.0 and row["ci_low"] == 0.0 and row["ci_high"] == 0.0
    assert row["shannon_auc"] == row["renyi_auc"] > 0.9


def test_skipped_folds_are_the_same_for_both_feature_sets():
    y = np.repeat(["a", "b", "c"], 10)
    groups = np.asarray([f"s{i // 3}" for i in range(30)])  # stories straddle classes: some folds lack one
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)) + 2.0 * np.searchsorted(["a", "b", "c"], y)[:, None]
    settings = KnnSettings(k=3, n_splits=5, n_repeats=3)
    plan = folds.plan_folds(y, settings, groups=groups)
    shannon, renyi = _paired_aucs(X, rng.normal(size=(30, 4)), y, settings, groups)
    assert plan.n_skipped_folds == 6 and len(plan.folds) == 6
    assert shannon.n_skipped_folds == renyi.n_skipped_folds == 6
    assert shannon.knn.size == renyi.knn.size == 6
    assert shannon.knn.mean() > 0.9 > renyi.knn.mean()


def test_unscorable_rows_orders_and_targets(tmp_path, caplog):
    ds = _store({0.5: _same_information, 2.0: _noise})
    one_class = targets.Target("one", "tasks", "task", where={"task": "a"}, group_by="story_id")
    ungrouped = targets.Target("study_only", "tasks", "task")
    absent = targets.Target("format", "formats", "format", group_by="topic")
    table = equivalence.renyi_equivalence(
        {"tasks": ds}, [one_class, ungrouped, absent], alphas=[0.5, 1.0, 2.0], settings=FAST
    )
    assert list(table["alpha"]) == [0.5, 2.0]  # order 1 is Shannon itself; no grouped rows without group_by
    assert (table["target"] == "one").all() and (table["n_samples"] == N_PROMPTS // 2).all()
    assert table[["n_folds", "shannon_auc", "renyi_auc", "difference", "ci_low", "ci_high"]].isna().all().all()
    assert table["note"].str.startswith("skipped: class counts {'a': 60}").all()
    assert "no store for dataset 'formats'" in caplog.text
    assert equivalence.renyi_orders(ds) == [0.5, 2.0]


def test_masked_prompts_pair_on_the_samples_both_metrics_kept():
    ds = _store({0.5: _same_information, 2.0: _noise})
    ds[schema.RENYI].values[0, 0, :, :, 0] = np.nan  # prompt 0 has no valid Rényi(0.5) token
    table = equivalence.renyi_equivalence({"tasks": ds}, [TASK], settings=FAST)
    assert list(table["n_samples"]) == [N_PROMPTS - 1, N_PROMPTS]
    assert table["difference"].notna().all()


def test_unpaired_results_are_refused():
    rng = np.random.default_rng(3)
    y = np.repeat(["a", "b"], 30)
    X = rng.normal(size=(60, 3))
    five = knn_auc(X, y, KnnSettings(k=5, n_splits=5, n_repeats=1))
    three = knn_auc(X, y, KnnSettings(k=5, n_splits=3, n_repeats=1))
    with pytest.raises(ValueError, match="results are not paired: 5 and 3 folds"):
        equivalence.difference_interval(five, three)


def test_the_paired_aucs_are_the_knn_tables_grouped_aucs():
    ds = _store({0.5: _same_information, 2.0: _noise})
    table = equivalence.renyi_equivalence({"tasks": ds}, [TASK], settings=FAST)
    knn = targets.knn_table({"tasks": ds}, [TASK], alphas=[0.5, 2.0], settings=FAST)
    grouped = knn[knn["protocol"] == folds.GROUPED].set_index("measure")["auc_mean"]
    assert table["renyi_auc"].tolist() == [grouped["renyi(a=0.5)"], grouped["renyi(a=2)"]]
    assert (table["shannon_auc"] == grouped["shannon"]).all()
