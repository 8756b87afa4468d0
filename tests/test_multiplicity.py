"""Holm within a claim: p-values from paired bootstraps, the step-down correction and its levels."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from entropy_lens.core import multiplicity
from entropy_lens.core.intervals import paired_bootstrap, paired_bootstrap_sets
from entropy_lens.skipping.corrections import with_holm
from entropy_lens.verdicts.outcomes import comparison_outcome, more_critical


def test_draws_are_the_intervals_own():
    rng = np.random.default_rng(0)
    a, b, sets = rng.normal(size=50), rng.normal(size=50), rng.normal(size=(50, 7))
    low, high = np.quantile(multiplicity.paired_draws(a, b, n_boot=300, seed=3), [0.025, 0.975])
    assert (low, high) == pytest.approx(paired_bootstrap(a, b, n_boot=300, seed=3)[1:])
    low, high = np.quantile(multiplicity.paired_set_draws(a, sets, n_boot=300, seed=3), [0.025, 0.975])
    assert (low, high) == pytest.approx(paired_bootstrap_sets(a, sets, n_boot=300, seed=3)[1:])


def test_holm_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005, math.nan])
    # sorted 0.005, 0.01, 0.03, 0.04 over m = 4: 0.02, 0.03, 0.06, 0.06 (monotone)
    assert multiplicity.holm(p)[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and math.isnan(multiplicity.holm(p)[4])
    levels = multiplicity.holm_levels(p, 0.05)
    # 0.005 <= 0.05/4 and 0.01 <= 0.05/3 are rejected; 0.03 > 0.05/2 stops: it and 0.04 keep its level
    assert levels[:4] == pytest.approx([1 - 0.05 / 3, 1 - 0.05 / 2, 1 - 0.05 / 2, 1 - 0.05 / 4])
    with pytest.raises(ValueError, match=r"p_values must be a 1-D array in \[0, 1\]"):
        multiplicity.holm(np.array([0.5, 1.5]))


def test_the_holm_level_interval_excludes_zero_exactly_where_holm_rejects():
    rng = np.random.default_rng(1)
    estimates, se = rng.normal(0, 2.5, 40), np.full(40, 1.0)
    p = np.array([multiplicity.bootstrap_p_value(d, s) for d, s in zip(estimates, se, strict=True)])
    rejected = multiplicity.holm(p) <= multiplicity.FAMILY_ALPHA
    bounds = [
        multiplicity.normal_interval(d, s, lv)
        for d, s, lv in zip(estimates, se, multiplicity.holm_levels(p), strict=True)
    ]
    excludes = np.array([lo > 0 or hi < 0 for lo, hi in bounds])
    assert 0 < rejected.sum() < 40 and (excludes == rejected).all()


def test_a_bootstrap_without_spread_gives_no_test():
    assert math.isnan(multiplicity.bootstrap_p_value(0.3, 0.0)) and math.isnan(
        multiplicity.normal_interval(0.3, 0.0, 0.95)[0]
    )
    assert multiplicity.bootstrap_p_value(0.0, 1.0) == pytest.approx(1.0)


ROWS = 48  # one claim on one model: k x variant x letter measure x statistic


def _family(rng: np.random.Generator, effect: float, n: int = 40) -> pd.DataFrame:
    """48 comparisons of expansion vs random on ``n`` questions; ``effect`` (nats) lowers expansion's score."""
    rows = []
    for i in range(ROWS):
        a, b = rng.normal(-effect, 1.0, n), rng.normal(0.0, 1.0, n)
        draws = multiplicity.paired_draws(a, b, n_boot=200, seed=i)
        low, high = np.quantile(draws, [0.025, 0.975])
        se = multiplicity.bootstrap_se(draws, n)
        rows.append(
            {
                "model": "m",
                "first": "expansion",
                "second": "random",
                "statistic": "gold_logprob",
                "k": 1 + i % 6,
                "n": n,
                "n_sets": 20,
                "difference": float((a - b).mean()),
                "ci_low": low,
                "ci_high": high,
                "intact": 0.7,
                "intact_low": 0.6,
                "intact_high": 0.8,
                "chance": 0.25,
                "se": se,
                "df": n - 1,
                "p_value": multiplicity.bootstrap_p_value(float((a - b).mean()), se, n - 1),
            }
        )
    return with_holm(pd.DataFrame(rows))


def _decided(table: pd.DataFrame) -> bool:
    return any(comparison_outcome(rec).outcome.endswith("more critical") for rec in table.to_dict("records"))


def test_48_null_comparisons_decide_a_direction_in_at_most_5_percent_of_claims():
    rng = np.random.default_rng(0)
    raw, corrected, beyond = 0, 0, 0
    for _ in range(100):
        table = _family(rng, 0.0)
        raw += bool(((table["ci_high"] < 0) | (table["ci_low"] > 0)).any())
        corrected += _decided(table)
        beyond += bool((table["beyond_low"] > 0).any())  # "beyond its null (random blocks)" shown
        assert (table["n_family"] == ROWS).all()
    assert raw > 50  # uncorrected, some row of 48 decides in most claims
    # Holm's family-wise rate on 48 independent rows is 1 - (1 - 0.05 / 48) ** 48 = 4.9% (4.5% measured over
    # 400 draws of this family); 100 draws give 4.9 +- 2.2, and 8 is below the binomial 95% bound of 9
    assert corrected <= 8, corrected
    assert beyond <= 8, beyond


def test_a_strong_effect_stays_decided_and_beyond_random_is_shown():
    table = _family(np.random.default_rng(1), 1.5)
    outcomes = [comparison_outcome(rec).outcome for rec in table.to_dict("records")]
    assert outcomes.count(more_critical("expansion")) == ROWS
    assert (table["beyond_low"] > 0).all() and (table["beyond"] == -table["difference"]).all()
    assert "Holm over 48 comparisons" in comparison_outcome(table.iloc[0].to_dict()).why
