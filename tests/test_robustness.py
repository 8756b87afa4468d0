"""Verdicts under a fitted lens beside the logit lens's, and the blocks where the two lenses differ."""

import numpy as np
import pandas as pd
import pytest

from entropy_lens.verdicts import robustness


def _table(rows):
    """Rows as the table writes them: the claim's id in ``claim_id`` (here the same text as its name)."""
    base = {"role": "finding", "split": "", "measure": "shannon", "unit": "AUC", "ci_low": 0.5, "ci_high": 0.9}
    return pd.DataFrame([{**base, **row, "claim_id": row["claim"]} for row in rows])


LOGIT = _table(
    [
        {"claim": "format", "model": "a", "verdict": "reproduced", "why": "", "estimate": 0.8},
        {"claim": "task", "model": "a", "verdict": "reproduced", "why": "", "estimate": 0.7},
        {"claim": "spearman", "model": "a", "verdict": "reproduced", "why": "", "estimate": 0.6},
        {"claim": "mmlu", "model": "a", "verdict": "inconclusive", "why": "not run: off", "estimate": np.nan},
        {"claim": "family", "model": "all", "verdict": "reproduced", "why": "", "estimate": 0.9},
        {"claim": "extra", "model": "a", "verdict": "", "why": "", "estimate": 0.1},
    ]
)
LENS = _table(
    [
        {"claim": "format", "model": "a", "verdict": "reproduced", "why": "", "estimate": 0.75},
        {"claim": "task", "model": "a", "verdict": "inconclusive", "why": "interval reaches 0.5", "estimate": 0.55},
        {"claim": "spearman", "model": "a", "verdict": "inconclusive", "why": "not run: no blank set", "estimate": 0.0},
        {"claim": "mmlu", "model": "a", "verdict": "reproduced", "why": "", "estimate": 0.7},
        {"claim": "extra", "model": "a", "verdict": "", "why": "", "estimate": 0.2},
    ]
)


def test_only_rows_decided_under_both_lenses_are_compared():
    changes = robustness.verdict_changes(LOGIT, LENS, "linear")
    assert list(changes.columns) == list(robustness.CHANGE_COLUMNS)
    # spearman and mmlu were not run on one side, family only under the logit lens, extra has no verdict
    assert changes["claim"].tolist() == ["format", "task"]
    assert changes["changed"].tolist() == [False, True] and set(changes["kind"]) == {"linear"}
    assert changes.loc[1, ["estimate_logit", "estimate_lens"]].tolist() == [0.7, 0.55]
    line = robustness.robustness_headline(changes, "linear")
    assert line == "Under the linear lens, 1 of 2 verdicts change: task (a): reproduced → inconclusive."
    assert robustness.robustness_headline(changes[~changes["changed"]], "linear").endswith("0 of 1 verdicts change.")
    assert robustness.robustness_headline(changes.iloc[:0], "tuned") == "No verdict was read under the tuned lens."


def test_rows_are_joined_by_the_claims_id_not_its_wording():
    reworded = LENS.assign(claim="reworded in the lens table")
    changes = robustness.verdict_changes(LOGIT, reworded, "linear")
    assert changes["claim_id"].tolist() == ["format", "task"]
    assert changes["claim"].tolist() == ["format", "task"]  # the name comes from the logit table
    assert robustness.verdict_changes(LOGIT, LENS.assign(claim_id=LENS["claim_id"] + "_other"), "linear").empty


def test_a_table_that_cannot_be_joined_is_refused_by_name():
    with pytest.raises(ValueError, match=r"lens paper table gives a row twice: \{'claim_id': 'format'"):
        robustness.verdict_changes(LOGIT, pd.concat([LENS, LENS.iloc[:1]]), "linear")
    with pytest.raises(ValueError, match=r"logit paper table lacks the columns \['why'\]"):
        robustness.verdict_changes(LOGIT.drop(columns="why"), LENS, "linear")


def _entropies(n_prompts=12, n_tokens=6, n_layers=5, seed=0):
    rng = np.random.default_rng(seed)
    logit = rng.uniform(1.0, 8.0, (n_prompts, n_tokens, n_layers))
    logit[0, 3:] = np.nan  # generation stopped early
    logit[-1] = np.nan  # a prompt without tokens is not counted
    return logit


def test_block_differences_find_the_block_where_the_lenses_part():
    logit = _entropies()
    noise = np.random.default_rng(1).normal(0.0, 0.3, logit.shape)
    lens = logit + noise
    lens[:, :, 2] += 3.0  # the fitted lens reads block 2 three nats wider
    table = robustness.block_differences(logit, lens, n_boot=500, seed=0)
    assert list(table.columns) == list(robustness.BLOCK_COLUMNS) and table["n_prompts"].eq(11).all()
    assert table.loc[2, "difference"] == pytest.approx(3.0, abs=0.2)
    assert table.loc[2, "ci_low"] > 2.5 and table.loc[2, "ci_high"] < 3.5
    others = table.drop(index=2)
    assert ((others["ci_low"] < 0) & (others["ci_high"] > 0)).sum() >= 3  # noise only
    text = robustness.driving_blocks(table)
    assert text.startswith("block") and text.split(" ", 2)[1] == "2" and "+2.9" in text.split("),")[0]
    flat = robustness.block_differences(logit, logit, n_boot=100, seed=0)
    assert robustness.driving_blocks(flat).startswith("no block")


def test_the_interval_resamples_prompts_not_tokens():
    """Each prompt's tokens move together: the interval is as wide as the prompts' spread allows, however many
    tokens each prompt has (resampling tokens would shrink it by about the square root of the token count)."""
    n_prompts, n_tokens = 8, 200
    offsets = np.random.default_rng(2).normal(0.0, 1.0, n_prompts)
    logit = np.ones((n_prompts, n_tokens, 2))
    lens = logit + offsets[:, None, None]
    table = robustness.block_differences(logit, lens, n_boot=2000, seed=0)
    expected_half = 1.96 * offsets.std(ddof=1) / np.sqrt(n_prompts)
    half = (table["ci_high"] - table["ci_low"]) / 2
    assert np.allclose(half, expected_half, rtol=0.35)
    assert table["difference"].to_numpy() == pytest.approx(np.full(2, offsets.mean()))


def test_entropies_of_different_generations_are_refused():
    logit = _entropies()
    lens = logit.copy()
    lens[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="missing at different tokens"):
        robustness.block_differences(logit, lens, n_boot=10, seed=0)
    with pytest.raises(ValueError, match=r"two \[prompt, token, layer\] arrays of one shape"):
        robustness.block_differences(logit, lens[:, :, :2], n_boot=10, seed=0)
    with pytest.raises(ValueError, match="top must be at least 1"):
        robustness.driving_blocks(robustness.block_differences(logit, logit, n_boot=10, seed=0), top=0)


def test_the_verdict_table_gets_each_lens_verdict_where_its_scope_is_one_model():
    from entropy_lens.verdicts.render import display
    from entropy_lens.verdicts.rows import COLUMNS

    top = LOGIT.assign(split=["formats", "tasks", "blank", "", "", ""])
    changes = robustness.verdict_changes(top, LENS.assign(split=["formats", "tasks", "blank", "", ""]), "linear")
    pooled = changes.iloc[:1].assign(model="all", verdict_lens="not reproduced")  # a row of several models
    out = robustness.with_robustness(top, pd.concat([changes, pooled], ignore_index=True))
    assert out["under_linear"].tolist() == ["reproduced", "inconclusive", "", "", "", ""]
    assert top.columns.tolist() == out.columns.tolist()[:-1]  # the input is left as it was
    view = display(out.reindex(columns=[*COLUMNS, "under_linear"]))
    assert view.columns.tolist()[view.columns.get_loc("verdict") + 1] == "under linear lens"
    assert view["under linear lens"].tolist() == out["under_linear"].tolist()
    assert "under linear lens" not in display(top.reindex(columns=list(COLUMNS))).columns
    with pytest.raises(ValueError, match="linear lens gives a verdict row twice"):
        robustness.with_robustness(top, pd.concat([changes, changes.iloc[:1]], ignore_index=True))


def test_a_row_pooling_every_model_gets_the_lens_verdict_only_where_the_lens_read_them_all():
    top = LOGIT.assign(split=["formats", "tasks", "blank", "", "", ""])
    changes = robustness.verdict_changes(top, LENS.assign(split=["formats", "tasks", "blank", "", ""]), "linear")
    pooled = changes.iloc[:1].assign(model="all", claim_id="family", split="", verdict_lens="not reproduced")
    changes = pd.concat([changes, pooled], ignore_index=True).assign(dataset="blank", scope="a, b")
    family = top["model"].eq("all")
    full = robustness.with_robustness(top, changes, {"blank": ["b", "a"]})  # the lens read both of blank's models
    assert full.loc[family, "under_linear"].tolist() == ["not reproduced"]
    assert full.loc[~family, "under_linear"].tolist() == ["reproduced", "inconclusive", "", "", ""]
    for datasets in ({"blank": ["a", "b", "c"]}, {"formats": ["a", "b"]}, None):  # another scope, or none given
        assert robustness.with_robustness(top, changes, datasets).loc[family, "under_linear"].tolist() == [""]


def test_the_headline_counts_the_rows_the_verdict_table_shows_and_names_the_rest():
    changes = robustness.verdict_changes(LOGIT, LENS, "linear")  # format unchanged, task changed
    shown = changes.assign(headline=[True, False])  # the task row is read on a statistic the table does not show
    line = robustness.robustness_headline(shown, "linear")
    assert line.startswith("Under the linear lens, 0 of 1 verdicts change (1 of 2 rows on every statistic and scale)")
    text = shown.astype({"headline": str, "changed": str})  # as read back from lens_robustness.csv
    assert robustness.robustness_headline(text, "linear") == line


def test_each_paper_input_says_how_a_fitted_lens_recomputes_it_or_why_not():
    from entropy_lens.verdicts.table import INPUTS

    for name, entry in INPUTS.items():
        assert callable(entry.from_store) or entry.from_store.strip(), name
    recomputed = {name for name, entry in INPUTS.items() if callable(entry.from_store)}
    assert {"knn", "expansion", "overlap", "shapes", "heldout", "family_pairs"} <= recomputed
    assert not recomputed & {"accuracy", "layer_skip", "skip_spearman", "drop_scores"}  # answers, not profiles


def test_the_registry_recomputes_the_family_inputs_only_on_a_blank_store_of_two_models_or_more():
    from synthetic import combined_dataset

    from entropy_lens.analysis.features import FeatureSettings
    from entropy_lens.analysis.separability.settings import KnnSettings
    from entropy_lens.verdicts.inputs import StoreSettings
    from entropy_lens.verdicts.table import INPUTS, store_tables

    rng = np.random.default_rng(0)
    depth = {"a": np.arange(1, 7) / 6, "b": np.arange(1, 9) / 8}
    profiles = {m: 2.0 + d + rng.normal(scale=0.2, size=(12, 3, d.size)) for m, d in depth.items()}
    labels = {"format": ["poem", "blurb", "chat"] * 4, "topic": [f"t{i // 3}" for i in range(12)]}
    store = combined_dataset(profiles, families={"a": "fa", "b": "fb"}, prompt_labels=labels)
    settings = StoreSettings(KnnSettings(k=3), FeatureSettings(grid_points=6), n_boot=20, seed=0, grid_points=6)
    blank, other = store_tables(store, "blank", settings), store_tables(store, "formats", settings)
    assert set(blank) == set(other) == {name for name, entry in INPUTS.items() if callable(entry.from_store)}
    assert all(blank[name] is not None for name in blank)
    assert other["heldout"] is None and other["family_pairs"] is None
    assert set(other["overlap"]["dataset"]) == {"formats"} and set(other["knn"]["target"]) == {"format"}
