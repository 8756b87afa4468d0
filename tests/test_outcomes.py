"""Layer-skip outcomes and verdicts on each side of their thresholds."""

from __future__ import annotations

import math

import pytest

from entropy_lens.core.intervals import wilson_interval
from entropy_lens.verdicts import decision, outcomes, skip_nulls

INTACT = decision.Interval(0.6, 0.54, 0.65)


def _outcome(diff, *, margin=outcomes.SKIP_MARGIN, unit="points", intact=INTACT, n_sets=None):
    return outcomes.skip_outcome(
        decision.Interval(*diff),
        first="expansion",
        second="pruning",
        margin=margin,
        unit=unit,
        n=300,
        intact=intact,
        n_sets=n_sets,
    )


def test_three_outcomes_of_a_comparison():
    assert _outcome((-0.10, -0.15, -0.05)).outcome == "expansion more critical"
    assert _outcome((0.10, 0.05, 0.15)).outcome == "pruning more critical"
    assert _outcome((0.0, -0.04, 0.04)).outcome == outcomes.NO_DIFFERENCE
    assert _outcome((-0.02, -0.07, 0.03)).outcome == outcomes.UNDECIDED  # reaches -5 points: may be a real drop
    # just inside / outside the margin
    assert _outcome((0.0, -0.049, 0.049)).outcome == outcomes.NO_DIFFERENCE
    assert _outcome((0.0, -0.051, 0.049)).outcome == outcomes.UNDECIDED
    assert "about" in _outcome((-0.02, -0.07, 0.03)).why  # the questions that would decide it


def test_a_significant_small_difference_is_a_direction_not_no_difference():
    assert _outcome((-0.02, -0.03, -0.01)).outcome == "expansion more critical"


def test_nothing_to_lose_and_thin_random_populations_are_undecided():
    at_chance = _outcome((-0.3, -0.4, -0.2), intact=decision.Interval(0.26, 0.2, 0.32))
    assert at_chance.outcome == outcomes.UNDECIDED and "not above chance" in at_chance.why
    thin = _outcome((-0.3, -0.4, -0.2), n_sets=5)
    assert thin.outcome == outcomes.UNDECIDED and "random baseline of 5 sets" in thin.why
    assert _outcome((-0.3, -0.4, -0.2), n_sets=20).outcome == "expansion more critical"


def test_log_probability_comparisons_use_their_own_margin():
    assert _outcome((0.02, -0.08, 0.09), margin=outcomes.LOGPROB_MARGIN, unit="nats").outcome == outcomes.NO_DIFFERENCE
    assert "nats" in _outcome((0.02, -0.08, 0.09), margin=outcomes.LOGPROB_MARGIN, unit="nats").why


def test_against_study():
    llama = outcomes.more_critical("expansion")
    assert outcomes.against_study(outcomes.Outcome(llama, "x"), llama).verdict == decision.REPRODUCED
    other = outcomes.against_study(outcomes.Outcome(outcomes.NO_DIFFERENCE, "x"), llama)
    assert other.verdict == decision.NOT_REPRODUCED and "where the study found expansion more critical" in other.why
    assert outcomes.against_study(outcomes.Outcome(outcomes.UNDECIDED, "x"), llama).verdict == decision.INCONCLUSIVE
    with pytest.raises(ValueError, match="outcome must be one of"):
        outcomes.Outcome("maybe", "")


def _acc(hits: int, n: int) -> decision.Interval:
    return decision.Interval(hits / n, *wilson_interval(hits, n))


def test_collapse_to_chance():
    assert outcomes.collapse(_acc(80, 300), intact=INTACT, chance=0.25, n=300).verdict == decision.REPRODUCED  # 27%
    assert (
        outcomes.collapse(_acc(140, 300), intact=INTACT, chance=0.25, n=300).verdict == decision.NOT_REPRODUCED
    )  # 47%
    assert outcomes.collapse(_acc(105, 300), intact=INTACT, chance=0.25, n=300).verdict == decision.INCONCLUSIVE  # 35%
    assert outcomes.collapse(_acc(80, 300), intact=_acc(80, 300), chance=0.25, n=300).verdict == decision.INCONCLUSIVE


def test_rank_outcomes():
    assert (
        outcomes.rank_outcome(decision.Interval(0.6, 0.3, 0.8), n=100, n_blocks=27).outcome == "expansion more critical"
    )
    assert (
        outcomes.rank_outcome(decision.Interval(-0.6, -0.8, -0.3), n=100, n_blocks=27).outcome
        == "pruning more critical"
    )
    assert (
        outcomes.rank_outcome(decision.Interval(0.05, -0.2, 0.25), n=100, n_blocks=27).outcome == outcomes.NO_RELATION
    )
    assert outcomes.rank_outcome(decision.Interval(0.1, -0.3, 0.5), n=100, n_blocks=27).outcome == outcomes.UNDECIDED
    assert (
        outcomes.rank_outcome(decision.Interval(math.nan, math.nan, math.nan), n=100, n_blocks=2).outcome
        == outcomes.UNDECIDED
    )


def _family(low, high, p_holm=0.01, n_family=48):
    return outcomes.Family(decision.Interval((low + high) / 2, low, high), p_holm, n_family, 0.999)


def test_a_corrected_comparison_decides_on_its_holm_interval():
    raw = (-0.10, -0.15, -0.05)
    wide = _family(-0.20, 0.001, p_holm=0.06)
    held = outcomes.skip_outcome(
        decision.Interval(*raw), first="expansion", second="random", margin=0.05, unit="points", n=300, family=wide
    )
    assert held.outcome == outcomes.UNDECIDED and "the raw interval excludes 0, the corrected one does not" in held.why
    assert "Holm over 48 comparisons: p = 0.06" in held.why
    kept = outcomes.skip_outcome(
        decision.Interval(*raw),
        first="expansion",
        second="random",
        margin=0.05,
        unit="points",
        n=300,
        family=_family(-0.18, -0.02),
    )
    assert kept.outcome == "expansion more critical"
    # no difference needs the corrected interval inside the margin too
    inside = outcomes.skip_outcome(
        decision.Interval(0.0, -0.03, 0.03),
        first="expansion",
        second="random",
        margin=0.05,
        unit="points",
        n=300,
        family=_family(-0.06, 0.06, p_holm=1.0),
    )
    assert inside.outcome == outcomes.UNDECIDED
    flat = outcomes.skip_outcome(
        decision.Interval(0.0, 0.0, 0.0),
        first="expansion",
        second="random",
        margin=0.05,
        unit="points",
        n=300,
        family=_family(math.nan, math.nan, p_holm=math.nan),
    )
    assert flat.outcome == outcomes.UNDECIDED and "no test" in flat.why


def test_a_row_without_holm_columns_decides_on_its_raw_interval():
    rec = {
        "statistic": "accuracy",
        "k": 1,
        "first": "expansion",
        "second": "random",
        "n": 300,
        "n_sets": 20,
        "difference": -0.1,
        "ci_low": -0.15,
        "ci_high": -0.05,
        "intact": 0.6,
        "intact_low": 0.54,
        "intact_high": 0.65,
        "chance": 0.25,
    }
    assert outcomes.family_of(rec) is None and outcomes.comparison_outcome(rec).outcome == "expansion more critical"
    corrected = rec | {"p_holm": 0.2, "n_family": 48, "holm_level": 0.999, "holm_low": -0.2, "holm_high": 0.01}
    assert outcomes.comparison_outcome(corrected).outcome == outcomes.UNDECIDED


def test_planted_null_through_the_run_path():
    """Every block's skip costs alike and the selection ignores cost: "expansion more critical" stays rare
    (100 draws are the lead's nulls table; 10 here keep the test short), and a planted cost is found."""
    assert skip_nulls.skip_planted_rate(40, draws=10, seed=0, ks=(1,)) <= 0.1
    assert skip_nulls.skip_planted_rate(40, draws=3, seed=0, ks=(1,), effect=1.0) == 1.0


@pytest.mark.parametrize("diff", [(0.01, -0.02, 0.09), (-0.01, -0.09, 0.02), (0.0, -0.06, 0.07)])
def test_an_undecided_skip_names_more_questions_than_it_has(diff):
    """No difference needs both ends inside the band, so an undecided row never asks for fewer questions than it
    holds (counting the band as reached at its nearer end said "with 3 questions: about 2 would decide it")."""
    n = 3
    out = outcomes.skip_outcome(
        decision.Interval(*diff), first="expansion", second="pruning", margin=0.05, unit="points", n=n
    )
    assert out.outcome == outcomes.UNDECIDED, out
    needed = float(out.why.split("about ")[1].split(" would")[0].replace(",", ""))
    assert needed > n, out.why
