"""What skipping costs, on score rows whose answer is known: the map, the comparisons, the rank over blocks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from entropy_lens.core.intervals import paired_bootstrap, paired_bootstrap_sets
from entropy_lens.skipping import comparisons, conditions, criticality
from entropy_lens.skipping.conditions import CORRECT_COLUMNS, Condition
from entropy_lens.skipping.delta_h import selections
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.verdicts import decision, outcomes

N_LAYERS = 8
N_QUESTIONS = 200


def _plan(delta_h: np.ndarray, sets: tuple[Condition, ...] = ()) -> SkipPlan:
    chosen = tuple(selections(delta_h, [1, 2]))
    return SkipPlan("m", N_LAYERS, tuple(delta_h), chosen, (Condition("intact", 0), *sets), 16)


def _rows(condition: Condition, correct: np.ndarray, logp: np.ndarray, measure: str = "calibrated") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "condition": condition.name,
            "kind": condition.kind,
            "k": condition.k,
            "replicate": condition.replicate,
            "layers": condition.layer_text,
            "question": [f"q{i}" for i in range(correct.size)],
            "measure": measure,
            "correct": correct.astype(np.int8),
            "gold_logprob": logp,
        }
    )[list(CORRECT_COLUMNS)]


def _sweep(costs: np.ndarray, *, accuracy: float = 0.7, seed: int = 0) -> pd.DataFrame:
    """Intact and every block alone; skipping block l lowers the gold log-probability by ``costs[l]`` nats and
    turns a correct answer wrong with probability ``costs[l] / max(costs)`` (so accuracy follows the cost)."""
    rng = np.random.default_rng(seed)
    intact_correct = rng.uniform(size=N_QUESTIONS) < accuracy
    intact_logp = np.log(np.where(intact_correct, 0.6, 0.15)) + 0.05 * rng.normal(size=N_QUESTIONS)
    frames = [_rows(Condition("intact", 0), intact_correct, intact_logp)]
    top = max(float(np.max(costs)), 1e-9)
    for layer, cost in enumerate(costs):
        flips = rng.uniform(size=N_QUESTIONS) < 0.8 * cost / top
        correct = intact_correct & ~flips
        logp = intact_logp - cost + 0.1 * rng.normal(size=N_QUESTIONS)
        frames.append(_rows(Condition("single", 1, (layer,)), correct, logp))
    return pd.concat(frames, ignore_index=True)


# block 5 expands most and costs most; block 7 (final) expands too but costs nothing
DELTA_H = np.array([math.nan, 0.1, -0.4, 0.2, -0.1, 0.9, 0.0, 1.5])
COSTS = np.array([2.0, 0.05, 0.3, 0.1, 0.02, 1.2, 0.0, 0.0])


def test_skip_map_reads_each_block_against_the_intact_model():
    plan = _plan(DELTA_H)
    table = criticality.skip_map(_sweep(COSTS), plan, n_boot=300).set_index("layer")
    assert list(table.columns) == [c for c in criticality.MAP_COLUMNS if c != "layer"]
    assert table.loc[5, "d_logprob"] == pytest.approx(-1.2, abs=0.03)
    assert table.loc[5, "d_logprob_high"] < -1.0 and table.loc[5, "reading"] == criticality.COSTLY
    assert table.loc[6, "d_accuracy"] == 0 and table.loc[6, "reading"] == criticality.SAFE  # rules out a 5-point drop
    assert "expansion (no final)" in table.loc[5, "marks"]
    assert "expansion (all blocks)" in table.loc[7, "marks"] and "pruning" in table.loc[2, "marks"]
    assert table.loc[3, "depth"] == pytest.approx(4 / 8) and np.isnan(table.loc[0, "delta_h"])
    # block 0, the costliest skip, has no ΔH: shown with its cost and its exclusion
    assert (
        not table.loc[0, "eligible"]
        and table.loc[1:, "eligible"].all()
        and table.loc[0, "marks"] == criticality.INELIGIBLE
    )
    assert table.loc[0, "d_logprob"] == pytest.approx(-2.0, abs=0.03) and table.loc[0, "reading"] == criticality.COSTLY
    assert (table["d_accuracy_low"] <= table["d_accuracy"]).all() and (table["n"] == N_QUESTIONS).all()


def test_skip_reading_on_each_side_of_its_thresholds():
    assert criticality.skip_reading(-0.10, -0.01) == criticality.COSTLY
    assert criticality.skip_reading(-0.04, 0.03) == criticality.SAFE
    assert criticality.skip_reading(-0.06, 0.03) == criticality.UNCLEAR


def test_k1_comparisons_use_the_census_of_eligible_blocks():
    plan = _plan(DELTA_H)
    correct = _sweep(COSTS)
    table = comparisons.skip_comparisons(correct, plan, n_boot=300)
    k1 = table[(table["k"] == 1) & (table["statistic"] == criticality.GOLD_LOGPROB)].set_index(
        ["variant", "first", "second"]
    )
    # all blocks: expansion block 7 costs nothing; random = mean over blocks 1..7
    row = k1.loc[("all_blocks", "expansion", "random")]
    assert row["first_layers"] == "7" and row["n_sets"] == 7
    assert row["difference"] == pytest.approx(np.mean(COSTS[1:]), abs=0.03)  # skipping 7 costs less than random
    no_final = k1.loc[("no_final", "expansion", "random")]
    assert no_final["first_layers"] == "5" and no_final["n_sets"] == 6
    assert no_final["difference"] == pytest.approx(-(1.2 - np.mean(COSTS[1:7])), abs=0.03)
    expected = outcomes.more_critical("expansion")
    diff = decision.Interval(no_final["difference"], no_final["ci_low"], no_final["ci_high"])
    outcome = outcomes.skip_outcome(
        diff, first="expansion", second="random", margin=outcomes.LOGPROB_MARGIN, unit="nats", n=200
    )
    assert outcome.outcome == expected
    wide = correct.pivot_table(index="question", columns="condition", values="gold_logprob")
    manual = paired_bootstrap(wide["skip_5"], wide[[f"skip_{v}" for v in range(1, 7)]].mean(axis=1), n_boot=300)
    assert (no_final["ci_low"], no_final["ci_high"]) == pytest.approx(manual[1:])


def test_k2_random_population_resamples_sets_too():
    rng = np.random.default_rng(4)
    plan = _plan(DELTA_H)
    plan = SkipPlan(
        "m",
        N_LAYERS,
        plan.delta_h,
        plan.selections,
        tuple(conditions.set_conditions(plan.selections, N_LAYERS, 20, 0)),
        16,
    )
    sets = [c for c in plan.sets if c.kind == "random"]
    assert {c.name for c in plan.sets if c.kind == "expansion"} == {"expansion_k2_all_blocks", "expansion_k2_no_final"}
    intact = _rows(Condition("intact", 0), np.ones(60, bool), np.zeros(60))
    frames = [intact]
    for condition in plan.sets[1:]:
        cost = float(COSTS[list(condition.layers)].sum())
        frames.append(_rows(condition, rng.uniform(size=60) > cost / 3, -cost + 0.1 * rng.normal(size=60)))
    table = comparisons.skip_comparisons(pd.concat(frames), plan, n_boot=300)
    k2 = table[(table["k"] == 2) & (table["statistic"] == criticality.GOLD_LOGPROB)].set_index(
        ["variant", "first", "second"]
    )
    row = k2.loc[("all_blocks", "expansion", "random")]
    assert row["n_sets"] == len(sets) and row["n"] == 60
    avoiding = [c for c in sets if 7 not in c.layers]
    assert k2.loc[("no_final", "pruning", "random"), "n_sets"] == len(avoiding) >= 20
    values = pd.concat(frames).pivot_table(index="question", columns="condition", values="gold_logprob")
    a, b = values["expansion_k2_all_blocks"].to_numpy(), values[[c.name for c in sets]].to_numpy()
    assert row["difference"] == pytest.approx(a.mean() - b.mean())
    questions_only = paired_bootstrap(a, b.mean(axis=1), n_boot=300)
    assert row["ci_high"] - row["ci_low"] > questions_only[2] - questions_only[1]  # sets add their spread


def test_paired_bootstrap_sets_covers_the_population_and_checks_shapes():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 1, 300)
    b = a[:, None] + rng.normal(0.5, 0.5, (1, 25)) + 0.1 * rng.normal(size=(300, 25))  # set effects around 0.5
    diff, low, high = paired_bootstrap_sets(a, b, n_boot=500)
    assert low < -0.5 < high and diff == pytest.approx(a.mean() - b.mean())
    with pytest.raises(ValueError, match=r"need a \[N\] and b \[N, S\]"):
        paired_bootstrap_sets(a, b[:10])


def _ranks(costs: np.ndarray, delta_h: np.ndarray, seed: int = 0) -> decision.Interval:
    rng = np.random.default_rng(seed)
    cost = costs[None] + 0.1 * rng.normal(size=(150, costs.size))
    calib = delta_h[None] + 0.1 * rng.normal(size=(16, delta_h.size))
    return decision.Interval(*criticality.spearman_over_blocks(cost, calib, n_boot=400, seed=seed))


def test_rank_over_blocks_finds_a_planted_relation():
    delta_h = np.linspace(-1, 1, 27)
    assert (
        outcomes.rank_outcome(_ranks(2 * delta_h + 2.5, delta_h), n=150, n_blocks=27).outcome
        == "expansion more critical"
    )
    assert (
        outcomes.rank_outcome(_ranks(-2 * delta_h + 2.5, delta_h), n=150, n_blocks=27).outcome
        == "pruning more critical"
    )


def test_rank_over_blocks_planted_null_is_not_reproduced():
    """Costs shuffled across blocks: the Llama claim (expansion more critical) must not come out reproduced."""
    rng = np.random.default_rng(7)
    delta_h = np.linspace(-1, 1, 27)
    verdicts = []
    for trial in range(40):
        costs = rng.permutation(2 * delta_h + 2.5)
        outcome = outcomes.rank_outcome(_ranks(costs, delta_h, seed=trial), n=150, n_blocks=27)
        verdicts.append(outcomes.against_study(outcome, outcomes.more_critical("expansion")).verdict)
    assert verdicts.count(decision.REPRODUCED) <= 3, verdicts.count(
        decision.REPRODUCED
    )  # about 1 in 40 at a 95% interval


def test_criticality_spearman_on_score_rows():
    plan = _plan(DELTA_H)
    per_question = pd.DataFrame(
        [{"question_id": f"c{q}", "layer": layer, "delta_h": v} for q in range(16) for layer, v in enumerate(DELTA_H)]
    )
    table = criticality.criticality_spearman(_sweep(COSTS), per_question, plan, n_boot=200).set_index("variant")
    assert table.loc["all_blocks", "n_blocks"] == 7 and table.loc["no_final", "n_blocks"] == 6
    assert table.loc["all_blocks", "most_costly"] == 5 and table.loc["all_blocks", "largest_delta_h"] == 7
    assert table.loc["no_final", "rho"] > table.loc["all_blocks", "rho"]  # the final block breaks the relation


def test_comparisons_carry_holm_within_each_claim_and_the_random_blocks_as_null():
    plan = _plan(DELTA_H)
    table = comparisons.skip_comparisons(_sweep(COSTS), plan, n_boot=300)
    assert list(table.columns) == list(comparisons.COMPARISON_COLUMNS)
    for _, claim in table.groupby(["first", "second"]):
        assert (claim["n_family"] == len(claim)).all()  # k = 1 only here: 2 variants x 2 statistics
        assert (claim["p_holm"] >= claim["p_value"]).all() and (claim["holm_level"] >= 0.95).all()
        assert ((claim["p_holm"] <= 0.05) == ((claim["holm_high"] < 0) | (claim["holm_low"] > 0))).all()
        # the last row Holm tests is at 95%, as wide as the raw interval (t instead of percentiles); the others wider
        assert (claim["holm_high"] - claim["holm_low"] > 0.95 * (claim["ci_high"] - claim["ci_low"])).all()
    vs_random = table[table["second"] == "random"]
    assert vs_random["null_name"].str.startswith("random blocks").all()
    assert (vs_random["beyond"] == -vs_random["difference"]).all()
    assert (vs_random["beyond_low"] == -vs_random["holm_high"]).all()
    row = vs_random.set_index(["variant", "statistic", "first"]).loc[
        ("no_final", criticality.GOLD_LOGPROB, "expansion")
    ]
    assert row["null_estimate"] == pytest.approx(np.mean(COSTS[1:7]), abs=0.03)  # what a random block costs
    assert row["beyond_low"] > 0  # block 5 costs 1.2 nats against 0.28: shown after Holm
    assert table.loc[table["second"] == "pruning", "null_name"].isna().all()
