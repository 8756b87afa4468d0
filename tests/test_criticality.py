"""What skipping costs, on score rows whose answer is known: the map, the comparisons, the rank over blocks."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pytest

from entropy_lens.core.intervals import paired_bootstrap, paired_bootstrap_sets
from entropy_lens.skipping import comparisons, criticality
from entropy_lens.skipping.conditions import CORRECT_COLUMNS, LINEAR, RANDOM, Condition, layer_text, random_name
from entropy_lens.skipping.delta_h import selections
from entropy_lens.skipping.evaluation import paired_draws
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.verdicts import decision, outcomes
from entropy_lens.verdicts.nulls import PLANTED
from entropy_lens.verdicts.planted_nulls import shown_excess
from entropy_lens.verdicts.skip_nulls import rank_planted_rate

N_LAYERS = 8
N_QUESTIONS = 200


def _plan(delta_h: np.ndarray, ks: tuple[int, ...] = (1, 2), linear: np.ndarray | None = None) -> SkipPlan:
    chosen = selections(delta_h, ks)
    if linear is not None:
        chosen += selections(linear, ks, lens=LINEAR)
    return SkipPlan("m", N_LAYERS, tuple(delta_h), tuple(chosen), 16)


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


def _with_draws(rows: pd.DataFrame, ks: tuple[int, ...] = (1,), seed: int = 0) -> pd.DataFrame:
    """``rows`` (intact and every block alone, or sets) with the paired design's random draws: per ``k`` and
    variant, each question's score under the set drawn for it, copied from the condition that skipped that set."""
    questions = list(dict.fromkeys(rows["question"]))
    frames = [rows]
    for (k, variant), sets in paired_draws(len(questions), N_LAYERS, ks, seed).items():
        wanted = pd.DataFrame({"question": questions, "layers": [layer_text(s) for s in sets]})
        scored = rows[rows["kind"] != RANDOM].drop(columns=["condition", "kind", "k", "replicate"])
        drawn = wanted.merge(scored, on=["question", "layers"], how="left")
        frames.append(drawn.assign(condition=random_name(k, variant), kind=RANDOM, k=k, replicate=0))
    return pd.concat(frames, ignore_index=True)[list(CORRECT_COLUMNS)]


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


def test_k1_comparisons_pair_each_question_with_a_random_eligible_block():
    plan = _plan(DELTA_H, ks=(1,))
    correct = _with_draws(_sweep(COSTS))
    table = comparisons.skip_comparisons(correct, plan, n_boot=300)
    k1 = table[(table["k"] == 1) & (table["statistic"] == criticality.GOLD_LOGPROB)].set_index(
        ["variant", "first", "second"]
    )
    # all blocks: expansion block 7 costs nothing; random = one of blocks 1..7 per question
    row = k1.loc[("all_blocks", "expansion", "random")]
    assert row["first_layers"] == "7" and row["n_sets"] == 7 and row["lens"] == "logit"
    assert row["difference"] == pytest.approx(np.mean(COSTS[1:]), abs=0.1)  # skipping 7 costs less than random
    no_final = k1.loc[("no_final", "expansion", "random")]
    assert no_final["first_layers"] == "5" and no_final["n_sets"] == 6
    assert no_final["difference"] == pytest.approx(-(1.2 - np.mean(COSTS[1:7])), abs=0.1)
    diff = decision.Interval(no_final["difference"], no_final["ci_low"], no_final["ci_high"])
    outcome = outcomes.skip_outcome(
        diff, first="expansion", second="random", margin=outcomes.LOGPROB_MARGIN, unit="nats", n=200
    )
    assert outcome.outcome == outcomes.more_critical("expansion")
    wide = correct.pivot_table(index="question", columns="condition", values="gold_logprob")
    manual = paired_bootstrap(wide["skip_5"], wide[random_name(1, "no_final")], n_boot=300)
    assert (no_final["difference"], no_final["ci_low"], no_final["ci_high"]) == pytest.approx(manual)
    drawn = correct[correct["condition"] == random_name(1, "no_final")]["layers"]
    assert set(drawn) == {str(b) for b in range(1, 7)}  # every eligible block of the variant, none other


def test_the_map_reads_the_sweeps_questions_where_selected_blocks_are_scored_on_more():
    plan = _plan(DELTA_H, ks=(1,))
    sweep = _sweep(COSTS)
    extra = _sweep(COSTS, seed=1).assign(question=lambda t: "x" + t["question"])
    more = extra[extra["condition"].isin(["intact", "skip_5", "skip_7"])]  # the selected blocks, more questions
    table = criticality.skip_map(pd.concat([sweep, more]), plan, n_boot=100).set_index("layer")
    assert (table["n"] == N_QUESTIONS).all()
    compared = comparisons.skip_comparisons(_with_draws(pd.concat([sweep, more])), plan, n_boot=100)
    assert (compared["n"] > N_QUESTIONS).any()  # the paired design reads every question


def test_k2_compares_each_set_with_a_random_set_drawn_per_question():
    rng = np.random.default_rng(4)
    plan = _plan(DELTA_H, ks=(2,))
    n = 120
    frames = [_rows(Condition("intact", 0), np.ones(n, bool), np.zeros(n))]
    chosen = [c for c in plan.chosen if c.k == 2]
    assert {c.kind for c in chosen} == {"expansion", "pruning"} and all(c.tag for c in chosen)
    draws = paired_draws(n, N_LAYERS, [2], 0)
    every = {s for sets in draws.values() for s in sets} | {c.layers for c in chosen}
    for layers in every:
        cost = float(COSTS[list(layers)].sum())
        condition = Condition("drop", 2, layers, 0)
        frames.append(_rows(condition, rng.uniform(size=n) > cost / 3, -cost + 0.1 * rng.normal(size=n)))
    scored = pd.concat(frames, ignore_index=True)
    named = pd.concat(
        [scored[scored["kind"] != "drop"]]
        + [scored[scored["layers"] == c.layer_text].assign(condition=c.name, kind=c.kind) for c in chosen],
        ignore_index=True,
    )
    correct = _with_draws(pd.concat([named, scored[scored["kind"] == "drop"]]), ks=(2,))
    correct = correct[correct["kind"] != "drop"]
    table = comparisons.skip_comparisons(correct, plan, n_boot=300)
    k2 = table[(table["k"] == 2) & (table["statistic"] == criticality.GOLD_LOGPROB)].set_index(
        ["variant", "first", "second"]
    )
    row = k2.loc[("all_blocks", "expansion", "random")]
    assert row["n"] == n and row["n_sets"] == len(set(draws[(2, "all_blocks")]))
    assert 7 not in {b for s in draws[(2, "no_final")] for b in s}
    values = correct.pivot_table(index="question", columns="condition", values="gold_logprob")
    expansion = next(c.name for c in chosen if c.layers == plan.selections[0].expansion)
    a, b = values[expansion].to_numpy(), values[random_name(2, "all_blocks")].to_numpy()
    assert row["difference"] == pytest.approx(a.mean() - b.mean())


def test_the_linear_lens_choice_is_compared_beside_and_a_shared_choice_is_one_row():
    linear = DELTA_H.copy()
    linear[[2, 4]] = [0.1, -0.6]  # the same expansion blocks, another pruning block
    plan = _plan(DELTA_H, ks=(1,), linear=linear)
    table = comparisons.skip_comparisons(_with_draws(_sweep(COSTS)), plan, n_boot=100)
    rows = table[(table["statistic"] == criticality.GOLD_LOGPROB) & (table["variant"] == "no_final")]
    by = rows.set_index(["first", "second", "lens"])
    assert by.loc[("expansion", "random", "logit, linear"), "first_layers"] == "5"  # both chose block 5: one row
    assert by.loc[("pruning", "random", "logit"), "first_layers"] == "2"
    assert by.loc[("pruning", "random", "linear"), "first_layers"] == "4"
    assert len(rows[(rows["first"] == "expansion") & (rows["second"] == "pruning")]) == 2
    assert {c.layers for c in plan.chosen} >= {(2,), (4,), (5,), (7,)} and len(plan.chosen) == len(
        {c.layers for c in plan.chosen}
    )  # each block once, whichever lens chose it


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
    """Costs with no block structure: the Llama claim (expansion more critical) must not come out reproduced."""
    delta_h = np.linspace(-1, 1, 27)
    verdicts = []
    for trial in range(40):
        outcome = outcomes.rank_outcome(_ranks(np.full(27, 2.5), delta_h, seed=trial), n=150, n_blocks=27)
        verdicts.append(outcomes.against_study(outcome, outcomes.more_critical("expansion")).verdict)
    assert verdicts.count(decision.REPRODUCED) <= 3, verdicts.count(
        decision.REPRODUCED
    )  # about 1 in 40 at a 95% interval


def test_rank_planted_null_rate_through_the_rows_null_and_its_power():
    shown = partial(shown_excess, margin=outcomes.RHO_MARGIN)  # the row's null and margin, the table's decision
    assert rank_planted_rate(60, draws=45, seed=0, shown=shown, n_boot=200) <= 0.08
    assert rank_planted_rate(60, draws=10, seed=1, shown=shown, effect=0.3, n_boot=200) >= 0.9
    assert PLANTED["skip_rank"](60, 45, 0) == rank_planted_rate(60, 45, 0, shown=shown)  # what nulls.csv reads


def test_rank_over_blocks_keeps_the_blocks_fixed():
    """A relation carried by a few of this model's blocks is read for them: the interval is the questions' alone."""
    delta_h = np.linspace(-1, 1, 27)
    costs = np.where(np.arange(27) > 23, 3.0, 0.0)  # the three blocks of largest ΔH cost, the rest nothing
    rho = _ranks(costs, delta_h)
    assert rho.low > 0  # resampling blocks would let draws without those three blocks straddle 0


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
    plan = _plan(DELTA_H, ks=(1,))
    table = comparisons.skip_comparisons(_with_draws(_sweep(COSTS)), plan, n_boot=300)
    assert list(table.columns) == list(comparisons.COMPARISON_COLUMNS)
    for _, claim in table.groupby(["first", "second", "statistic"]):
        assert (claim["n_family"] == len(claim)).all()  # one claim and statistic: 2 variants at k = 1
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
    assert row["null_estimate"] == pytest.approx(np.mean(COSTS[1:7]), abs=0.1)  # what a random block costs
    assert row["beyond_low"] > 0  # block 5 costs 1.2 nats against 0.28: shown after Holm
    assert table.loc[table["second"] == "pruning", "null_name"].isna().all()
