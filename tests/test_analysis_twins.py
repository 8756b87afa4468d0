"""The twin readings on synthetic stores: trained beside twin, paired over the claim's unit."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import N_STORIES, combined_dataset, task_store

from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.twins import contract
from entropy_lens.analysis.twins.separability import NO_CORRECTNESS
from entropy_lens.analysis.twins.table import twin_table
from entropy_lens.core.frames import NULL_CONTRACT
from entropy_lens.store import schema

FAST = KnnSettings(k=7, n_splits=5, n_repeats=2)


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for key, value in where.items():
        mask &= table[key] == value
    (index,) = np.flatnonzero(mask)
    return table.iloc[index]


def test_a_trained_effect_its_twin_lacks_is_beyond_the_twin():
    trained, twin = task_store(2.0, 0, jaccard=0.9), task_store(0.0, 1, jaccard=0.3)
    table = twin_table({"tasks": trained}, {"tasks": twin}, twin_seed=5, settings=FAST, n_boot=300)
    assert list(table.columns) == list(contract.COLUMNS) and set(NULL_CONTRACT) <= set(table.columns)
    task = _row(table, reading=contract.SEPARABILITY, target="task")
    assert task["estimate"] > 0.9 and abs(task["null_estimate"] - 0.5) < 0.15
    assert task["beyond_low"] > 0.25 and task["null_name"] == contract.twin_name(5)
    assert task["n_sources"] == N_STORIES and task["n"] == 120
    assert task["beyond"] == pytest.approx(task["estimate"] - task["null_estimate"])
    contained = _row(table, reading=contract.OVERLAP, statistic="containment")
    expected = (1.8 / 1.9, 0.6 / 1.3)
    assert (contained["estimate"], contained["null_estimate"]) == pytest.approx(expected, abs=1e-6)
    assert contained["beyond"] == pytest.approx(expected[0] - expected[1], abs=1e-6)
    assert contained["n_sources"] == N_STORIES and contained["beyond_low"] == pytest.approx(contained["beyond"])
    jaccard = _row(table, reading=contract.OVERLAP, statistic="jaccard")
    assert jaccard["beyond"] == pytest.approx(0.6, abs=1e-6)
    changes = _row(
        table, reading=contract.OVERLAP, statistic="containment_size_changes"
    )  # every nucleus holds 5 tokens
    assert np.isnan(changes["beyond"]) and changes["note"].startswith("no valid cell")


def test_a_twin_with_the_same_structure_is_not_beyond_it():
    trained, twin = task_store(0.4, 0, equal_nuclei=False), task_store(0.4, 1, equal_nuclei=False)
    table = twin_table({"tasks": trained}, {"tasks": twin}, twin_seed=0, settings=FAST, n_boot=300)
    task = _row(table, reading=contract.SEPARABILITY, target="task")
    assert 0.6 < task["null_estimate"] < 0.95 and task["beyond_low"] < 0 < task["beyond_high"]
    spearman = _row(table, reading=contract.SPEARMAN)
    assert spearman["estimate"] > 0.5 and spearman["null_estimate"] > 0.5
    assert spearman["beyond_low"] < 0 < spearman["beyond_high"] and spearman["n_sources"] == N_STORIES


def test_identical_sides_differ_by_zero_on_every_reading():
    trained = task_store(1.0, 0, equal_nuclei=False)
    table = twin_table({"tasks": trained}, {"tasks": trained}, twin_seed=0, settings=FAST, n_boot=200)
    scored = table[table["beyond"].notna()]
    assert set(scored["reading"]) == {contract.SEPARABILITY, contract.SPEARMAN, contract.OVERLAP, contract.SHAPE}
    assert np.allclose(scored["beyond"], 0) and np.allclose(scored["beyond_low"], 0)
    assert np.allclose(scored["beyond_high"], 0)
    assert np.allclose(scored["estimate"], scored["null_estimate"])


def test_the_twin_is_paired_by_prompt_id_not_by_position():
    trained, twin = task_store(2.0, 0, jaccard=0.9), task_store(0.0, 1, jaccard=0.3)
    shuffled = twin.isel({schema.PROMPT: np.random.default_rng(3).permutation(twin.sizes[schema.PROMPT])})
    a = twin_table({"tasks": trained}, {"tasks": twin}, twin_seed=0, settings=FAST, n_boot=200)
    b = twin_table({"tasks": trained}, {"tasks": shuffled}, twin_seed=0, settings=FAST, n_boot=200)
    numbers = ["estimate", "null_estimate", "beyond", "beyond_low", "beyond_high"]
    np.testing.assert_allclose(a[numbers].to_numpy(float), b[numbers].to_numpy(float))


def test_mmlu_correctness_has_no_twin_reading_and_says_so():
    trained = task_store(1.0, 0)
    table = twin_table({"tasks": trained}, {"tasks": trained}, twin_seed=0, mmlu=True, settings=FAST, n_boot=200)
    row = _row(table, target="mmlu_correct")
    assert row["note"] == NO_CORRECTNESS and np.isnan(row["beyond"])


def _blank(shift: float, seed: int) -> object:
    """Three families on the blank set: a (two sizes), b, c; ``shift`` sets the families apart."""
    rng = np.random.default_rng(seed)
    layers = {"a-small": 4, "a-large": 8, "b": 6, "c": 5}
    families = {"a-small": "a", "a-large": "a", "b": "b", "c": "c"}
    level = {"a": 0.0, "b": 1.0, "c": 2.0}
    profiles = {}
    for model, n in layers.items():
        depth = schema.depth_of(np.arange(n), n)
        base = 3.0 + shift * (level[families[model]] + np.sin(3 * depth * (1 + level[families[model]])))
        profiles[model] = base[None, None, :] + 0.05 * rng.normal(size=(16, 3, n))
    return combined_dataset(profiles, families=families, vocab_sizes=dict.fromkeys(layers, 1000))


def test_family_rows_on_the_twins_blank_store():
    settings = KnnSettings(k=5, n_splits=4, n_repeats=2)
    trained, twin = _blank(1.0, 0), _blank(0.0, 1)
    table = twin_table({"blank": trained}, {"blank": twin}, twin_seed=0, settings=settings, n_boot=200, grid_points=8)
    family = _row(table, reading=contract.SEPARABILITY, target="family")
    assert family["model"] == "all" and family["n"] == 64 and family["n_sources"] == 16
    assert family["estimate"] > 0.95 and family["beyond_low"] > 0.1
    gap = _row(table, reading=contract.FAMILY_PAIR, statistic="family_gap", scale="nats")
    assert gap["model"] == "a-small, a-large" and gap["target"] == "a"
    assert gap["estimate"] > 0 and gap["beyond_low"] > 0
    shapes = table[table["reading"] == contract.SHAPE]
    assert set(shapes["model"]) == {"a-small", "a-large", "b", "c"} and (shapes["n_sources"] == 16).all()
