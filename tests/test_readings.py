"""The readings of a row (beyond chance, beyond the simplest feature, Rényi's equivalence, the original Jaccard rule,
mechanical) through the paper table, its nulls table and its headline; each broken on purpose fails here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_analysis_paper import (
    PAIR_FAMILIES,
    _accuracy,
    _csv,
    _expected,
    _family_expected,
    _knn,
    _knn_row,
    _overlap,
    _pairs,
    _rank,
    _renyi,
    _shapes,
    _skip_frame,
)

from entropy_lens.verdicts import claim_verdicts, decision, mechanical, readings, render
from entropy_lens.verdicts import table as paper
from entropy_lens.verdicts.claims.expansion import SPEARMAN_TRUE
from entropy_lens.verdicts.claims.renyi import SHANNON_NULL
from entropy_lens.verdicts.nulls import nulls_table
from entropy_lens.verdicts.tested import PlantedTrue


def _baselines(first=(-0.06, -0.12, 0.004), text=(0.2, 0.1, 0.3), model="smollm2-135m") -> pd.DataFrame:
    """The task row's two features: the first token matches the profile, the prompt text does not."""
    base = {"dataset": "tasks", "target": "task", "split": "", "model": model, "n_samples": 120, "n_groups": 20}
    return _csv(
        [
            {**base, "baseline": name, "n_folds": 15, "auc_mean": 0.9, "auc_low": 0.85, "auc_high": 0.95}
            | {"null_name": name, "null_estimate": 0.9 - d[0], "null_low": 0.8, "null_high": 1.0}
            | {"beyond": d[0], "beyond_low": d[1], "beyond_high": d[2], "note": ""}
            for name, d in (("first-token profile", first), ("prompt text (bag of words)", text))
        ]
    )


def _spearman(null=0.91) -> pd.DataFrame:
    row = {
        "model": "m",
        "family": "f",
        "n_layers": 8,
        "n": 900,
        "n_prompts": 30,
        "n_sources": 30,
        "spearman": 0.9,
        "ci_low": 0.85,
    }
    row |= {"ci_high": 0.94, "p_value": 0.0, "dataset": "blank", "null_name": "cross-prompt"}
    row |= {"null_estimate": null, "null_low": null - 0.03, "null_high": null + 0.03, "beyond": 0.9 - null}
    return _csv([row | {"beyond_low": 0.9 - null - 0.03, "beyond_high": 0.9 - null + 0.03}])


def _full_table() -> pd.DataFrame:
    """Every input the fixtures have, on one expected configuration."""
    families = {"llama-3.2-1b": "llama", "qwen-1.5b": "qwen"}
    base = _expected()
    expected = paper.Expected(
        datasets={**base.datasets, "mmlu": ["smollm2-135m", *families]},
        layer_skip=list(families),
        families={**base.families, **families},
    )
    skip = pd.concat([_skip_frame(m) for m in families], ignore_index=True)
    # the random blocks' cost and the first skip's cost beyond it; the cross-prompt overlap
    skip = skip.assign(null_name="random blocks", null_estimate=0.1, null_low=0.05, null_high=0.15)
    skip = skip.assign(beyond=-skip["difference"], beyond_low=-skip["ci_high"], beyond_high=-skip["ci_low"])
    overlap = _overlap().assign(null_name="cross-prompt", null_estimate=0.3, null_low=0.28, null_high=0.32)
    overlap = overlap.assign(beyond=overlap["mean"] - 0.3, beyond_low=overlap["ci_low"] - 0.3)
    overlap = overlap.assign(beyond_high=overlap["ci_high"] - 0.3, null_n=overlap["n"])
    tables = paper.paper_table(
        knn=_knn(),
        baselines=_baselines(),
        renyi=_renyi(),
        overlap=overlap,
        shapes=_shapes(),
        accuracy=_accuracy(top_share=0.4),
        layer_skip=skip,
        skip_spearman=_rank("qwen-1.5b"),
        expansion=_spearman(),
        expected=expected,
    )
    pairs = paper.paper_table(family_pairs=_pairs(), expected=_family_expected(PAIR_FAMILIES))
    return pd.concat([tables, pairs], ignore_index=True)


def test_every_reading_in_the_nulls_table_has_beyond_equal_to_observed_minus_null():
    nulls = nulls_table(_full_table(), planted={}, planted_true={})
    assert {"chance", "feature"} <= set(nulls["reading"])
    assert {"task", "renyi", "overlap", "accuracy", "shape_llama", "skip_vs_random", "clustering"} <= set(
        nulls["claim_id"]
    )
    finite = nulls[np.isfinite(nulls[["observed", "null_estimate", "beyond"]].astype(float)).all(axis=1)]
    assert len(finite) == len(nulls)  # every reading names what its null is subtracted from
    gap = finite["observed"] - finite["null_estimate"] - finite["beyond"]
    assert np.allclose(gap, 0.0, atol=1e-9), finite.loc[gap.abs() > 1e-9, ["claim_id", "reading", "observed"]]


def test_renyi_beyond_is_the_equivalence_itself():
    table = paper.paper_table(knn=_knn(), renyi=_renyi((0.01, -0.02, 0.03)), expected=_expected())
    rows = table[table["claim_id"] == "renyi"]
    order = rows[rows["model"] != "all"].iloc[0]
    assert order["null"] == SHANNON_NULL and order["null_estimate"] == 0.9  # the null is Shannon on the same folds
    assert order["null_observed"] == pytest.approx(0.91) and order["beyond"] == pytest.approx(0.01)
    assert order["beyond_verdict"] == decision.SHOWN and "inside ±5" in order["beyond_why"]
    summary = rows[rows["model"] == "all"].iloc[0]
    assert summary["verdict"] == decision.REPRODUCED and summary["beyond_verdict"] == decision.SHOWN
    far = paper.paper_table(knn=_knn(), renyi=_renyi((-0.2, -0.25, -0.15)), expected=_expected())
    far_summary = far[(far["claim_id"] == "renyi") & (far["model"] == "all")].iloc[0]
    assert (far_summary["verdict"], far_summary["beyond_verdict"]) == (decision.NOT_REPRODUCED, decision.NOT_SHOWN)
    wide = paper.paper_table(knn=_knn(), renyi=_renyi((0.0, -0.08, 0.08)), expected=_expected())
    assert wide.loc[(wide["claim_id"] == "renyi") & (wide["model"] == "all"), "beyond_verdict"].item() == (
        decision.UNDECIDED_BEYOND
    )


def test_a_separability_row_reads_beyond_its_stronger_simplest_feature():
    table = paper.paper_table(knn=_knn(), baselines=_baselines(), expected=_expected())
    task = table[(table["claim_id"] == "task") & (table["model"] == "smollm2-135m")].iloc[0]
    assert task["verdict"] == decision.REPRODUCED and task["beyond_verdict"] == decision.SHOWN
    assert task["feature"] == "first-token profile"  # the smaller excess of the two features decides
    assert task["feature_verdict"] == decision.NOT_SHOWN and task["feature_beyond"] == pytest.approx(-0.06)
    line = render.compact(paper.headline(table)).query("claim == @task.claim")["verdict"].iloc[0]
    assert line == ("reproduced; beyond its null: shown; beyond the simplest feature (first-token profile): not shown")
    # no baseline reading on a model that fails the MMLU precondition (and no correctness reading at all)
    gated = paper.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), expected=_expected())
    correct = gated[gated["claim_id"] == "mmlu_correct"].iloc[0]
    assert correct["why"].startswith("not read: the model answers at chance (")
    assert correct["beyond_verdict"] == correct["feature_verdict"] == readings.NOT_READ
    claims = claim_verdicts.claim_verdicts(paper.headline(gated)).set_index("claim")
    assert claims.loc[correct["claim"], "beyond_feature"] == readings.NOT_READ


def test_a_ceiling_is_decided_and_says_so():
    note = "ceiling: every fold 100; exact interval over 20 sources"
    row = _knn_row("task", "smollm2-135m", "grouped", 1.0, 0.025 ** (1 / 20), 1.0, note=note)
    table = paper.paper_table(knn=_csv([row]), expected=_expected())
    task = table[table["claim_id"] == "task"].iloc[0]
    assert task["verdict"] == decision.REPRODUCED and note in task["why"]


def test_containment_rows_keep_the_original_jaccard_rule_beside_them():
    table = paper.paper_table(overlap=_overlap(), expected=_expected())
    blank = table[(table["claim_id"] == "overlap") & (table["split"] == "blank")].set_index("measure")
    assert blank.loc["containment", "verdict"] == decision.REPRODUCED
    assert blank.loc["containment", "original_verdict"] == decision.NOT_REPRODUCED  # Jaccard 0.38 [0.35, 0.41]
    assert blank.loc["containment", "original"] == 0.38 and "Jaccard" in blank.loc["containment", "original_rule"]
    digest = render.digest_markdown(paper.headline(table))
    assert "containment (chosen after the values were seen): " in digest
    assert "the original Jaccard rule (mean Jaccard of adjacent top-p sets above 0.5): not reproduced" in digest


def _never_shown(n: int, draws: int, seed: int, shown) -> float:
    """A planted-true simulation whose null is never beaten (observed 0.1 below its null)."""
    return sum(shown((-0.1, -0.12, -0.08)) for _ in range(draws)) / draws


def _always_shown(n: int, draws: int, seed: int, shown) -> float:
    return sum(shown((0.3, 0.25, 0.35)) for _ in range(draws)) / draws


def test_a_statistic_its_null_cannot_beat_is_mechanical_and_counted_so():
    table = paper.paper_table(expansion=_spearman(null=0.91), expected=_expected())
    sim = PlantedTrue(_never_shown, decision.NULL_MARGINS["rho"], 120, SPEARMAN_TRUE.instead)
    nulls = nulls_table(table, planted={}, planted_true={"spearman": sim})
    row = nulls[nulls["claim_id"] == "spearman"].iloc[0]
    assert row["planted_true_rate"] == 0.0 and row["planted_true_draws"] == mechanical.TRUE_BATCH  # decided early
    marked = mechanical.mark_mechanical(table, nulls)
    rho = marked[marked["claim_id"] == "spearman"].iloc[0]
    assert rho["verdict"] == decision.MECHANICAL and rho["beyond_verdict"] == readings.NOT_READ
    assert "containment of adjacent top-p sets is the claim's test" in rho["why"]
    lines = render.summary(paper.headline(marked))
    assert "0 reproduced" in lines[0] and "1 mechanical" in lines[0]
    # the fitted-lens re-run reads the same rates without the nulls table's planted-null draws
    again = mechanical.mark_mechanical(table, mechanical.true_rates(table, {"spearman": sim}))
    assert again["verdict"].tolist() == marked["verdict"].tolist()
    # a null the claim beats when true is no mechanical statistic, whatever the null gives here
    shows = PlantedTrue(_always_shown, decision.NULL_MARGINS["rho"], 120, SPEARMAN_TRUE.instead)
    kept = mechanical.mark_mechanical(table, nulls_table(table, planted={}, planted_true={"spearman": shows}))
    assert kept.loc[kept["claim_id"] == "spearman", "verdict"].item() == decision.REPRODUCED
    # nor is a row whose null stays below the bar
    low = paper.paper_table(expansion=_spearman(null=0.3), expected=_expected())
    assert (
        mechanical.mark_mechanical(low, nulls_table(low, planted={}, planted_true={"spearman": sim}))
        .loc[lambda t: t["claim_id"] == "spearman", "verdict"]
        .item()
        == decision.REPRODUCED
    )


def test_the_planted_true_spearman_keeps_one_shortlist_and_its_null_is_not_beaten():
    """The claim true by construction (one persistent ranking per prompt, levels differing across prompts): the
    cross-prompt null still matches or beats the observed Spearman, so the rule shows nothing beyond it."""
    from entropy_lens.analysis.expansion.planted_true import entropy_and_sizes, planted_true_logits

    logits = planted_true_logits(np.random.default_rng(0), 6)
    entropy, size = entropy_and_sizes(logits)
    top = np.argsort(-logits, axis=-1)
    for layer in range(logits.shape[2] - 1):  # nested top-p sets: every layer reads the same ranking
        small = np.minimum(size[:, :, layer], size[:, :, layer + 1])
        for p, t in np.ndindex(small.shape):
            k = small[p, t]
            assert set(top[p, t, layer, :k]) == set(top[p, t, layer + 1, :k])
    assert np.all(np.sign(np.diff(entropy, axis=2)) * np.sign(np.diff(size, axis=2)) >= 0)  # they move together
    rate, draws = mechanical.planted_true_rate(mechanical.PLANTED_TRUE["spearman"], 20)
    assert rate < mechanical.MECHANICAL_SHARE and draws == mechanical.TRUE_BATCH


def _headline(claim_id: str, verdicts: list[str], beyond: list[str], models: list[str] | None = None) -> pd.DataFrame:
    from entropy_lens.verdicts import registry

    n = len(verdicts)
    return pd.DataFrame(
        {
            "claim": [registry.claim(claim_id).name] * n,
            "claim_id": [claim_id] * n,
            "role": ["finding"] * n,
            "model": models or [f"m{i}" for i in range(n)],
            "measure": ["shannon"] * n,
            "verdict": verdicts,
            "why": ["cannot test: one pair" if v == decision.CANNOT_TEST else "" for v in verdicts],
            "beyond_verdict": beyond,
            "beyond_why": beyond,
        }
    )


def test_each_claim_combines_its_rows_by_its_own_aggregation_rule():
    R, U, N = decision.REPRODUCED, decision.INCONCLUSIVE, decision.NOT_REPRODUCED
    S, NEG, NS = decision.SHOWN, decision.SHOWN_NEGLIGIBLE, decision.NOT_SHOWN

    def verdict(claim_id, verdicts, beyond, models=None):
        claims = claim_verdicts.claim_verdicts(_headline(claim_id, verdicts, beyond, models))
        return claims.iloc[0]

    # task is an `every` claim: one reproducing row does not carry the others
    every = verdict("spearman", [R, U, R], [S, NEG, S])
    assert (every["aggregation"], every["verdict"], every["beyond_null"]) == ("every", U, NEG)
    assert verdict("spearman", [R, R], [S, NS])["beyond_null"] == claim_verdicts.MIXED
    assert verdict("spearman", [R, N], [S, S])["verdict"] == claim_verdicts.MIXED
    assert verdict("spearman", [R, decision.MECHANICAL], [S, ""])["verdict"] == decision.MECHANICAL
    # family separability is `pooled`: its pooled row decides, whatever a per-model row says
    pooled = verdict("family", [R, U], [S, decision.UNDECIDED_BEYOND], ["all", "m1"])
    assert (pooled["aggregation"], pooled["verdict"], pooled["beyond_null"]) == ("pooled", R, S)
    # a design that cannot test the claim is counted apart, beside not run
    cannot = verdict("clustering", [decision.CANNOT_TEST], [""])
    assert cannot["verdict"] == decision.CANNOT_TEST and cannot["why"].startswith("cannot test")
    lines = render.summary(_headline("clustering", [decision.CANNOT_TEST], [""]))
    assert "0 reproduced" in lines[0] and "1 cannot test" in lines[0]
