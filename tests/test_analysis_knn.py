"""kNN AUC on synthetic profiles whose separability is known."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability import folds, knn, settings
from entropy_lens.analysis.separability.targets import Target, _score, knn_table, target_rows
from entropy_lens.store import schema

FAST = settings.KnnSettings(k=7, n_splits=5, n_repeats=1)
# Null check: 200 samples, 10 balanced folds of 20 test samples.  One fold's AUC on
# 10 + 10 samples has a standard error of sqrt((n0 + n1 + 1) / (12 n0 n1)) ~ 0.13, so the
# mean over 10 disjoint folds has ~0.04 (repeats are correlated and add little).  0.15 is
# more than 3.5 standard errors, and the seed makes the test deterministic anyway.
NULL_TOLERANCE = 0.15


def _gaussian(n_per_class: int, n_classes: int, shift: float, dim: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = rng.normal(size=(y.size, dim)) + shift * y[:, None]
    return X, np.asarray([f"c{v}" for v in y])


def test_identical_classes_give_chance_auc():
    X, y = _gaussian(100, 2, shift=0.0)
    res = knn.knn_auc(X, y, settings.KnnSettings(n_repeats=2))
    assert abs(res.knn.mean() - 0.5) < NULL_TOLERANCE
    assert abs(res.dummy.mean() - 0.5) < NULL_TOLERANCE
    assert res.knn.size == settings.DEFAULT_SPLITS * 2 and res.k == settings.DEFAULT_K
    assert res.p_value > 0.01


def test_shifted_classes_give_auc_near_one_and_beat_the_dummy():
    X, y = _gaussian(60, 2, shift=3.0)
    res = knn.knn_auc(X, y, settings.KnnSettings(n_repeats=2))
    assert res.knn.mean() > 0.98
    assert res.dummy.mean() < 0.7
    assert res.p_value < 1e-3
    row = res.summary()
    assert row["auc_mean"] == pytest.approx(res.knn.mean()) and row["n_classes"] == 2


def test_multiclass_uses_one_vs_rest_macro_auc():
    X, y = _gaussian(40, 3, shift=3.0)
    res = knn.knn_auc(X, y, FAST)
    assert res.n_classes == 3
    assert res.knn.mean() > 0.95


def test_fold_auc_binary_and_multiclass():
    assert knn.fold_auc(np.array([0, 0, 1, 1]), np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])) == 1.0
    proba = np.eye(3)[[0, 1, 2, 0, 1, 2]]
    assert knn.fold_auc(np.array([0, 1, 2, 0, 1, 2]), proba) == 1.0


def test_k_is_capped_below_the_training_fold_with_a_warning(caplog):
    X, y = _gaussian(10, 2, shift=3.0)
    with caplog.at_level(logging.WARNING):
        res = knn.knn_auc(X, y, settings.KnnSettings(n_splits=5, n_repeats=1))
    assert res.k == 20 - 4 - 1  # 5 folds of 20 samples: 16 training samples, k <= 15
    assert "k=29 is not below the smallest training fold" in caplog.text


def test_folds_are_capped_at_the_smallest_class(caplog):
    X, y = _gaussian(30, 2, shift=3.0)
    X, y = X[:33], y[:33]  # 30 of c0, 3 of c1
    with caplog.at_level(logging.WARNING):
        res = knn.knn_auc(X, y, settings.KnnSettings(n_repeats=1))
    assert res.n_splits == 3
    assert "exceeds the smallest class" in caplog.text


def test_grouped_folds_name_the_class_with_too_few_sources(caplog):
    X, y = _gaussian(6, 2, shift=0.0)
    groups = np.array(["q0"] * 6 + ["q1", "q1", "q2", "q2", "q3", "q3"])  # c0 comes from one question alone
    message = (
        r"grouped folds need >= 2 sources \(groups\) per class.*class 'c0' comes from 1 source "
        r"\(sources per class: \{'c0': 1, 'c1': 3\}\)"
    )
    with pytest.raises(ValueError, match=message):
        knn.knn_auc(X, y, FAST, groups=groups)
    with caplog.at_level(logging.WARNING):
        scored = _score(X, y.astype(object), FAST, groups)  # what knn_table writes into the note column
    assert scored["note"].startswith("skipped: grouped folds need >= 2 sources") and "n_splits" not in scored["note"]
    knn.knn_auc(X, y, FAST, groups=np.array(["q0", "q4"] * 3 + ["q1", "q1", "q2", "q2", "q3", "q3"]))  # two will do


def test_bad_inputs_are_errors():
    X, y = _gaussian(10, 2, shift=0.0)
    with pytest.raises(ValueError, match=">= 2 classes"):
        knn.knn_auc(X, np.zeros(20))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        knn.knn_auc(X, y)
    with pytest.raises(ValueError, match="test must be one of"):
        settings.KnnSettings(test="mannwhitney")
    # the fold floor is the config's (core.folds.check_fold_counts, where the config is read); one fold is
    # refused by scikit-learn itself
    X, y = _gaussian(10, 2, shift=0.0)
    with pytest.raises(ValueError, match="n_splits=2 or more"):
        knn.knn_auc(X, y, settings.KnnSettings(n_splits=1))


@pytest.mark.parametrize("test", settings.PAIRED_TESTS)
def test_paired_p_values(test):
    rng = np.random.default_rng(0)
    b = rng.uniform(0.4, 0.6, 20)
    noise = rng.normal(0.0, 0.05, 20)
    assert knn.paired_p_value(b + 0.3 + noise, b, test, test_train_ratio=0.1) < 1e-3
    assert knn.paired_p_value(b - 0.3 + noise, b, test, test_train_ratio=0.1) > 0.9
    assert knn.paired_p_value(b, b, test) == 1.0
    assert knn.paired_p_value(b + 0.1, b, test) == 0.0  # constant positive difference


def test_corrected_ttest_is_more_conservative_than_the_plain_one():
    rng = np.random.default_rng(1)
    b = rng.uniform(0.4, 0.6, 30)
    a = b + rng.normal(0.03, 0.05, 30)
    assert knn.paired_p_value(a, b, "corrected_ttest", test_train_ratio=1 / 9) > knn.paired_p_value(a, b, "ttest")


def _task_store(tmp_path):
    """Two models; task separable on intact prompts only; MMLU-like correctness with missing labels."""
    rng = np.random.default_rng(3)
    n, t = 60, 4
    task = np.tile(np.repeat(["count", "gist", "continue"], 10), 2)
    scrambled = np.repeat([False, True], 30)
    shift = np.where(scrambled, 0.0, np.searchsorted(["continue", "count", "gist"], task) * 2.0)
    profiles = {
        "m1": rng.normal(size=(n, t, 3)) + shift[:, None, None],
        "m2": rng.normal(size=(n, t, 5)) + 1.5 + 0.5 * shift[:, None, None] * np.linspace(0, 1, 5),
    }
    profiles["m1"][0, 2:] = np.nan  # an early stop
    correct = (rng.uniform(size=(2, n)) > 0.5).astype(np.int8)
    correct[0, :3] = -1  # unparsed
    style = np.tile(["base", "instruct"], 30)
    ds = combined_dataset(
        profiles,
        families={"m1": "llama", "m2": "qwen"},
        prompt_labels={"task": task, "scrambled": scrambled, "style": style},
        extra={"correct_ll": correct},
    )
    return lazy(ds, tmp_path)


def test_knn_table_runs_every_target_model_and_measure(tmp_path):
    ds = _task_store(tmp_path)
    targets = (
        Target("task", "tasks", "task", where={"scrambled": False}),
        Target("task_scrambled", "tasks", "task", where={"scrambled": True}),
        Target("mmlu_correct", "tasks", "correct_ll", split_by="style"),
        Target("family", "tasks", schema.FAMILY, pooled=True),
    )
    table = knn_table({"tasks": ds}, targets, alphas=[2.0], settings=FAST, features=FeatureSettings(grid_points=4))
    assert list(table.columns) == list(knn.TABLE_COLUMNS)
    # 2 measures x (task 2 models + scrambled 2 + mmlu 2 styles x 2 models + family 1)
    assert len(table) == 2 * (2 + 2 + 4 + 1)
    intact = table[(table["target"] == "task") & (table["model"] == "m1")]
    scram = table[(table["target"] == "task_scrambled") & (table["model"] == "m1")]
    assert (intact["auc_mean"] > 0.95).all()
    assert (abs(scram["auc_mean"] - 0.5) < 0.25).all()  # 30 samples, 5 folds: a wider null band
    assert set(table["measure"]) == {"shannon", "renyi(a=2)"}
    mmlu = table[(table["target"] == "mmlu_correct") & (table["model"] == "m1")]
    assert sorted(mmlu["split"].unique()) == ["base", "instruct"]
    assert mmlu["n_samples"].sum() == 2 * (60 - 3)  # unparsed labels left out, both measures
    family = table[table["target"] == "family"]
    assert (family["model"] == knn.POOLED_MODEL).all() and (family["n_samples"] == 120).all()
    assert (family["auc_mean"] > 0.9).all()


def test_unevaluable_targets_get_a_note_and_missing_stores_are_skipped(tmp_path, caplog):
    ds = _task_store(tmp_path)
    one_class = Target("one", "tasks", "task", where={"task": "gist"})
    absent = Target("format", "formats", "format")
    with caplog.at_level(logging.WARNING):
        table = knn_table({"tasks": ds}, [one_class, absent], settings=FAST)
    assert len(table) == 2 and table["auc_mean"].isna().all()
    assert table["note"].str.startswith("skipped").all()
    assert "no store for dataset 'formats'" in caplog.text


def test_target_label_and_filter_errors(tmp_path):
    ds = _task_store(tmp_path)
    with pytest.raises(ValueError, match="'topic' is not a coordinate on 'prompt'"):
        target_rows(ds, Target("x", "tasks", "task", where={"topic": "a"}))
    with pytest.raises(ValueError, match="neither a coordinate nor a variable"):
        target_rows(ds, Target("x", "tasks", "answer"))
    with pytest.raises(ValueError, match="nothing to evaluate"):
        knn_table({"tasks": ds}, include_shannon=False)


def test_a_fold_plan_is_built_from_labels_alone_and_scores_any_features():
    X, y = _gaussian(30, 2, shift=3.0)
    plan = folds.plan_folds(y, FAST)
    assert len(plan.folds) == 5 and plan.k == 7 and plan.n_classes == 2 and plan.n_skipped_folds == 0
    np.testing.assert_array_equal(knn.score_folds(X, plan, FAST).knn, knn.knn_auc(X, y, FAST).knn)
    noise = knn.score_folds(np.random.default_rng(0).normal(size=X.shape), plan, FAST)
    assert noise.knn.size == 5 and noise.knn.mean() < 0.8
    with pytest.raises(ValueError, match=r"X must be \[N, F\] with N = 60 labels"):
        knn.score_folds(X[:10], plan, FAST)


def test_corrected_interval_clips_to_the_given_bounds():
    differences = np.array([-0.9, -0.95, -0.5, -0.99])
    low, high = knn.corrected_t_interval(differences, 0.25, bounds=(-1.0, 1.0))
    assert low == -1.0 and -0.4 < high < -0.3  # clipped below only, negative above
    assert knn.corrected_t_interval(differences + 1.0, 0.25)[0] == 0.0  # AUCs stay within [0, 1]
