"""Planted nulls on the rows' own designs, judged through the table's one decision (docs/verdicts.md, "Planted
nulls on the row's own design"): the kNN rows' permutation draws and the simulators, and what breaks when the
decision function is broken on purpose."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import combined_dataset

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.permutation import permutation_table
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import Target, knn_table
from entropy_lens.core.draws import DrawSettings, wilson_high
from entropy_lens.verdicts import decision, nulls
from entropy_lens.verdicts.planted_nulls import draw_shown
from entropy_lens.verdicts.rows import Expected
from entropy_lens.verdicts.table import paper_table

SETTINGS = KnnSettings(k=7, n_splits=5, n_repeats=1)
FEATURES = FeatureSettings(grid_points=4)
TASK = (Target("task", "tasks", "task", group_by="story_id"),)


def _tasks(shift: float) -> dict:
    """Ten stories of three prompts, one per task; the profiles carry the task by ``shift``."""
    rng = np.random.default_rng(0)
    task = np.tile(["count", "gist", "continue"], 10)
    level = np.searchsorted(["continue", "count", "gist"], task) * shift
    ds = combined_dataset(
        {"m": rng.normal(size=(30, 3, 4)) + level[:, None, None]},
        prompt_labels={"task": task, "story_id": np.repeat([f"s{i}" for i in range(10)], 3)},
    )
    return {"tasks": ds}


def _nulls(shift: float = 2.0) -> pd.DataFrame:
    stores = _tasks(shift)
    table = paper_table(knn=knn_table(stores, TASK, features=FEATURES, settings=SETTINGS), expected=Expected())
    draws = permutation_table(
        stores, TASK, features=FEATURES, settings=SETTINGS, shown=draw_shown(decision.NULL_MARGINS["AUC"])
    )
    return nulls.nulls_table(table, draws={"knn": draws}, expected=Expected())


def planted_nulls_hold(frame: pd.DataFrame) -> bool:
    """The contract every planted null is checked against: its rate's Wilson upper bound at most 0.08."""
    return bool((frame["planted_high"] <= 0.08).all())


def test_a_separability_row_takes_its_rate_from_its_own_permutation_draws():
    frame = _nulls()
    row = frame.set_index("claim_id").loc["task"]
    assert row["beyond_verdict"] == decision.SHOWN  # the row itself separates its tasks
    assert row["planted_design"] == "permutation of the row's labels within sources, on its own folds"
    assert row["planted_draws"] == 45 and row["planted_null_rate"] == 0 and row["planted_n"] == 10
    assert planted_nulls_hold(frame)


def test_each_draw_is_judged_by_the_row_rule_and_counted_by_the_decision():
    stores = _tasks(2.0)
    draws = permutation_table(stores, TASK, features=FEATURES, settings=SETTINGS)
    judged = nulls.judged_draws({"knn": draws}, accuracy=None, expected=Expected())
    assert len(judged) == len(draws) == 45
    for (_, draw), word in zip(draws.iterrows(), judged["word"], strict=True):
        null = decision.Null(
            "stratified dummy",
            decision.Interval(draw["null_estimate"], draw["null_low"], draw["null_high"]),
            decision.Interval(draw["beyond"], draw["beyond_low"], draw["beyond_high"]),
            margin=decision.NULL_MARGINS["AUC"],
        )
        assert word == decision.beyond_null(null, n=10, unit="units").word
    with pytest.raises(ValueError, match="unknown planted draws 'bogus'"):
        nulls.judged_draws({"bogus": draws}, accuracy=None, expected=Expected())


def test_breaking_the_decision_function_breaks_the_planted_nulls(monkeypatch):
    """Every planted rate reads the one decision: a decision that shows everything makes every planted null fail,
    the permutation draws and the simulated rows alike."""
    assert planted_nulls_hold(_nulls())

    def shows_everything(null, **_):
        return decision.Beyond(decision.SHOWN, "broken on purpose")

    monkeypatch.setattr(decision, "beyond_null", shows_everything)
    frame = _nulls()
    assert (frame["planted_null_rate"] == 1.0).all() and not planted_nulls_hold(frame)
    assert (frame["planted_draws"] == 400).all()  # the draws go on while the bound stays above 0.08
    assert frame["planted_note"].str.contains("the rule shows this null beyond itself").all()
    simulated = nulls.simulated_rate(nulls.PLANTED["clustering"], 12, DrawSettings())
    assert simulated[0] == simulated[1] == 400


def test_simulated_rates_draw_in_batches_until_the_bound_is_met_or_the_cap():
    never = nulls.simulated_rate(lambda n, draws, seed: 0.0, 10, DrawSettings())
    assert never == (0, 45, "")
    some = nulls.simulated_rate(lambda n, draws, seed: 1 / 45 if seed == 0 else 0.0, 10, DrawSettings())
    assert some[:2] == (1, 90) and wilson_high(1, 90) <= 0.08 < wilson_high(1, 45)
    capped = nulls.simulated_rate(lambda n, draws, seed: 0.05, 10, DrawSettings(), cap=40)
    assert capped[1] == 40 and capped[2].startswith("capped at 40 draws")


def test_accuracy_and_the_held_out_family_draw_at_the_row_own_bar():
    per_style = {"null_estimate": 0.4, "n": 16, "n_sources": 16, "split": "base"}
    pooled = {"null_estimate": 0.4, "n": 48, "n_sources": 16, "split": "all styles"}
    assert nulls.PLANTED_AT_ROW["accuracy"](per_style)[1] == (0.4, 1)  # Wilson per style
    assert nulls.PLANTED_AT_ROW["accuracy"](pooled)[1] == (0.4, 3)  # three styles per question, bootstrapped
    simulator, params = nulls.PLANTED_AT_ROW["family_heldout"]({"null_estimate": 1 / 3})
    assert params == (1 / 3,)
    assert simulator(2, 100, 0) == 0.0  # two held-out models can never clear a bar of 1/3 (exact interval)
    assert simulator(40, 100, 0) <= 0.05
