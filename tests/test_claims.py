"""The claim registry: one record per claim, in its topic's module and listed once, each naming a verdict rule and
study figure that exist."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace

import pandas as pd
import pytest

from entropy_lens.analysis.separability.targets import STUDY_TARGETS
from entropy_lens.verdicts import registry, study
from entropy_lens.verdicts import table as paper
from entropy_lens.verdicts.claim import CONTAINMENT_STATISTIC, HEADLINE_SCALE, PER_STYLE, POOLED, ROLES, SHANNON, Claim
from entropy_lens.verdicts.claims import expansion, separability
from entropy_lens.verdicts.inputs import PaperInput
from entropy_lens.verdicts.tested import NoNull, PlantedNull, TestedClaim, resolve

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


def _topics() -> list:
    import pkgutil

    from entropy_lens.verdicts import claims

    return [importlib.import_module(f"{claims.__name__}.{m.name}") for m in pkgutil.iter_modules(claims.__path__)]


def test_every_claim_of_a_topic_is_one_object_listed_once_in_the_registry():
    """A claim is one object in its topic's module (record, row rule, inputs, null); the registry lists it once, in
    reading order. A record without its object, or an object left out of TESTED, fails here."""
    objects = [v for topic in _topics() for v in vars(topic).values() if isinstance(v, TestedClaim)]
    records = [v for topic in _topics() for v in vars(topic).values() if isinstance(v, Claim)]
    assert sorted(t.record.id for t in objects) == sorted(c.id for c in records) == sorted(registry.CLAIM_ORDER)
    assert len(registry.TESTED) == len(set(registry.TESTED)) == len(objects)
    assert set(registry.TESTED) == set(objects)


def test_every_table_a_topic_declares_is_read_by_a_claim():
    declared = {v.name for topic in _topics() for v in vars(topic).values() if isinstance(v, PaperInput)}
    assert declared == set(paper.INPUTS)


def test_a_claim_names_the_tables_it_reads_and_its_own_rule():
    with pytest.raises(ValueError, match="claim 'spearman' reads no table: name the PaperInput"):
        TestedClaim(expansion.SPEARMAN, expansion.SPEARMAN_RULE, (), NoNull("x"))
    with pytest.raises(ValueError, match="claim 'overlap': its row rule is that of 'spearman'"):
        TestedClaim(expansion.OVERLAP, expansion.SPEARMAN_RULE, (expansion.OVERLAP_TABLE,), NoNull("x"))
    with pytest.raises(ValueError, match="two paper-table inputs are named 'expansion'"):
        twin = replace(expansion.OVERLAP_TABLE, name="expansion")
        tested = (*registry.TESTED, replace(expansion.OVERLAP_TESTED, inputs=(twin,)))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(paper, "TESTED", tested)
            paper._inputs()


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


def _judged(monkeypatch) -> dict[str, list[set]]:
    """Claim id -> per judged row (rows_of) the rule functions called, over paper tables that reach every claim."""
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
    _the_rest(paper_table, Expected, fixtures)
    return called


def _the_rest(paper_table, expected, fixtures) -> None:
    """Paper tables of the claims the fixtures above do not reach: the other kNN targets, a GPT-family shape, the
    drop sets and the schedule under a fitted lens."""
    from test_drop_sets import N_LAYERS, scenario
    from test_schedule import DELTA, LEVELS, _readings

    from entropy_lens.analysis.schedule import schedule_table
    from entropy_lens.analysis.schedule_agreement import agreement_table
    from entropy_lens.skipping import drop_scores

    knn = [
        fixtures._knn_row(target, "m", "grouped", 0.9, 0.85, 0.95, split=split)
        for target, split in (("task_scrambled", ""), ("image_class", ""), ("mmlu_correct_calibrated", "base"))
    ]
    families = {"a": "x", "b": "x", "c": "y", "d": "y"}  # two models a family: the family claim, not identity
    knn.append(fixtures._knn_row("family", "all", "grouped", 0.99, 0.97, 1.0))
    paper_table(knn=fixtures._csv(knn), expected=expected(datasets={"blank": list(families)}, families=families))
    gpt = fixtures._shapes().assign(model="gpt2", family="gpt2")
    paper_table(shapes=gpt, expected=expected(families={"gpt2": "gpt2"}, architectures={"gpt2": "gpt2"}))
    rows, drops = scenario({"keeps": 0.95, "loses": 0.2}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=50, seed=0)
    paper_table(drop_scores=scores, expected=expected(layer_skip=["m"], families={"m": "qwen"}))
    readings, prompts = _readings(LEVELS, DELTA)
    schedule = schedule_table(readings, prompts, model="m", n_boot=50, seed=0)
    paper_table(lens_schedule=agreement_table(readings, prompts, schedule, model="m", n_boot=50, seed=0))


def _misjudged(called: dict[str, list[set]]) -> set[str]:
    """The claims none of whose judged rows called the rule its record names (a row may be gated by a
    precondition first: MMLU correctness on a model at chance)."""
    return {claim for claim, calls in called.items() if not any(registry.claim(claim).rule in c for c in calls)}


def test_each_claims_rows_are_judged_by_the_rule_its_record_names(monkeypatch):
    """Every judged row (rows_of) of every claim of the registry calls ``Claim.rule``: a row rule that judged a claim
    by another function than its record names fails here, and so does a claim no fixture reaches."""
    called = _judged(monkeypatch)
    assert set(called) == set(registry.CLAIM_ORDER), sorted(set(registry.CLAIM_ORDER) - set(called))
    assert _misjudged(called) == set()


def test_a_record_naming_another_rule_is_caught(monkeypatch):
    """Planted: the task claim's record names ``above_threshold`` while its rows are judged by ``separability``."""
    from entropy_lens.verdicts import rules

    called = _judged(monkeypatch)
    wrong = replace(registry.BY_ID["task"], rule=rules.above_threshold)
    monkeypatch.setitem(registry.BY_ID, "task", wrong)
    assert _misjudged(called) == {"task"}


def test_every_claim_has_a_planted_null_or_says_why_not():
    """A claim's object holds its null: a planted-null simulator that imports (its rule's rate on null data, in the
    same run), or a reason it has none; verdicts.nulls and verdicts.mechanical read them from the registry."""
    from entropy_lens.verdicts import mechanical, nulls

    assert _unresolved(registry.TESTED) == []
    assert set(nulls.PLANTED).isdisjoint(nulls.NO_NULL_OF_ITS_OWN)
    assert set(nulls.PLANTED) | set(nulls.NO_NULL_OF_ITS_OWN) == set(registry.CLAIM_ORDER)
    assert set(nulls.PLANTED_AT_ROW) == {"accuracy", "family_heldout"} and set(mechanical.PLANTED_TRUE) == {"spearman"}


def _unresolved(tested) -> list[str]:
    """The claims whose null names a simulator that does not import."""
    out = []
    for t in tested:
        paths = [t.null.simulator, t.null.at_row] if isinstance(t.null, PlantedNull) else []
        paths += [t.null.planted_true.simulator] if isinstance(t.null, PlantedNull) and t.null.planted_true else []
        try:
            [resolve(p) for p in paths if p]
        except (ValueError, ImportError):
            out.append(t.record.id)
    return out


def test_a_missing_null_is_caught():
    """Planted: a claim without a null, with an empty reason, or with a simulator that does not exist."""
    with pytest.raises(TypeError, match="null"):
        TestedClaim(expansion.SPEARMAN, expansion.SPEARMAN_RULE, (expansion.EXPANSION_TABLE,))
    with pytest.raises(ValueError, match="must say why: NoNull"):
        NoNull(" ")
    gone = replace(expansion.SPEARMAN_TESTED, null=PlantedNull("entropy_lens.analysis.expansion.planted:no_such"))
    assert _unresolved([gone]) == ["spearman"]
