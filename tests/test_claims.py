"""The claim registry: one record per claim, each naming a verdict rule and study figure that exist."""

from __future__ import annotations

import importlib

import pytest

from entropy_lens.analysis.targets import STUDY_TARGETS
from entropy_lens.verdicts import registry as C


def test_each_claim_is_one_record_with_a_unique_id_and_name():
    assert len({c.id for c in C.CLAIMS}) == len({c.name for c in C.CLAIMS}) == len(C.CLAIMS)
    assert tuple(c.id for c in C.CLAIMS) == C.CLAIM_ORDER
    assert {c.role for c in C.CLAIMS} <= set(C.ROLES)


@pytest.mark.parametrize("claim", C.CLAIMS, ids=lambda c: c.id)
def test_each_claim_names_a_verdict_rule_and_a_figure_that_exist(claim):
    module, _, function = claim.rule.rpartition(".")
    assert callable(getattr(importlib.import_module(f"entropy_lens.verdicts.{module}"), function))
    assert claim.unit
    if claim.figure:
        assert claim.figure in C.STUDY["figures"] or claim.figure in C.STUDY["sentences"]


def test_every_knn_target_tests_a_registered_claim():
    assert {t.name for t in STUDY_TARGETS} == set(C.KNN_CLAIMS)
    assert {C.KNN_DATASETS[t.name] for t in STUDY_TARGETS} == {t.dataset for t in STUDY_TARGETS}
    assert all(C.KNN_DATASETS[t.name] == t.dataset for t in STUDY_TARGETS)


def test_an_unknown_claim_is_named():
    with pytest.raises(ValueError, match="unknown claim id 'no such claim'"):
        C.claim("no such claim")
    assert C.claim("spearman").name == C.SPEARMAN


def test_study_figures_are_the_papers():
    """data/study.yaml holds the study's published numbers."""
    assert C.STUDY_SPEARMAN == {
        "Llama-3.2-1B": 0.8250,
        "Llama-3.2-3B": 0.7365,
        "Gemma-2-2B": 0.8804,
        "Gemma-2-9B": 0.8540,
    }
    assert C.STUDY_TASK_AUC["Llama-3.2-1B"] == 94.94 and C.STUDY_TASK_AUC["Gemma-2-9B"] == 98.38
    assert C.STUDY_FORMAT_AUC == {"Gemma-2-2B": (98.7, 1.1), "Llama-3.2-1B": (97.8, 2.4)}
    assert C.STUDY_MMLU_ACCURACY == {"llama": (50.89, 60.62), "gemma": (55.0, 56.0)}
    assert C.STUDY_MMLU_AUC == {"llama": (67.23, 73.61), "gemma": (68.36, 72.78)}
    assert C.study_model_for("meta-llama/Meta-Llama-3-8B-Instruct") == "Llama-3-8B"
