"""Baselines beside the profile's kNN AUC, on synthetic stores where each baseline's share is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import combined_dataset

from entropy_lens.analysis.separability import baselines
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import Target
from entropy_lens.store import schema
from entropy_lens.verdicts import decision
from entropy_lens.verdicts.claims.baselines import feature_reading
from entropy_lens.verdicts.readings import NotRead

FAST = KnnSettings(k=7, n_splits=5, n_repeats=2)
TASKS = ("continue", "count", "gist")


def _task_store() -> object:
    """20 stories x 3 tasks; the task shows in tokens 1-3 of the profile, never in token 0; the
    prompt text names the task's instruction."""
    rng = np.random.default_rng(0)
    task = np.tile(TASKS, 20)
    story = np.repeat([f"s{i}" for i in range(20)], 3)
    profiles = rng.normal(size=(60, 4, 3))
    profiles[:, 1:, :] += 2.0 * np.searchsorted(TASKS, task)[:, None, None]
    ds = combined_dataset({"m1": profiles}, prompt_labels={"task": task, "story_id": story})
    texts = np.asarray([[f"please {t} this story about topic {s}" for t, s in zip(task, story, strict=True)]])
    return ds.assign_coords({schema.PROMPT_TEXT: ((schema.MODEL, schema.PROMPT), texts)})


def test_task_rows_set_the_profile_beside_its_first_token_and_the_prompt_text():
    targets = (Target("task", "tasks", "task", group_by="story_id"),)
    table = baselines.baseline_table({"tasks": _task_store()}, targets=targets, settings=FAST)
    assert list(table.columns) == list(baselines.BASELINE_COLUMNS)
    rows = table.set_index("baseline")
    assert set(rows.index) == {baselines.FIRST_TOKEN, baselines.PROMPT_TEXT}
    assert (rows["auc_mean"] > 0.95).all()  # the same profile AUC, on the same folds, in both rows
    assert rows["auc_mean"].nunique() == 1
    first = rows.loc[baselines.FIRST_TOKEN]
    assert abs(first["null_estimate"] - 0.5) < 0.2 and first["beyond_low"] > 0.2
    text = rows.loc[baselines.PROMPT_TEXT]
    assert text["null_estimate"] > 0.95  # the instruction names the task
    assert text["beyond_low"] <= 0 <= text["beyond_high"] or abs(text["beyond"]) < 0.05
    assert (rows["null_name"] == rows.index).all()
    assert (rows["n_groups"] == 20).all()


def _mmlu_store() -> tuple[object, pd.DataFrame]:
    """40 questions x 2 styles; correctness shows in the final layer only, and in the top-letter probability."""
    rng = np.random.default_rng(1)
    question = np.tile([f"q{i}" for i in range(40)], 2)
    style = np.repeat(["base", "instruct"], 40)
    correct = (rng.uniform(size=80) > 0.5).astype(np.int8)
    profiles = rng.normal(size=(80, 3, 4))
    profiles[:, :, -1] += 3.0 * correct[:, None]
    ds = combined_dataset(
        {"m1": profiles},
        prompt_labels={"question_id": question, "style": style},
        extra={"correct_ll": correct[None, :]},
    )
    top = np.where(correct == 1, -0.1, -2.0)
    logprobs = np.stack([top, np.full(80, -3.0), np.full(80, -3.5), np.full(80, -4.0)], axis=1)
    frame = pd.DataFrame(logprobs, columns=[f"logprob_{x}" for x in "ABCD"])
    frame = frame.assign(model="m1", prompt_id=np.asarray(ds.indexes[schema.PROMPT]))
    return ds, frame


def test_correctness_rows_set_the_profile_beside_the_final_layer_and_the_top_letter():
    ds, frame = _mmlu_store()
    targets = (
        Target("mmlu_correct", "mmlu", "correct_ll", group_by="question_id", stratify_by="style"),
        Target("mmlu_correct", "mmlu", "correct_ll", split_by="style", group_by="question_id"),
    )
    table = baselines.baseline_table({"mmlu": ds}, frame, targets=targets, settings=FAST)
    assert sorted(table["split"].unique()) == ["", "base", "instruct"]
    assert set(table["baseline"]) == {baselines.FINAL_LAYER, baselines.TOP_LETTER}
    pooled = table[table["split"] == ""].set_index("baseline")
    assert (pooled["n_groups"] == 40).all() and (pooled["n_samples"] == 80).all()
    final = pooled.loc[baselines.FINAL_LAYER]
    assert final["null_estimate"] > 0.9 and final["beyond_low"] <= 0  # the final layer holds all the signal
    assert pooled.loc[baselines.TOP_LETTER, "null_estimate"] > 0.95


def test_a_missing_letter_table_is_a_note_not_an_error():
    ds, _ = _mmlu_store()
    targets = (Target("mmlu_correct", "mmlu", "correct_ll", group_by="question_id"),)
    table = baselines.baseline_table({"mmlu": ds}, None, targets=targets, settings=FAST).set_index("baseline")
    assert table.loc[baselines.TOP_LETTER, "note"].startswith("skipped: no letter log-probabilities")
    assert np.isnan(table.loc[baselines.TOP_LETTER, "beyond"])
    assert np.isfinite(table.loc[baselines.FINAL_LAYER, "beyond"])


def test_top_letter_features_read_probability_and_share():
    frame = pd.DataFrame(
        {
            "model": ["m"],
            "prompt_id": ["p"],
            **{f"logprob_{x}": [np.log(v)] for x, v in zip("ABCD", [0.1, 0.4, 0.2, 0.1], strict=True)},
        }
    )
    feats = baselines.top_letter_features(frame, "m", np.asarray(["p"]))
    assert feats == pytest.approx(np.array([[0.4, 0.5]]))
    with pytest.raises(ValueError, match="no letter log-probabilities of 'm' for 1 prompts"):
        baselines.top_letter_features(frame, "m", np.asarray(["other"]))


def test_paired_row_refuses_unpaired_folds():
    plan = baselines.plan_folds(np.tile([0, 1], 20), FAST)
    with pytest.raises(ValueError, match="fold AUCs are not paired"):
        baselines.paired_row(np.ones(3), np.ones(4), plan, "x")


def test_the_stronger_feature_is_the_rows_reading_beyond_the_simplest_feature():
    """The task shows in tokens 1-3 only (the first token is blind to it), and the prompt text names it: the text is
    the stronger feature and decides the reading, paired on the profile's own folds."""
    targets = (Target("task", "tasks", "task", group_by="story_id"),)
    table = baselines.baseline_table({"tasks": _task_store()}, targets=targets, settings=FAST)
    frame = baselines.BASELINE_READING.frame(table)
    rec = {"target": "task", "model": "m1", "split": "", "measure": "shannon"}
    null = feature_reading(frame)(rec)
    text = table.set_index("baseline").loc[baselines.PROMPT_TEXT]
    assert null.name == baselines.PROMPT_TEXT and null.margin == decision.NULL_MARGINS["AUC"]
    assert null.beyond.estimate == pytest.approx(text["beyond"]) and null.observed == pytest.approx(text["auc_mean"])
    assert null.observed - null.value.estimate == pytest.approx(null.beyond.estimate)
    assert decision.beyond_null(null, n=20, unit="stories").word != decision.SHOWN  # the text does as well
    assert feature_reading(frame)({**rec, "measure": "renyi(a=2)"}) is None  # Rényi orders have no baselines
    assert feature_reading(frame)({**rec, "target": "image_class"}) is None
    assert feature_reading(None)(rec) is None
    skipped = frame.assign(beyond=np.nan, note="skipped: no letter log-probabilities")
    assert isinstance(feature_reading(skipped)(rec), NotRead)


def test_family_rows_set_the_pooled_profile_beside_token_0s_final_layer_entropy():
    """Three models of 20 blank samples: token 0's final layer is a per-model constant (as a blank prompt's first
    token is), the rest of the profile noise; the scalar alone separates them, beside the pooled profile."""
    rng = np.random.default_rng(2)
    profiles = {}
    for i, model in enumerate(("a", "b", "c")):
        values = rng.normal(size=(20, 3, 4 + i))
        values[:, 0, -1] = 1.0 + i  # token 0 at each model's own final layer
        profiles[model] = values
    ds = combined_dataset(profiles, families={"a": "fa", "b": "fb", "c": "fc"})
    target = Target("family", "blank", schema.FAMILY, pooled=True, group_by=schema.PROMPT)
    table = baselines.baseline_table({"blank": ds}, targets=(target,), settings=FAST)
    row = table.set_index("baseline").loc[baselines.TOKEN0_FINAL]
    assert row["model"] == "all" and row["n_samples"] == 60 and row["n_groups"] == 20
    assert row["null_estimate"] == 1.0  # the scalar separates the models in every fold
    assert row["null_low"] == pytest.approx(0.025 ** (1 / 20))  # at the ceiling: the exact interval over 20 sources
    assert "token 0's final-layer entropy ceiling: every fold 100" in row["note"]
    assert row["beyond"] == pytest.approx(row["auc_mean"] - row["null_estimate"])
    scalar = baselines.token0_final_entropy(ds, np.asarray(["c", "a"]), np.asarray(["p0003", "p0004"]))
    assert scalar == pytest.approx(np.array([[3.0], [1.0]]))
