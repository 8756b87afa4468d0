"""The standard frame every analysis hands to the paper table, and the one builder that turns it into rows."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from entropy_lens.analysis.expansion import spearman
from entropy_lens.core.frames import STANDARD_COLUMNS, Reading
from entropy_lens.verdicts import claim, decision, registry, study
from entropy_lens.verdicts import table as paper
from entropy_lens.verdicts.inputs import CONDITIONS, PaperInput
from entropy_lens.verdicts.rows import COLUMNS, RowRule, rows_of
from entropy_lens.verdicts.rules import above_threshold

RULES = Path(__file__).resolve().parents[1] / "rules"

# Each paper-table input -> the columns its analysis writes (its data contract on disk), as its input declares them
# beside the claims that read it.
ANALYSIS_COLUMNS = {name: entry.columns for name, entry in paper.INPUTS.items() if entry.reading is not None}


def _table(columns: tuple[str, ...]) -> pd.DataFrame:
    """One row whose every column holds a distinct number (text columns get its name)."""
    return pd.DataFrame([{c: float(i + 1) for i, c in enumerate(columns)}])


def test_every_paper_input_has_a_reading_of_its_analysis_columns():
    assert set(paper.READINGS) == set(ANALYSIS_COLUMNS) == set(paper.TABLE_INPUTS) - {"clustering"}
    assert all(ANALYSIS_COLUMNS.values()), [name for name, columns in ANALYSIS_COLUMNS.items() if not columns]
    for name, columns in ANALYSIS_COLUMNS.items():
        reading = paper.READINGS[name]
        frame = reading.frame(_table(columns), name)
        assert set(STANDARD_COLUMNS) <= set(frame.columns), name
        assert set(columns) <= set(frame.columns), f"{name} lost its own columns"
        for standard, own in reading.columns().items():
            if own in columns and standard not in reading.fixed and standard not in ("model", "split", "measure"):
                assert frame[standard].iloc[0] == frame[own].iloc[0] == columns.index(own) + 1, (name, standard)


def test_a_reading_names_the_estimate_interval_and_counts():
    table = pd.DataFrame(
        {
            "model": ["a", "b"],
            "rho": [0.5, 0.7],
            "lo": [0.4, 0.6],
            "hi": [0.6, 0.8],
            "pairs": [10, 20],
            "prompts": [3, 4],
        }
    )
    frame = Reading("rho", "lo", "hi", n="pairs", sources="prompts", fixed={"measure": "shannon"}).frame(table)
    assert frame[list(STANDARD_COLUMNS)].to_dict("list") == {
        "model": ["a", "b"],
        "split": ["", ""],
        "measure": ["shannon", "shannon"],
        "estimate": [0.5, 0.7],
        "ci_low": [0.4, 0.6],
        "ci_high": [0.6, 0.8],
        "n": [10, 20],
        "n_sources": [3, 4],
    }
    assert list(frame.columns[: len(table.columns)]) == list(table.columns)


def test_a_missing_split_is_empty_text_and_no_estimate_is_nan():
    table = pd.DataFrame({"model": ["a"], "n": [5], "dataset": [float("nan")]})
    frame = Reading(None, split="dataset").frame(table)
    assert frame["split"].tolist() == [""] and frame["measure"].tolist() == [""]
    assert math.isnan(frame["estimate"].iloc[0]) and math.isnan(frame["ci_low"].iloc[0])


def test_a_table_without_a_column_its_reading_needs_is_refused_by_name():
    table = pd.DataFrame({"model": ["a"], "spearman": [0.5], "ci_low": [0.4], "ci_high": [0.6], "n": [9]})
    with pytest.raises(ValueError, match=r"expansion lacks the column\(s\) \['n_sources'\]"):
        spearman.SPEARMAN_READING.frame(table, "expansion")


def test_rows_of_applies_the_rule_to_every_kept_record():
    frame = Reading("value", n="n", sources="n").frame(
        pd.DataFrame({"model": ["a", "b", "c"], "value": [0.9, 0.1, 0.95], "ci_low": [0.8, 0.0, 0.9]}).assign(
            ci_high=[0.95, 0.2, 0.99], n=[30, 30, 3], measure="shannon"
        )
    )
    rule = RowRule(
        claim=registry.claim("overlap"),
        unit="share",
        judge=lambda est, rec: above_threshold(est, threshold=0.5, n=int(rec["n"]), statistic="share"),
        note=lambda rec: f"model {rec['model']}",
        keep=lambda rec: rec["model"] != "c",
    )
    rows = pd.DataFrame(rows_of(frame, rule), columns=list(COLUMNS))
    assert rows["model"].tolist() == ["a", "b"]
    assert rows["estimate"].tolist() == [0.9, 0.1] and rows["ci_high"].tolist() == [0.95, 0.2]
    assert rows["verdict"].tolist() == [decision.REPRODUCED, decision.NOT_REPRODUCED]
    assert rows["note"].tolist() == ["model a", "model b"] and set(rows["measure"]) == {"shannon"}
    assert rows["n"].tolist() == [30, 30] and rows["role"].tolist() == [claim.FINDING, claim.FINDING]
    assert set(rows["claim_id"]) == {"overlap"} and set(rows["claim"]) == {
        registry.claim("overlap").name
    }  # id, and name
    assert rows_of(None, rule) == []


def _one_row():
    table = pd.DataFrame({"model": ["a"], "value": [0.9], "ci_low": [0.8], "ci_high": [1.0], "n": [4]})
    return Reading("value").frame(table)


def test_a_rule_without_an_estimate_leaves_the_estimate_empty():
    frame = _one_row()
    rule = RowRule(
        claim=registry.claim("shape_gpt"), unit="", judge=lambda est, rec: decision.not_run("none"), has_estimate=False
    )
    (only,) = rows_of(frame, rule)
    assert math.isnan(only["estimate"]) and math.isnan(only["ci_low"]) and only["n"] == 4


def test_a_rule_takes_role_and_study_sentence_from_the_claims_record():
    frame = _one_row()
    judge = lambda est, rec: decision.not_run("none")  # noqa: E731
    (accuracy,) = rows_of(frame, RowRule(claim=registry.claim("accuracy"), unit="", judge=judge))
    assert accuracy["role"] == claim.PRECONDITION == registry.BY_ID["accuracy"].role
    (overlap,) = rows_of(frame, RowRule(claim=registry.claim("overlap"), unit="", judge=judge))
    assert overlap["role"] == claim.FINDING and overlap["study"] == study.STUDY["sentences"]["overlap"] != ""
    (scoped,) = rows_of(
        frame, RowRule(claim=registry.claim("overlap"), unit="", judge=judge, role=claim.EXTENSION, study="own")
    )
    assert (scoped["role"], scoped["study"]) == (claim.EXTENSION, "own")


# What each analysis's rows are judged on: the estimate's column and the unit its interval resamples.
ESTIMATE_AND_UNIT = {
    "knn": ("auc_mean", "n_groups"),
    "renyi": ("difference", "n_groups"),
    "heldout": ("share", "n"),
    "accuracy": ("accuracy", "n"),
    "expansion": ("spearman", "n_sources"),
    "overlap": ("mean", "n_sources"),
    "layer_skip": ("difference", "n"),
    "skip_spearman": ("rho", "n"),
    "shapes": (None, "n_sources"),
    "family_pairs": ("gap", "n_samples"),
    "lens_schedule": ("rho", "n_prompts"),
}


@pytest.mark.parametrize("name", sorted(ESTIMATE_AND_UNIT))
def test_each_reading_takes_the_estimate_and_unit_of_its_analysis(name):
    estimate, unit = ESTIMATE_AND_UNIT[name]
    frame = paper.READINGS[name].frame(_table(ANALYSIS_COLUMNS[name]), name)
    columns = ANALYSIS_COLUMNS[name]
    if estimate is None:
        assert math.isnan(frame["estimate"].iloc[0])
    else:
        assert frame["estimate"].iloc[0] == columns.index(estimate) + 1
    assert frame["n_sources"].iloc[0] == columns.index(unit) + 1


def _made_when() -> set[str]:
    """The conditions ``MADE_WHEN`` of ``rules/common.smk`` maps to the configuration."""
    tree = ast.parse((RULES / "common.smk").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["MADE_WHEN"]:
            return {ast.literal_eval(key) for key in node.value.keys}
    raise AssertionError("rules/common.smk defines no MADE_WHEN")


def _unwritten(tables) -> list[str]:
    """The inputs of ``tables`` (name -> (path, made)) whose path no rule writes, or whose condition the workflow
    does not map."""
    rules = "".join(p.read_text(encoding="utf-8") for p in RULES.glob("*.smk") if p.name != "common.smk")
    made_when = _made_when()
    return [name for name, (path, made) in tables.items() if f'"{path}"' not in rules or made not in made_when]


def test_every_paper_table_input_is_wired_to_a_table_some_rule_writes():
    """The workflow hands the paper table each input at the path its claims declare (verdicts.table.PAPER_TABLES,
    read by rules/common.smk), under a condition the workflow maps, from a table some rule writes."""
    assert set(paper.PAPER_TABLES) == set(paper.INPUTS)
    assert _made_when() == set(CONDITIONS)
    assert _unwritten(paper.PAPER_TABLES) == []
    assert "PAPER_TABLES = {" not in (RULES / "common.smk").read_text(encoding="utf-8")  # one place declares them


def test_a_claim_reading_a_table_no_rule_writes_is_caught():
    """Planted: a claim's input at a path no rule writes (a missing input of the workflow)."""
    astray = {**paper.PAPER_TABLES, "expansion": ("results/tables/expansion_{model}.csv", "always")}
    assert _unwritten(astray) == ["expansion"]


def test_an_input_the_workflow_cannot_make_is_refused():
    with pytest.raises(ValueError, match="input 'x': made must be one of"):
        PaperInput("x", "x", None, from_store="none", path="results/tables/x.csv", made="sometimes")
