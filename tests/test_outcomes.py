"""Layer-skip outcomes and verdicts on each side of their thresholds."""

from __future__ import annotations

import math

import pytest

from entropy_lens.analysis import outcomes as O
from entropy_lens.analysis import verdicts as V
from entropy_lens.core.intervals import wilson_interval

INTACT = V.Interval(0.6, 0.54, 0.65)


def _outcome(diff, *, margin=O.SKIP_MARGIN, unit="points", intact=INTACT, n_sets=None):
    return O.skip_outcome(
        V.Interval(*diff),
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
    assert _outcome((0.0, -0.04, 0.04)).outcome == O.NO_DIFFERENCE
    assert _outcome((-0.02, -0.07, 0.03)).outcome == O.UNDECIDED  # reaches -5 points: may be a real drop
    # just inside / outside the margin
    assert _outcome((0.0, -0.049, 0.049)).outcome == O.NO_DIFFERENCE
    assert _outcome((0.0, -0.051, 0.049)).outcome == O.UNDECIDED
    assert "about" in _outcome((-0.02, -0.07, 0.03)).why  # the questions that would decide it


def test_a_significant_small_difference_is_a_direction_not_no_difference():
    assert _outcome((-0.02, -0.03, -0.01)).outcome == "expansion more critical"


def test_nothing_to_lose_and_thin_random_populations_are_undecided():
    at_chance = _outcome((-0.3, -0.4, -0.2), intact=V.Interval(0.26, 0.2, 0.32))
    assert at_chance.outcome == O.UNDECIDED and "not above chance" in at_chance.why
    thin = _outcome((-0.3, -0.4, -0.2), n_sets=5)
    assert thin.outcome == O.UNDECIDED and "random baseline of 5 sets" in thin.why
    assert _outcome((-0.3, -0.4, -0.2), n_sets=20).outcome == "expansion more critical"


def test_log_probability_comparisons_use_their_own_margin():
    assert _outcome((0.02, -0.08, 0.09), margin=O.LOGPROB_MARGIN, unit="nats").outcome == O.NO_DIFFERENCE
    assert "nats" in _outcome((0.02, -0.08, 0.09), margin=O.LOGPROB_MARGIN, unit="nats").why


def test_against_study():
    llama = O.more_critical("expansion")
    assert O.against_study(O.Outcome(llama, "x"), llama).verdict == V.REPRODUCED
    other = O.against_study(O.Outcome(O.NO_DIFFERENCE, "x"), llama)
    assert other.verdict == V.NOT_REPRODUCED and "where the study found expansion more critical" in other.why
    assert O.against_study(O.Outcome(O.UNDECIDED, "x"), llama).verdict == V.INCONCLUSIVE
    with pytest.raises(ValueError, match="outcome must be one of"):
        O.Outcome("maybe", "")


def _acc(hits: int, n: int) -> V.Interval:
    return V.Interval(hits / n, *wilson_interval(hits, n))


def test_collapse_to_chance():
    assert O.collapse(_acc(80, 300), intact=INTACT, chance=0.25, n=300).verdict == V.REPRODUCED  # 27%
    assert O.collapse(_acc(140, 300), intact=INTACT, chance=0.25, n=300).verdict == V.NOT_REPRODUCED  # 47%
    assert O.collapse(_acc(105, 300), intact=INTACT, chance=0.25, n=300).verdict == V.INCONCLUSIVE  # 35%
    assert O.collapse(_acc(80, 300), intact=_acc(80, 300), chance=0.25, n=300).verdict == V.INCONCLUSIVE


def test_rank_outcomes():
    assert O.rank_outcome(V.Interval(0.6, 0.3, 0.8), n=100, n_blocks=27).outcome == "expansion more critical"
    assert O.rank_outcome(V.Interval(-0.6, -0.8, -0.3), n=100, n_blocks=27).outcome == "pruning more critical"
    assert O.rank_outcome(V.Interval(0.05, -0.2, 0.25), n=100, n_blocks=27).outcome == O.NO_RELATION
    assert O.rank_outcome(V.Interval(0.1, -0.3, 0.5), n=100, n_blocks=27).outcome == O.UNDECIDED
    assert O.rank_outcome(V.Interval(math.nan, math.nan, math.nan), n=100, n_blocks=2).outcome == O.UNDECIDED
