"""The words a row's readings carry (docs/verdicts.md, "The words"), each on both sides of its bar."""

from __future__ import annotations

import pytest

from entropy_lens.verdicts import decision

NULL = decision.Interval(0.5, 0.45, 0.55)


def _beyond(low: float, high: float, *, margin: float = 0.05, **kwargs) -> decision.Beyond:
    excess = decision.Interval((low + high) / 2, low, high)
    return decision.beyond_null(decision.Null("dummy", NULL, excess, margin=margin, **kwargs), n=20, unit="sources")


def test_an_excess_wholly_below_its_margin_is_shown_negligible():
    assert _beyond(0.018, 0.083, margin=0.1).word == decision.SHOWN_NEGLIGIBLE
    assert "negligible" in _beyond(0.018, 0.083, margin=0.1).why
    assert _beyond(0.02, 0.12, margin=0.1).word == decision.SHOWN  # reaches the margin: shown
    assert _beyond(0.02, 0.1, margin=0.1).word == decision.SHOWN  # its high end on the margin is not below it
    assert _beyond(-0.01, 0.04, margin=0.1).word == decision.NOT_SHOWN  # rules out the margin, includes 0
    assert _beyond(-0.01, 0.2, margin=0.1).word == decision.UNDECIDED_BEYOND
    # a rule whose margin is 0 (gaps, shapes) has no negligible word
    assert _beyond(0.001, 0.002, margin=0.0).word == decision.SHOWN


def test_an_equivalence_null_reads_inside_and_outside_its_band():
    assert _beyond(-0.03, 0.02, equivalence=True).word == decision.SHOWN
    assert _beyond(0.06, 0.2, equivalence=True).word == decision.NOT_SHOWN
    assert _beyond(-0.2, -0.05, equivalence=True).word == decision.NOT_SHOWN  # touching -5 lies outside
    undecided = _beyond(-0.02, 0.08, equivalence=True)
    assert undecided.word == decision.UNDECIDED_BEYOND and "reaches ±0.05" in undecided.why
    assert _beyond(0.01, 0.02, equivalence=True).word == decision.SHOWN  # never "negligible": it is a band


def test_the_as_stated_words_a_design_forces():
    verdict = decision.cannot_test("one pair: cannot test 'family, not size'; needs two families with two sizes each")
    assert verdict.verdict == decision.CANNOT_TEST and verdict.why.startswith("cannot test: one pair")
    assert decision.Verdict(decision.MECHANICAL, "the null alone reaches the bar").verdict == decision.MECHANICAL
    with pytest.raises(ValueError, match="verdict must be one of"):
        decision.Verdict("shown", "a reading's word is not an as-stated word")
    with pytest.raises(ValueError, match="beyond-null word must be one of"):
        decision.Beyond(decision.MECHANICAL, "mechanical is an as-stated word")


def test_a_null_records_the_statistic_it_is_subtracted_from():
    null = decision.fixed_null("chance", decision.Interval(0.4, 0.3, 0.5), 0.25, margin=0.1)
    assert null.observed - null.value.estimate == pytest.approx(null.beyond.estimate)
    assert not null.reaches_bar()
    reaching = decision.Null("cross", decision.Interval(0.8, 0.78, 0.82), NULL, bar=0.5)
    assert reaching.reaches_bar()
