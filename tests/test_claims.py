"""The claim registry: one record per claim, in its topic's module and listed once, each naming a verdict rule and
study figure that exist."""

from __future__ import annotations

import importlib
import inspect

import pandas as pd
import pytest

from entropy_lens.analysis.separability.targets import STUDY_TARGETS
from entropy_lens.verdicts import registry, study
from entropy_lens.verdicts.claim import CONTAINMENT_STATISTIC, HEADLINE_SCALE, PER_STYLE, POOLED, ROLES, SHANNON, Claim
from entropy_lens.verdicts.claims import expansion, separability

RULE_MODULES = ("entropy_lens.verdicts.rules", "entropy_lens.verdicts.outcomes")


def test_each_claim_is_one_record_with_a_unique_id_and_name():
    assert len({c.id for c in registry.CLAIMS}) == len({c.name for c in registry.CLAIMS}) == len(registry.CLAIMS)
    assert tuple(c.id for c in registry.CLAIMS) == registry.CLAIM_ORDER
    assert {c.role for c in registry.CLAIMS} <= set(ROLES)


@pytest.mark.parametrize("claim", registry.CLAIMS, ids=lambda c: c.id)
def test_each_claim_names_a_verdict_rule_and_a_figure_that_exist(claim):
    """The rule is a public function of the rule modules (a row rule's helper is not a rule)."""
    module = importlib.import_module(claim.rule.__module__)
    assert module.__name__ in RULE_MODULES and getattr(module, claim.rule.__name__) is claim.rule
    assert not claim.rule.__name__.startswith("_")
    assert claim.unit
    if claim.figure:
        assert claim.figure in study.STUDY["figures"] or claim.figure in study.STUDY["sentences"]


def test_every_knn_target_tests_a_registered_claim():
    assert {t.name for t in STUDY_TARGETS} == set(separability.KNN_CLAIMS)
    assert all(separability.KNN_CLAIMS[t.name].dataset == t.dataset for t in STUDY_TARGETS)
    assert set(separability.KNN_CLAIMS.values()) <= set(registry.CLAIMS)


def _records(topic) -> list:
    return [value for value in vars(topic).values() if isinstance(value, Claim)]


def test_every_record_of_a_topic_is_listed_once_in_the_registry_and_every_topic_is_read():
    """A claim is written in its topic's module; the registry lists it (reading order) and reads the topic's
    inputs. A record left out of CLAIMS, or a topic module left out of TOPICS, fails here."""
    import pkgutil

    from entropy_lens.verdicts import claims

    topics = [importlib.import_module(f"{claims.__name__}.{m.name}") for m in pkgutil.iter_modules(claims.__path__)]
    assert set(topics) == set(registry.TOPICS)
    defined = [record for topic in topics for record in _records(topic)]
    assert sorted(c.id for c in defined) == sorted(registry.CLAIM_ORDER)
    inputs = [name for topic in registry.TOPICS for name in topic.INPUTS]
    assert len(inputs) == len(set(inputs))


def test_rows_of_a_claim_left_out_of_the_registry_are_refused():
    from dataclasses import replace

    import pandas as pd

    from entropy_lens.verdicts.decision import not_run
    from entropy_lens.verdicts.rows import COLUMNS, row
    from entropy_lens.verdicts.table import _ordered

    stray = replace(expansion.SPEARMAN, id="stray")
    rows = [
        row(expansion.SPEARMAN, "m", "", not_run("x")),
        row(stray, "m", "", not_run("x")),
    ]
    with pytest.raises(ValueError, match=r"rows of claims not in the registry: \['stray'\]; list each record"):
        _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


def test_the_headline_selections_name_measures_the_analyses_write():
    from entropy_lens.analysis.expansion.nulls import CONTAINMENT
    from entropy_lens.analysis.families.scales import NORMALIZED, SCALES
    from entropy_lens.analysis.features import metric_label
    from entropy_lens.store import schema

    assert (
        metric_label(schema.ENTROPY, None),
        CONTAINMENT,
        NORMALIZED,
    ) == (SHANNON, CONTAINMENT_STATISTIC, HEADLINE_SCALE)
    assert HEADLINE_SCALE in SCALES
    assert {c.headline.styles for c in registry.CLAIMS} <= {"", POOLED, PER_STYLE}
    # the skip experiment's claims share one smallest k: every claim of its dataset sets it, no other does
    assert {c.id for c in registry.CLAIMS if c.headline.smallest_k} == set(registry.SKIP_CLAIMS)


def test_an_unknown_claim_is_named():
    with pytest.raises(ValueError, match="unknown claim id 'no such claim'"):
        registry.claim("no such claim")
    assert registry.claim("spearman") is expansion.SPEARMAN


def test_study_figures_are_the_papers():
    """data/study.yaml holds the study's published numbers."""
    assert study.STUDY_SPEARMAN == {
        "Llama-3.2-1B": 0.8250,
        "Llama-3.2-3B": 0.7365,
        "Gemma-2-2B": 0.8804,
        "Gemma-2-9B": 0.8540,
    }
    assert study.STUDY_TASK_AUC["Llama-3.2-1B"] == 94.94 and study.STUDY_TASK_AUC["Gemma-2-9B"] == 98.38
    assert study.STUDY_FORMAT_AUC == {"Gemma-2-2B": (98.7, 1.1), "Llama-3.2-1B": (97.8, 2.4)}
    assert study.STUDY_MMLU_ACCURACY == {"llama": (50.89, 60.62), "gemma": (55.0, 56.0)}
    assert study.STUDY_MMLU_AUC == {"llama": (67.23, 73.61), "gemma": (68.36, 72.78)}
    assert study.study_model_for("meta-llama/Meta-Llama-3-8B-Instruct") == "Llama-3-8B"


# --------------------------------------------------------------------------- the named rule is the rule applied


def _spy_on_rules(monkeypatch) -> list:
    """Replace every public function of the rule modules by a spy that logs the function (as ``Claim.rule``
    holds it) and calls through; returns the log."""
    from entropy_lens.verdicts.claims import families

    log: list = []
    spies = {}
    for module in map(importlib.import_module, RULE_MODULES):
        for name, function in list(vars(module).items()):
            if inspect.isfunction(function) and function.__module__ == module.__name__ and not name.startswith("_"):
                spies[function] = _spy(function, log)
                monkeypatch.setattr(module, name, spies[function])
    for statistic, (claim, judge, *rest) in families.PAIR_CLAIMS.items():  # rules held as objects, not looked up
        monkeypatch.setitem(families.PAIR_CLAIMS, statistic, (claim, spies[judge], *rest))
    return log


def _spy(function, log: list):
    def spy(*args, **kwargs):
        log.append(function)
        return function(*args, **kwargs)

    return spy


def test_each_claims_rows_are_judged_by_the_rule_its_record_names(monkeypatch):
    """Every judged row (rows_of) of the claims the paper-table fixtures reach calls ``Claim.rule``: a row
    rule that judged a claim by another function than its record names fails here."""
    import test_analysis_paper as fixtures

    from entropy_lens.verdicts import rows as table_rows
    from entropy_lens.verdicts.table import Expected, paper_table

    log = _spy_on_rules(monkeypatch)
    called: dict[str, list[set]] = {}
    build = table_rows.row

    def row(claim, *args, **kwargs):
        called.setdefault(claim.id, []).append(set(log))
        log.clear()
        return build(claim, *args, **kwargs)

    monkeypatch.setattr(table_rows, "row", row)  # rows_of's rows only: the judged ones
    families = {"llama-3.2-1b": "llama", "gemma-2-2b-it": "gemma", "qwen-1.5b": "qwen"}
    skip = pd.concat([fixtures._skip_frame(m) for m in families], ignore_index=True)
    rank = pd.concat([fixtures._rank(m) for m in families], ignore_index=True)
    paper_table(layer_skip=skip, skip_spearman=rank, expected=Expected(layer_skip=list(families)))
    paper_table(
        knn=fixtures._knn(), accuracy=fixtures._accuracy(), heldout=fixtures._heldout(), expected=fixtures._expected()
    )
    paper_table(
        renyi=fixtures._renyi(),
        knn=fixtures._knn(),
        overlap=fixtures._overlap(),
        shapes=fixtures._shapes(),
        expected=fixtures._expected(),
    )
    paper_table(family_pairs=fixtures._pairs(), expected=fixtures._family_expected(fixtures.PAIR_FAMILIES))
    spearman = {"model": "m", "n": 900, "n_sources": 30, "spearman": 0.9, "ci_low": 0.85, "ci_high": 0.94}
    paper_table(expansion=fixtures._csv([spearman | {"dataset": "blank"}]), expected=fixtures._expected())
    judged_by_another = {
        claim for claim, calls in called.items() if not any(registry.claim(claim).rule in c for c in calls)
    }
    assert judged_by_another == set()
    assert len(called) >= 17, sorted(set(registry.BY_ID) - set(called))  # the fixtures reach 17 of the claims


def test_every_claim_has_a_planted_null_or_says_why_not():
    """A new claim gets a planted-null simulator in verdicts.nulls.PLANTED (its rule's rate on null data, in the
    same run), or a reason in NO_NULL_OF_ITS_OWN; a claim in neither fails here."""
    from entropy_lens.verdicts import nulls

    ids = {c.id for c in registry.CLAIMS}
    assert set(nulls.PLANTED).isdisjoint(nulls.NO_NULL_OF_ITS_OWN)
    assert ids - set(nulls.PLANTED) - set(nulls.NO_NULL_OF_ITS_OWN) == set()
    assert set(nulls.PLANTED) | set(nulls.NO_NULL_OF_ITS_OWN) <= ids  # no simulator for a claim that is gone
