"""The paper comparison table and the Markdown renderer."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis import paper as P
from entropy_lens.analysis import to_markdown


def _knn() -> pd.DataFrame:
    base = {"dataset": "tasks", "split": "", "auc_std": 0.01, "dummy_mean": 0.5, "dummy_std": 0.05}
    rows = [
        {
            **base,
            "target": "task",
            "model": "meta-llama/Llama-3.2-1B",
            "metric": "entropy",
            "measure": "shannon",
            "auc_mean": 0.95,
        },
        {
            **base,
            "target": "task",
            "model": "qwen2.5-coder-0.5b",
            "metric": "entropy",
            "measure": "shannon",
            "auc_mean": 0.9,
        },
        {
            **base,
            "target": "format",
            "model": "gemma-2-2b-it",
            "metric": "entropy",
            "measure": "shannon",
            "auc_mean": 0.97,
        },
        {
            **base,
            "target": "format",
            "model": "gemma-2-2b-it",
            "metric": "renyi",
            "measure": "renyi(a=2)",
            "auc_mean": 0.96,
        },
        {
            **base,
            "target": "task_scrambled",
            "model": "qwen2.5-coder-0.5b",
            "metric": "entropy",
            "measure": "shannon",
            "auc_mean": 0.55,
        },
        {
            **base,
            "target": "mmlu_correct",
            "model": "smollm2-135m",
            "metric": "entropy",
            "measure": "shannon",
            "auc_mean": 0.6,
            "split": "base",
        },
    ]
    return pd.read_csv(io.StringIO(pd.DataFrame(rows).to_csv(index=False)))  # as the rule reads it


def test_study_model_matching():
    assert P.study_model_for("meta-llama/Llama-3.2-1B-Instruct") == "Llama-3.2-1B"
    assert P.study_model_for("gemma-2-2b-it") == "Gemma-2-2B"
    assert P.study_model_for("gemma-2-27b") is None
    assert P.study_model_for("llama-3.2-10b") is None
    assert P.study_model_for("smollm2-135m") is None


def test_paper_table_places_study_figures_and_flags_different_models():
    expansion = pd.DataFrame(
        {"model": ["smollm2-135m", "gemma-2-9b"], "family": ["llama", "gemma"], "n": [10, 20], "spearman": [0.7, 0.85]}
    )
    accuracy = pd.DataFrame(
        {"model": ["smollm2-135m"], "family": ["llama"], "style": ["base"], "n": [40], "accuracy": [0.3]}
    )
    clustering = pd.DataFrame(
        {"grouping": ["family", "size"], "ari_models": [1.0, float("nan")], "silhouette_samples": [0.7, 0.1]}
    )
    overlap = pd.DataFrame({"model": ["smollm2-135m"], "mean": [0.4], "q50": [0.38], "n": [99]})
    table = P.paper_table(knn=_knn(), accuracy=accuracy, expansion=expansion, overlap=overlap, clustering=clustering)
    assert list(table.columns) == list(P.COLUMNS)
    task = table[table["claim"].str.startswith("task kNN AUC (intact")].set_index("model")
    assert task.loc["meta-llama/Llama-3.2-1B", "study"] == "94.94"
    assert task.loc["meta-llama/Llama-3.2-1B", "note"] == ""
    assert task.loc["meta-llama/Llama-3.2-1B", "split"] == ""  # not "nan"
    assert task.loc["meta-llama/Llama-3.2-1B", "ours"].startswith("95.00 ± 1.00")
    assert task.loc["qwen2.5-coder-0.5b", "study"] == "94.77–98.38"
    assert "models differ" in task.loc["qwen2.5-coder-0.5b", "note"]
    fmt = table[table["claim"] == "format kNN AUC"].set_index("measure")
    assert fmt.loc["shannon", "study"] == "98.7 ± 1.1" and fmt.loc["renyi(a=2)", "study"] == P.NO_FIGURE
    spear = table[table["claim"].str.startswith("Spearman")].set_index("model")
    assert spear.loc["gemma-2-9b", "study"] == "0.8540" and spear.loc["gemma-2-9b", "study_model"] == "Gemma-2-9B"
    assert "models differ" in spear.loc["smollm2-135m", "note"]
    assert spear.loc["smollm2-135m", "study"] == "0.7365–0.8804"
    mmlu = table[table["claim"] == "MMLU accuracy"].iloc[0]
    assert mmlu["study"].startswith("50.89–60.62") and mmlu["ours"].startswith("30.00")
    mmlu_auc = table[table["claim"] == "MMLU correctness kNN AUC"].iloc[0]
    assert mmlu_auc["study"].startswith("67.23–73.61") and mmlu_auc["split"] == "base"
    scrambled = table[table["claim"].str.contains("scrambled")].iloc[0]
    assert scrambled["study"] == P.NO_FIGURE and scrambled["note"] == "no study figure for this claim"
    family = table[table["claim"].str.startswith("family clustering")].iloc[0]
    assert "family: ARI 1.00" in family["ours"] and family["study"] == P.STUDY_FAMILY_CLAIM
    assert "size: ARI n/a, silhouette 0.10" in family["ours"]


def test_paper_table_without_inputs_is_empty():
    assert P.paper_table().empty


def test_mmlu_accuracy_ignores_unparsed_answers(tmp_path):
    correct = np.array([[1, 0, 1, -1], [1, 1, 1, 1]], dtype=np.int8)
    ds = combined_dataset(
        {"a": np.ones((4, 2, 2)), "b": np.ones((4, 2, 2))},
        prompt_labels={"style": ["base", "base", "explain", "explain"]},
        extra={"correct_parsed": correct},
    )
    ds = lazy(ds, tmp_path)
    acc = P.mmlu_accuracy(ds, variable="correct_parsed").set_index(["model", "style"])
    assert acc.loc[("a", "base"), "accuracy"] == pytest.approx(0.5)
    assert acc.loc[("a", "explain"), "accuracy"] == 1.0 and acc.loc[("a", "explain"), "n_unparsed"] == 1
    assert acc.loc[("b", "explain"), "n"] == 2
    with pytest.raises(ValueError, match="variable 'correct_ll' is not in the store"):
        P.mmlu_accuracy(ds)


def test_to_markdown_renders_escapes_and_blanks_nan():
    df = pd.DataFrame({"claim": ["a|b", "c"], "value": [0.123456, np.nan]})
    text = to_markdown(df)
    lines = text.splitlines()
    assert lines[0] == "| claim | value |" and lines[1] == "|---|---|"
    assert lines[2] == "| a\\|b | 0.1235 |"
    assert lines[3] == "| c |  |"
    assert text.endswith("\n")
