"""Beyond the twin: the verdict layer reads the twin table through the one decision function."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synthetic import task_store

from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.twins.table import twin_table
from entropy_lens.verdicts import claim_verdicts, decision, twins
from entropy_lens.verdicts.claims.separability import NO_CORRECTNESS
from entropy_lens.verdicts.nulls import PLANTED_READINGS, nulls_table
from entropy_lens.verdicts.readings import CHANCE, NOT_READ, TWIN

NAME = "random-init twin (seed 0, same architecture)"
FAST = KnnSettings(k=7, n_splits=5, n_repeats=2)


def _paper(**rows: dict) -> pd.DataFrame:
    base = {"claim": "", "role": "finding", "split": "", "measure": "", "unit": "", "why": "", "estimate": np.nan}
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


def test_each_learned_row_gets_its_twin_reading_in_the_twin_columns():
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
    twin_table_rows = pd.DataFrame(
        [
            _twin(
                "separability", "tasks", "m", "auc", (0.55, 0.45, 0.65), (0.35, 0.2, 0.5), target="task", estimate=0.9
            ),
            _twin("overlap", "blank", "m", "containment", (0.9, 0.88, 0.92), (-0.05, -0.08, -0.02), estimate=0.85),
            _twin("spearman", "blank", "m", "spearman", (0.7, 0.6, 0.8), (0.0, -0.2, 0.2), estimate=0.7),
        ]
    )
    out = twins.with_twins(paper, twin_table_rows).set_index(paper["claim_id"] + paper["measure"])
    assert not {"twin_shows", "beyond_twin_verdict", "beyond_null_only"} & set(out.columns)  # no columns of its own
    task = out.loc["taskshannon"]
    assert task[TWIN.word] == decision.SHOWN and task[TWIN.estimate] == 0.55 and task[TWIN.name] == NAME
    assert (task[TWIN.low], task[TWIN.high]) == (0.45, 0.65) and task[TWIN.observed] == 0.9
    assert (task[TWIN.beyond], task[TWIN.beyond_low], task[TWIN.beyond_high]) == (0.35, 0.2, 0.5)
    assert task[TWIN.at_bar] == 0.0 and task[TWIN.why].startswith("trained - " + NAME)
    assert twins.SHOWS_TOO not in task[TWIN.why]
    assert out.loc["taskrenyi(a=5)", TWIN.word] == ""  # Rényi orders are read against Shannon, not a twin
    overlap = out.loc["overlapcontainment"]
    assert overlap[TWIN.word] == decision.NOT_SHOWN and overlap[TWIN.at_bar] == 1.0  # the twin alone is past 0.5
    assert overlap[TWIN.why].endswith(twins.SHOWS_TOO)
    spearman = out.loc["spearmanshannon"]
    assert spearman[TWIN.word] == decision.UNDECIDED_BEYOND and spearman[TWIN.at_bar] == 1.0
    mmlu = out.loc["mmlu_correct"]
    assert mmlu[TWIN.word] == NOT_READ and mmlu[TWIN.why] == f"{NOT_READ}: {NO_CORRECTNESS.reason}"
    assert out.loc["formatshannon", TWIN.word] == "" and math.isnan(out.loc["formatshannon", TWIN.low])  # not run
    # A negligible excess over the twin reads as the one decision says (margin 5 AUC points).
    small = twin_table_rows.assign(beyond=0.02, beyond_low=0.01, beyond_high=0.03).iloc[[0]]
    assert twins.with_twins(paper, small).loc[0, TWIN.word] == decision.SHOWN_NEGLIGIBLE


def test_a_row_whose_twin_was_not_profiled_says_so():
    paper = _paper(
        spearman={"model": "m", "split": "tasks", "measure": "shannon", "unit": "rho"},
        overlap={"model": "m", "split": "blank", "measure": "other_statistic", "unit": "containment"},
    )
    rows = pd.DataFrame([_twin("spearman", "blank", "m", "spearman", (0.7, 0.6, 0.8), (0.0, -0.2, 0.2))])
    out = twins.with_twins(paper, rows)
    assert out.loc[0, TWIN.word] == NOT_READ and out.loc[0, TWIN.why] == f"{NOT_READ}: {twins.NOT_PROFILED}"
    assert out.loc[1, TWIN.why] == "" and out.loc[1, TWIN.word] == ""  # profiled there, its statistic not read


def test_a_shape_reads_its_weakest_part_in_the_claimed_direction():
    paper = _paper(shape_llama={"model": "m", "split": "blank", "measure": "shannon", "unit": "nats"})
    rows = [  # llama: rise above 0, drift below the plateau bar, refine above 0
        _twin("shape", "blank", "m", "rise", (0.0, -0.1, 0.1), (0.5, 0.3, 0.7), estimate=0.5),
        _twin("shape", "blank", "m", "drift", (0.3, 0.2, 0.4), (-0.2, -0.3, -0.1), estimate=0.1),
        _twin("shape", "blank", "m", "refine", (0.0, -0.1, 0.1), (0.1, -0.05, 0.25), estimate=0.1),
    ]
    out = twins.with_twins(paper, pd.DataFrame(rows)).iloc[0]
    assert out[TWIN.beyond] == pytest.approx(0.1) and out[TWIN.beyond_low] == pytest.approx(-0.05)
    assert out[TWIN.word] == decision.UNDECIDED_BEYOND and out[TWIN.why].startswith("weakest part refine")
    assert out[TWIN.at_bar] == 0.0  # the twin's rise and refine intervals hold 0
    assert out[TWIN.observed] - out[TWIN.estimate] == pytest.approx(out[TWIN.beyond])
    # Drift is claimed below its bar: its excess is read with its sign turned, so a model drifting more than its
    # twin is not beyond it.
    rows[1] = _twin("shape", "blank", "m", "drift", (0.3, 0.2, 0.4), (0.2, 0.05, 0.35), estimate=0.5)
    drift = twins.with_twins(paper, pd.DataFrame(rows)).iloc[0]
    assert drift[TWIN.why].startswith("weakest part drift") and drift[TWIN.beyond] == pytest.approx(-0.2)
    assert (drift[TWIN.beyond_low], drift[TWIN.beyond_high]) == pytest.approx((-0.35, -0.05))
    assert (drift[TWIN.observed], drift[TWIN.estimate]) == pytest.approx((-0.5, -0.3))
    assert drift[TWIN.word] == decision.NOT_SHOWN


def _top(chance: list[str], twin: list[str], at_bar: list[float]) -> pd.DataFrame:
    claims = ["adjacent layers share", "task separability", "format separability"]
    return pd.DataFrame(
        {
            "claim": claims,
            "claim_id": ["overlap", "task", "format"],
            "role": "finding",
            "model": "m",
            "verdict": decision.REPRODUCED,
            "why": "",
            CHANCE.word: chance,
            CHANCE.why: [f"chance {i}" for i in range(3)],
            TWIN.word: twin,
            TWIN.why: [f"twin {i}" for i in range(3)],
            TWIN.at_bar: at_bar,
        }
    )


def test_beyond_its_null_is_the_weaker_of_chance_and_twin_in_the_claims_word():
    """docs/verdicts.md, "Beyond the twin": the claim's "beyond its null" is beyond both its null and its twin; the
    rows keep their own words."""
    top = _top([decision.SHOWN] * 3, [decision.NOT_SHOWN, decision.SHOWN, ""], [1.0, 0.0, np.nan])
    claims = claim_verdicts.claim_verdicts(top).set_index("claim")
    overlap = claims.loc["adjacent layers share"]
    assert overlap[CHANCE.claim_word] == decision.NOT_SHOWN and overlap[TWIN.claim_word] == decision.NOT_SHOWN
    assert overlap[CHANCE.why] == "beyond the twin: not shown (twin 0); beyond chance alone: shown (chance 0)"
    assert claims.loc["task separability", CHANCE.claim_word] == decision.SHOWN
    assert claims.loc["task separability", CHANCE.why] == "chance 1"
    assert claims.loc["format separability", CHANCE.claim_word] == decision.SHOWN  # no twin reading: its null alone
    assert top[CHANCE.word].tolist() == [decision.SHOWN] * 3  # the rows are not overwritten
    undecided = claim_verdicts.claim_verdicts(_top([decision.SHOWN] * 3, [decision.UNDECIDED_BEYOND] * 3, [0.0] * 3))
    assert set(undecided[CHANCE.claim_word]) == {decision.UNDECIDED_BEYOND}
    # A chance word that is not a beyond word (mechanical: not read) is not replaced by the twin's.
    unread = claim_verdicts.claim_verdicts(_top([NOT_READ] * 3, [decision.NOT_SHOWN] * 3, [0.0] * 3))
    assert set(unread[CHANCE.claim_word]) == {NOT_READ} and set(unread[TWIN.claim_word]) == {decision.NOT_SHOWN}
    assert (
        claim_verdicts.beyond_both(
            {
                CHANCE.claim_word: decision.NOT_SHOWN,
                CHANCE.why: "c",
                TWIN.claim_word: claim_verdicts.MIXED,
                TWIN.why: "t",
            }
        )[CHANCE.claim_word]
        == decision.NOT_SHOWN
    )


def test_the_headline_names_the_claims_a_random_network_already_shows():
    top = _top([decision.SHOWN] * 3, [decision.NOT_SHOWN, decision.SHOWN_NEGLIGIBLE, ""], [1.0, 0.0, np.nan])
    lines = twins.twin_lines(top)
    assert lines[0] == "A random network of the same architecture already shows: adjacent layers share."
    assert lines[1] == (
        "Beyond the twin (2 rows read on the twins): 0 shown; 1 shown, negligible; 1 not shown; 0 undecided."
    )
    assert twins.twin_section(top).startswith("\n## Beyond the twin\n\nA random network")
    assert max(len(line) for line in twins.twin_section(top, width=40).splitlines()) <= 40
    assert twins.twin_section(top.assign(**{TWIN.word: ""})) == ""
    none = twins.twin_lines(top.assign(**{TWIN.at_bar: 0.0}))
    assert none[0] == "No claim read on the twins is shown by a random network of the same architecture alone."


def _task_row(trained, twin) -> pd.Series:
    table = twin_table({"tasks": trained}, {"tasks": twin}, twin_seed=0, settings=FAST, n_boot=200)
    paper = _paper(task={"model": "m1", "measure": "shannon", "unit": "AUC %"})
    return twins.with_twins(paper, table).iloc[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_twin_of_a_random_model_is_not_beyond_it_on_a_planted_design(seed):
    """A random model and its twin, drawn alike (no learned task structure): never "beyond the twin: shown"."""
    row = _task_row(task_store(0.0, 10 * seed), task_store(0.0, 10 * seed + 1))
    assert row[TWIN.word] in (decision.NOT_SHOWN, decision.UNDECIDED_BEYOND)


def test_a_trained_like_planted_effect_is_beyond_its_random_twin():
    row = _task_row(task_store(1.5, 0), task_store(0.0, 1))
    assert row[TWIN.word] == decision.SHOWN and row[TWIN.at_bar] == 0.0


def test_structure_every_random_network_has_reads_as_shown_by_the_twin_too():
    """Adjacent-layer persistence: model and twin both keep 0.9 of their sets, so the containment row is not
    beyond its twin and says a random network shows it too."""
    table = twin_table(
        {"tasks": task_store(0.0, 4, jaccard=0.9)}, {"tasks": task_store(0.0, 5, jaccard=0.9)}, twin_seed=0, n_boot=200
    )
    paper = _paper(overlap={"model": "m1", "split": "tasks", "measure": "containment", "unit": "containment"})
    row = twins.with_twins(paper, table).iloc[0]
    assert row[TWIN.at_bar] == 1.0 and row[TWIN.word] not in (decision.SHOWN, decision.SHOWN_NEGLIGIBLE)
    assert np.isclose(row[TWIN.beyond], 0.0)


def test_the_nulls_table_has_a_row_per_twin_reading_with_its_planted_null_where_one_exists():
    """Separability's twin rows draw on the paired-folds design (the simplest feature's); a row on another design
    says it has no planted null, and why."""
    assert PLANTED_READINGS[TWIN.key] is PLANTED_READINGS["feature"]
    rows = [
        _twin("separability", "tasks", "m", "auc", (0.55, 0.45, 0.65), (0.35, 0.2, 0.5), target="task", estimate=0.9),
        _twin("overlap", "tasks", "m", "containment", (0.9, 0.88, 0.92), (-0.05, -0.08, -0.02), estimate=0.85),
    ]
    paper = _paper(
        task={"model": "m", "measure": "shannon", "unit": "AUC %", "n_sources": 8},
        overlap={"model": "m", "split": "tasks", "measure": "containment", "unit": "containment", "n_sources": 8},
    )
    table = twins.with_twins(paper.assign(claim=["task separability", "adjacent layers share"]), pd.DataFrame(rows))
    nulls = nulls_table(table, planted={}, planted_true={}).set_index("claim_id")
    assert (nulls["reading"] == TWIN.key).all() and len(nulls) == 2
    task, overlap = nulls.loc["task"], nulls.loc["overlap"]
    assert task["planted_draws"] >= 45 and task["planted_high"] <= 0.08 and task["observed"] == 0.9
    assert task["observed"] - task["null_estimate"] == pytest.approx(task["beyond"])
    assert overlap["planted_draws"] == 0 and overlap["planted_note"].startswith("no planted null: the twin's paired")


def test_breaking_the_one_decision_breaks_the_twin_reading(monkeypatch):
    """The twin's word comes from decision.beyond_null: a decision that shows everything shows the null twin too."""
    monkeypatch.setattr(decision, "beyond_null", lambda null, **_: decision.Beyond(decision.SHOWN, "broken"))
    row = _task_row(task_store(0.0, 10), task_store(0.0, 11))
    assert row[TWIN.word] == decision.SHOWN
