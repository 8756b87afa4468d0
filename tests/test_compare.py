"""`entropy-lens compare A B`: two runs' stores, tables and lenses, statistic by statistic, each within its
tolerance; nothing compared is refused, never called agreement."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import torch
from tiny import tiny_model

from entropy_lens import cli, extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store import storage
from entropy_lens.store.compare import NothingToCompareError, Tolerances, compare_results, parse_tolerance
from entropy_lens.store.tensors import save_tensors


@pytest.fixture(scope="module")
def profiles():
    return extract_profiles(tiny_model("llama"), ["the cat", "a dog ran"], generation=GenerationSettings(3))


def _results(root, profiles, auc=(0.9, 0.8), timing=1.0):
    """A run's working directory: a store, a CSV and a Parquet table, a timing table and a lens file."""
    results = root / "results"
    storage.write_profiles(profiles, results / "profiles" / "tiny" / "blank.zarr", layout=storage.Layout(1, 2))
    (results / "tables").mkdir(parents=True)
    pd.DataFrame({"model": ["a", "b"], "auc": list(auc)}).to_csv(results / "tables" / "knn_auc.csv", index=False)
    pd.DataFrame({"prompt_text": ["x", "y"]}).to_parquet(results / "tables" / "prompts.parquet")
    pd.DataFrame({"rule": ["extract"], "s": [timing]}).to_csv(results / "tables" / "run_timings.csv", index=False)
    (results / "lenses" / "tiny").mkdir(parents=True)
    save_tensors({"weight": torch.eye(2)}, results / "lenses" / "tiny" / "linear.safetensors", {"kind": "linear"})
    return root


@pytest.fixture
def two_runs(profiles, tmp_path):
    return _results(tmp_path / "a", profiles), _results(tmp_path / "b", profiles, timing=2.0)


def test_the_same_results_agree_and_say_what_was_compared(two_runs, capsys):
    a, b = two_runs
    assert cli.main(["compare", str(a), str(b / "results")]) == 0  # a working directory or its results folder
    out = capsys.readouterr().out.strip()
    assert out.startswith("1 stores, 2 tables and 1 tensor files compared (")
    assert out.endswith("statistics, tolerance exact): no difference")  # run_timings differs and is left out


@pytest.mark.parametrize("content", ["empty", "a folder of inputs"])
def test_comparing_nothing_is_refused_in_one_line(tmp_path, capsys, content):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        if content != "empty":
            (tmp_path / side / "notes.txt").write_text("not a result\n")
    with pytest.raises(NothingToCompareError, match="nothing to compare: neither"):
        compare_results(tmp_path / "a", tmp_path / "b")
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "\n" not in captured.err.strip() and "nothing to compare" in captured.err


def test_a_number_beyond_its_tolerance_is_named_with_the_tolerance(profiles, tmp_path, capsys):
    a, b = _results(tmp_path / "a", profiles), _results(tmp_path / "b", profiles, auc=(0.9, 0.8001))
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    line = "tables/knn_auc.csv: column 'auc': 1 of 2 rows differ (rows 1), numbers by up to 0.0001 (tolerance exact)"
    assert line in out and out.rstrip().endswith(": 1 differences")
    assert cli.main(["compare", str(a), str(b), "--tolerance", "auc=1e-3"]) == 0
    assert "tolerance exact (auc 0.001)" in capsys.readouterr().out
    assert cli.main(["compare", str(a), str(b), "--rtol", "1e-5"]) == 1  # 1.25e-4 relative: beyond 1e-5
    assert cli.main(["compare", str(a), str(b), "--rtol", "1e-3"]) == 0


def test_a_store_variable_a_label_and_an_attr_are_each_named(profiles, tmp_path):
    a = _results(tmp_path / "a", profiles)
    changed = profiles.copy(deep=True)
    changed["entropy"] = changed.entropy + 1e-3
    changed = changed.assign_coords(prompt_text=("prompt", ["the cat", "a dog sat"]))
    changed.attrs["threads"] = 7
    b = _results(tmp_path / "b", changed)
    found = compare_results(a, b).differences
    assert any(
        line.startswith("profiles/tiny/blank.zarr: variable 'entropy': ") and "by up to 0.001" in line for line in found
    )
    assert "profiles/tiny/blank.zarr: coordinate 'prompt_text': 1 of 2 values differ" in found
    assert any(line.startswith("profiles/tiny/blank.zarr: attr 'threads': ") for line in found)
    assert len(found) == 3
    assert compare_results(a, b, Tolerances(0.0, {"entropy": 1e-2})).differences != found  # entropy now within


def test_a_file_in_one_run_only_and_a_changed_lens_are_named(profiles, tmp_path):
    a, b = _results(tmp_path / "a", profiles), _results(tmp_path / "b", profiles)
    (a / "results" / "tables" / "prompts.parquet").unlink()
    lens = b / "results" / "lenses" / "tiny" / "linear.safetensors"
    save_tensors({"weight": 2 * torch.eye(2)}, lens, {"kind": "linear"})
    found = compare_results(a, b).differences
    assert found == (
        f"tables/prompts.parquet: only in {b / 'results'}",
        "lenses/tiny/linear.safetensors: tensor 'weight': 2 of 4 values differ, by up to 1 (tolerance exact)",
    )


def test_one_run_empty_is_every_file_missing_not_agreement(profiles, tmp_path):
    a = _results(tmp_path / "a", profiles)
    (tmp_path / "b" / "results").mkdir(parents=True)
    comparison = compare_results(a, tmp_path / "b")
    assert not comparison.same and all(line.endswith(f"only in {a / 'results'}") for line in comparison.differences)
    shutil.rmtree(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="no folder at"):
        compare_results(a, tmp_path / "b")


@pytest.mark.parametrize("text", ["auc", "auc=", "auc=-1", "=1e-3", "auc=abc"])
def test_a_malformed_tolerance_is_named(text):
    with pytest.raises(ValueError, match="is not NAME=RTOL"):
        parse_tolerance(text)
    assert parse_tolerance("entropy=1e-3") == ("entropy", 1e-3)
