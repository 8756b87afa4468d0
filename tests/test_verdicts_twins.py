"""Beyond the twin: the verdict layer reads the twin table through the one decision function."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synthetic import task_store

from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.twins.table import twin_table
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import twins as W

NAME = "random-init twin (seed 0, same architecture)"
FAST = KnnSettings(k=7, n_splits=5, n_repeats=2)


def _paper(**rows: dict) -> pd.DataFrame:
    base = {"claim": "", "role": "finding", "split": "", "measure": "", "unit": "", "why": "", "beyond_verdict": ""}
    return pd.DataFrame([{**base, "claim_id": key.split("-")[0], **row} for key, row in rows.items()])


def _twin(reading: str, dataset: str, model: str, statistic: str, value, beyond, **extra) -> dict:
    return {
        "reading": reading,
        "dataset": dataset,
        "target": extra.pop("target", ""),
        "split": "",
        "model": model,
        "statistic": statistic,
        "scale": extra.pop("scale", ""),
        "n_sources": 20,
        "null_name": NAME,
        **dict(zip(("null_estimate", "null_low", "null_high"), value, strict=True)),
        **dict(zip(("beyond", "beyond_low", "beyond_high"), beyond, strict=True)),
        **extra,
    }


def test_each_learned_row_gets_its_twin_reading_and_word():
    paper = _paper(
        **{
            "task": {"model": "m", "measure": "shannon", "unit": "AUC %", "claim": "task separability"},
            "task-renyi": {"model": "m", "measure": "renyi(a=5)", "unit": "AUC %"},
            "overlap": {"model": "m", "split": "blank", "measure": "containment", "unit": "containment"},
            "spearman": {"model": "m", "split": "blank", "measure": "shannon", "unit": "rho"},
            "mmlu_correct": {"model": "m", "split": "base", "unit": "AUC %"},
            "format": {"model": "m", "measure": "shannon", "unit": "AUC %", "why": "not run: no formats"},
        }
    )
    twins = pd.DataFrame(
        [
            _twin("separability", "tasks", "m", "auc", (0.55, 0.45, 0.65), (0.35, 0.2, 0.5), target="task"),
            _twin("overlap", "blank", "m", "containment", (0.9, 0.88, 0.92), (-0.05, -0.08, -0.02)),
            _twin("spearman", "blank", "m", "spearman", (0.7, 0.6, 0.8), (0.0, -0.2, 0.2)),
        ]
    )
    out = W.with_twins(paper, twins).set_index(paper["claim_id"] + paper["measure"])
    task = out.loc["taskshannon"]
    assert task["beyond_twin_verdict"] == D.SHOWN and task["twin_estimate"] == 0.55 and task["twin"] == NAME
    assert task["twin_shows"] == "" and task["beyond_twin_why"].startswith("trained - ")
    assert out.loc["taskrenyi(a=5)", "beyond_twin_verdict"] == ""  # Rényi orders are read against Shannon
    overlap = out.loc["overlapcontainment"]
    assert overlap["beyond_twin_verdict"] == D.NOT_SHOWN and overlap["twin_shows"] == W.SHOWS_TOO
    assert out.loc["spearmanshannon", "beyond_twin_verdict"] == D.UNDECIDED_BEYOND
    assert out.loc["mmlu_correct", "beyond_twin_why"] == W.NO_TWIN_READING
    assert out.loc["formatshannon", "beyond_twin_verdict"] == "" and math.isnan(out.loc["formatshannon", "twin_low"])


def test_a_row_whose_twin_was_not_profiled_says_so():
    paper = _paper(
        spearman={"model": "m", "split": "tasks", "measure": "shannon", "unit": "rho"},
        overlap={"model": "m", "split": "blank", "measure": "other_statistic", "unit": "containment"},
    )
    twins = pd.DataFrame([_twin("spearman", "blank", "m", "spearman", (0.7, 0.6, 0.8), (0.0, -0.2, 0.2))])
    out = W.with_twins(paper, twins)
    assert out.loc[0, "beyond_twin_why"] == W.NOT_PROFILED
    assert out.loc[1, "beyond_twin_why"] == "" and out.loc[1, "beyond_twin_verdict"] == ""  # profiled, not read


def test_a_shape_reads_its_weakest_part_in_the_claimed_direction():
    paper = _paper(shape_llama={"model": "m", "split": "blank", "measure": "shannon", "unit": "nats"})
    rows = [  # llama: rise above 0, drift below the plateau bar, refine above 0
        _twin("shape", "blank", "m", "rise", (0.0, -0.1, 0.1), (0.5, 0.3, 0.7)),
        _twin("shape", "blank", "m", "drift", (0.3, 0.2, 0.4), (-0.2, -0.3, -0.1)),
        _twin("shape", "blank", "m", "refine", (0.0, -0.1, 0.1), (0.1, -0.05, 0.25)),
    ]
    out = W.with_twins(paper, pd.DataFrame(rows)).iloc[0]
    assert out["beyond_twin"] == pytest.approx(0.1) and out["beyond_twin_low"] == pytest.approx(-0.05)
    assert out["beyond_twin_verdict"] == D.UNDECIDED_BEYOND and out["beyond_twin_why"].startswith("weakest part refine")
    assert out["twin_shows"] == ""


def test_beyond_both_is_the_weaker_word_and_the_headline_names_what_a_random_network_shows():
    assert W.weaker(D.SHOWN, D.NOT_SHOWN) == D.NOT_SHOWN and W.weaker(D.SHOWN, D.UNDECIDED_BEYOND) == "undecided"
    assert W.weaker(D.SHOWN, "") == D.SHOWN and W.weaker(D.NOT_SHOWN, D.SHOWN) == D.NOT_SHOWN
    top = pd.DataFrame(
        {
            "claim": ["adjacent layers share", "task separability", "format separability"],
            "beyond_verdict": [D.SHOWN, D.SHOWN, D.SHOWN],
            "beyond_why": ["a", "b", "c"],
            "beyond_twin_verdict": [D.NOT_SHOWN, D.SHOWN, ""],
            "beyond_twin_why": ["x", "y", ""],
            "twin_shows": [W.SHOWS_TOO, "", ""],
        }
    )
    both = W.with_both(top)
    assert both["beyond_verdict"].tolist() == [D.NOT_SHOWN, D.SHOWN, D.SHOWN]
    assert both[W.NULL_ONLY].tolist() == [D.SHOWN] * 3
    assert both.loc[0, "beyond_why"] == "a; beyond the twin: not shown (x)" and both.loc[2, "beyond_why"] == "c"
    lines = W.twin_lines(both)
    assert lines[0] == "A random network of the same architecture already shows: adjacent layers share."
    assert lines[1] == "Beyond the twin (2 rows read on the twins): 1 shown, 1 not shown, 0 undecided."
    assert W.twin_section(both).startswith("\n## Beyond the twin\n\nA random network")
    assert max(len(line) for line in W.twin_section(both, width=40).splitlines()) <= 40
    assert W.twin_section(both.assign(beyond_twin_verdict="")) == ""


def _task_row(trained, twin) -> pd.Series:
    table = twin_table({"tasks": trained}, {"tasks": twin}, twin_seed=0, settings=FAST, n_boot=200)
    paper = _paper(task={"model": "m1", "measure": "shannon", "unit": "AUC %"})
    return W.with_twins(paper, table).iloc[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_twin_of_a_random_model_is_not_beyond_it_on_a_planted_design(seed):
    """A random model and its twin, drawn alike (no learned task structure): never "beyond the twin: shown"."""
    row = _task_row(task_store(0.0, 10 * seed), task_store(0.0, 10 * seed + 1))
    assert row["beyond_twin_verdict"] in (D.NOT_SHOWN, D.UNDECIDED_BEYOND)


def test_a_trained_like_planted_effect_is_beyond_its_random_twin():
    row = _task_row(task_store(1.5, 0), task_store(0.0, 1))
    assert row["beyond_twin_verdict"] == D.SHOWN and row["twin_shows"] == ""


def test_structure_every_random_network_has_reads_as_shown_by_the_twin_too():
    """Adjacent-layer persistence: model and twin both keep 0.9 of their sets, so the containment row is not
    beyond its twin and says a random network shows it too."""
    table = twin_table(
        {"tasks": task_store(0.0, 4, jaccard=0.9)}, {"tasks": task_store(0.0, 5, jaccard=0.9)}, twin_seed=0, n_boot=200
    )
    paper = _paper(overlap={"model": "m1", "split": "tasks", "measure": "containment", "unit": "containment"})
    row = W.with_twins(paper, table).iloc[0]
    assert row["twin_shows"] == W.SHOWS_TOO and row["beyond_twin_verdict"] != D.SHOWN
    assert np.isclose(row["beyond_twin"], 0.0)
