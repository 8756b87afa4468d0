"""The paper comparison: every claim with our interval, the study's figure and a verdict."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from entropy_lens.analysis import paper as P
from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.pairs import FAMILY_GAP, RESOLUTION_GAP
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.core.tables import to_markdown, write_table


def _csv(rows: list[dict]) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(pd.DataFrame(rows).to_csv(index=False)))  # as the rule reads it


def _knn_row(target, model, protocol, mean, low, high, *, measure="shannon", split="", k=29, groups=20, note=""):
    return {
        "dataset": P.KNN_DATASETS[target],
        "target": target,
        "split": split,
        "model": model,
        "protocol": protocol,
        "metric": "entropy" if measure == "shannon" else "renyi",
        "measure": measure,
        "n_samples": 120,
        "n_groups": groups,
        "k": k,
        "auc_mean": mean,
        "auc_low": low,
        "auc_high": high,
        "dummy_mean": 0.5,
        "dummy_low": 0.42,
        "dummy_high": 0.58,
        "note": note,
    }


def _knn() -> pd.DataFrame:
    rows = [
        _knn_row("task", "smollm2-135m", "grouped", 0.9, 0.85, 0.95),
        _knn_row("task", "smollm2-135m", "study", 0.93, 0.9, 0.96),
        _knn_row("task", "smollm2-135m", "grouped", 0.88, 0.8, 0.96, measure="renyi(a=5)"),
        _knn_row("task", "meta-llama/Llama-3.2-1B", "grouped", 0.9, 0.85, 0.95),
        _knn_row("format", "smollm2-135m", "grouped", 0.52, 0.45, 0.54),
        _knn_row("format", "gemma-2-2b-it", "grouped", 0.7, 0.5, 0.9, k=12),
        _knn_row("mmlu_correct", "smollm2-135m", "grouped", 0.6, 0.5, 0.7, split="base"),
        _knn_row("family", "all", "grouped", 0.99, 0.97, 1.0),
    ]
    return _csv(rows)


def _accuracy(top_share: float = 1.0) -> pd.DataFrame:
    return _csv(
        [
            {
                "model": "smollm2-135m",
                "style": "base",
                "measure": m,
                "n": 40,
                "n_unparsed": 0,
                "accuracy": 0.3,
                "ci_low": 0.18,
                "ci_high": 0.45,
                "chance": 0.25,
                "majority_letter": "C",
                "majority_baseline": 0.3,
                "answered_A": top_share,
                "answered_B": 1 - top_share,
                "answered_C": 0.0,
                "answered_D": 0.0,
                "top_letter": "A",
                "top_share": top_share,
            }
            for m in ("ll", "calibrated", "parsed")
        ]
    )


def _expected(**extra) -> P.Expected:
    return P.Expected(
        datasets={"tasks": ["smollm2-135m"], "formats": ["smollm2-135m", "gemma-2-2b-it"], "blank": ["a", "b"]},
        layer_skip=["smollm2-135m"],
        families={"smollm2-135m": "llama", "gemma-2-2b-it": "gemma", "meta-llama/Llama-3.2-1B": "llama"},
        **extra,
    )


def test_study_model_matching():
    assert P.study_model_for("meta-llama/Llama-3.2-1B-Instruct") == "Llama-3.2-1B"
    assert P.study_model_for("gemma-2-2b-it") == "Gemma-2-2B"
    assert P.study_model_for("gemma-2-27b") is None
    assert P.study_model_for("llama-3.2-10b") is None
    assert P.study_model_for("smollm2-135m") is None


def test_separability_rows_carry_interval_study_protocol_and_verdict():
    table = P.paper_table(knn=_knn(), expected=_expected())
    assert list(table.columns) == list(P.COLUMNS)
    task = table[(table["claim"] == P.TASK) & (table["measure"] == "shannon")].set_index("model")
    row = task.loc["smollm2-135m"]
    assert row["verdict"] == V.REPRODUCED and row["estimate"] == 0.9 and row["ci_low"] == 0.85
    assert row["study_protocol"] == 0.93 and row["baseline_high"] == 0.58 and row["n_sources"] == 20
    assert row["study"] == "94.77–98.38"  # not a study model: the study's range
    assert task.loc["meta-llama/Llama-3.2-1B", "study"] == "94.94"
    fmt = table[table["claim"] == P.FORMAT].set_index("model")
    assert fmt.loc["smollm2-135m", "verdict"] == V.NOT_REPRODUCED
    assert fmt.loc["gemma-2-2b-it", "verdict"] == V.INCONCLUSIVE and "k=29" in fmt.loc["gemma-2-2b-it", "why"]
    assert fmt.loc["gemma-2-2b-it", "study"] == "98.7 ± 1.1"
    assert table.loc[table["claim"] == P.FAMILY, "verdict"].item() == V.REPRODUCED
    renyi = table[table["claim"] == P.RENYI].iloc[0]
    assert renyi["verdict"] == V.REPRODUCED and renyi["measure"] == "renyi(a=5)"


def test_mmlu_correctness_is_inconclusive_under_letter_bias():
    table = P.paper_table(knn=_knn(), accuracy=_accuracy(top_share=1.0), expected=_expected())
    row = table[table["claim"] == P.MMLU_CORRECT].iloc[0]
    assert row["verdict"] == V.INCONCLUSIVE and "letter bias: 'A' answered for 100%" in row["why"]
    acc = table[(table["claim"] == P.ACCURACY) & (table["measure"] == "calibrated")].iloc[0]
    assert acc["verdict"] == V.INCONCLUSIVE and acc["baseline"] == 0.3  # the majority letter beats chance
    assert "gold C 30%" in acc["note"]


def test_every_absent_claim_gets_a_reason():
    table = P.paper_table(knn=_knn(), expected=_expected())
    absent = table[table["why"].str.startswith("not run")]
    reasons = {(c, m): w for c, m, w in zip(absent["claim"], absent["model"], absent["why"], strict=True)}
    assert "not profiled on 'tasks'" in reasons[(P.TASK, "gemma-2-2b-it")]
    assert "dataset 'mmlu' is disabled" in reasons[(P.MMLU_CORRECT, "gemma-2-2b-it")]
    assert "not in layer_skip.models" in reasons[(P.SKIP_RANDOM, "gemma-2-2b-it")]
    assert (absent["verdict"] == V.INCONCLUSIVE).all()
    one_model = P.paper_table(knn=_knn().iloc[:0], expected=P.Expected(datasets={"blank": ["a"]}))
    family = one_model[one_model["claim"] == P.FAMILY].iloc[0]
    assert "needs >= 2 models on 'blank', got 1" in family["why"]


def test_spearman_and_layer_skip_rows():
    expansion = _csv(
        [
            {
                "model": "m",
                "family": "llama",
                "n_layers": 4,
                "n": 1000,
                "n_prompts": 40,
                "spearman": 0.8,
                "ci_low": 0.7,
                "ci_high": 0.86,
                "p_value": 0.0,
                "dataset": "tasks",
            }
        ]
    )
    skip = _csv(
        [
            {
                "model": "m",
                "measure": "calibrated",
                "k": 1,
                "versus": v,
                "n": 60,
                "difference": d,
                "ci_low": lo,
                "ci_high": hi,
                "intact": 0.6,
                "intact_low": 0.47,
                "intact_high": 0.71,
                "chance": 0.25,
            }
            for v, d, lo, hi in (("random", -0.3, -0.4, -0.2), ("pruning", 0.0, -0.03, 0.03))
        ]
    )
    table = P.paper_table(expansion=expansion, layer_skip=skip, expected=P.Expected(families={"m": "llama"}))
    rho = table[table["claim"] == P.SPEARMAN].iloc[0]
    assert rho["verdict"] == V.REPRODUCED and rho["split"] == "tasks" and rho["n_sources"] == 40
    rows = table.set_index("claim")
    assert rows.loc[P.SKIP_RANDOM, "verdict"] == V.REPRODUCED
    assert rows.loc[P.SKIP_PRUNING, "verdict"] == V.NOT_REPRODUCED
    assert rows.loc[P.SKIP_RANDOM, "study"].startswith("Llama collapses")


def test_headline_keeps_the_verdict_measure_and_shannon():
    table = P.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), expected=_expected())
    top = P.headline(table)
    assert set(top.loc[top["claim"] == P.ACCURACY, "measure"]) == {"calibrated"}
    assert "renyi(a=5)" not in set(top.loc[top["claim"] == P.TASK, "measure"])
    assert (top["verdict"] != "").all()
    findings = top[top["role"] == P.FINDING]
    measured = findings[~findings["why"].str.startswith("not run")]
    order = [P.CLAIM_ORDER.index(c) for c in measured["claim"]]
    assert order == sorted(order)
    not_run = findings["why"].str.startswith("not run").tolist()
    assert not_run == sorted(not_run)  # findings not run come after those measured
    roles = top["role"].tolist()
    assert roles == sorted(roles, key=[P.FINDING, P.PRECONDITION].index)  # preconditions last of all
    assert set(top.loc[top["role"] == P.PRECONDITION, "claim"]) == {P.ACCURACY}
    assert "not run by this configuration (listed last)" in P.verdicts_html(top)


def test_display_and_html_show_intervals_in_the_units_people_read():
    table = P.paper_table(knn=_knn(), expected=_expected())
    view = P.display(P.headline(table))
    first = view.iloc[0]
    assert first["ours (95% CI)"] == "90.0 [85.0, 95.0] AUC %" and first["study protocol"].startswith("93.0 [90.0")
    html = P.verdicts_html(P.headline(table))
    assert html.count('<span class="verdict"') == len(P.headline(table))
    assert "reproduced</span>" in html and "<table" in html


def test_paper_table_from_files_stacks_per_dataset_tables(tmp_path):
    paths = []
    for dataset in ("tasks", "blank"):
        path = tmp_path / f"expansion_{dataset}.csv"
        pd.DataFrame(
            [
                {
                    "model": "m",
                    "family": "f",
                    "n_layers": 3,
                    "n": 10,
                    "n_prompts": 8,
                    "spearman": 0.9,
                    "ci_low": 0.8,
                    "ci_high": 0.95,
                    "p_value": 0.0,
                    "dataset": dataset,
                }
            ]
        ).to_csv(path, index=False)
        paths.append(str(path))
    table = P.paper_table_from_files({"expansion": paths}, P.Expected())
    assert list(table["split"]) == ["tasks", "blank"]
    try:
        P.paper_table_from_files({"bogus": paths}, P.Expected())
    except ValueError as err:
        assert "unknown paper-table inputs ['bogus']" in str(err)
    else:
        raise AssertionError("an unknown input must be refused")


def test_to_markdown_renders_escapes_and_blanks_nan(tmp_path):
    df = pd.DataFrame({"claim": ["a|b", "c"], "value": [0.123456, np.nan]})
    text = to_markdown(df)
    lines = text.splitlines()
    assert lines[0] == "| claim | value |" and lines[1] == "|---|---|"
    assert lines[2] == "| a\\|b | 0.1235 |"
    assert lines[3] == "| c |  |"
    assert text.endswith("\n")
    write_table(df, tmp_path / "t.csv", tmp_path / "t.md", title="T")
    assert (tmp_path / "t.md").read_text().startswith("# T\n\n| claim |")
    assert pd.read_csv(tmp_path / "t.csv").shape == (2, 2)


def _overlap() -> pd.DataFrame:
    row = {"model": "smollm2-135m", "family": "llama", "n_layers": 30, "n": 5000, "n_prompts": 40, "std": 0.2}
    return _csv(
        [
            {**row, "mean": 0.68, "ci_low": 0.65, "ci_high": 0.71, "dataset": "blank"},
            {**row, "mean": 0.52, "ci_low": 0.45, "ci_high": 0.6, "dataset": "tasks"},
        ]
    )


def test_adjacent_layer_overlap_rows_get_a_verdict_and_reach_the_headline():
    table = P.paper_table(overlap=_overlap(), expected=_expected())
    rows = table[table["claim"] == P.OVERLAP].set_index("split")
    assert rows.loc["blank", "verdict"] == V.REPRODUCED and "lies above 0.5" in rows.loc["blank", "why"]
    assert rows.loc["tasks", "verdict"] == V.INCONCLUSIVE and rows.loc["tasks", "n_sources"] == 40
    assert "descriptive" not in " ".join(table["why"])
    assert set(P.headline(table).query("claim == @P.OVERLAP")["split"]) == {"blank", "tasks"}


def _shapes() -> pd.DataFrame:
    base = {"n_layers": 30, "n_prompts": 20, "n_sources": 20, "third_layers": 10, "start": 1.0, "final": 1.5}
    llama_like = {"rise": 2.0, "rise_low": 1.5, "rise_high": 2.5, "refine": 1.5, "refine_low": 1.0}
    llama_like |= {"refine_high": 2.0, "drift": 0.05, "drift_low": 0.01, "drift_high": 0.1}
    return _csv(
        [
            {"model": "smollm2-135m", "family": "llama", **base, **llama_like, "dataset": "blank"},
            {"model": "smollm2-135m", "family": "llama", **base, **llama_like, "n_sources": 3, "dataset": "tasks"},
            {"model": "qwen2.5-coder-0.5b", "family": "qwen", **base, **llama_like, "dataset": "blank"},
        ]
    )


def test_family_shape_rows_where_the_run_has_the_family_and_not_run_where_it_has_none():
    families = {"smollm2-135m": "llama", "qwen2.5-coder-0.5b": "qwen"}
    expected = P.Expected(datasets={"blank": list(families), "tasks": ["smollm2-135m"]}, families=families)
    table = P.paper_table(shapes=_shapes(), expected=expected)
    llama = table[table["claim"] == P.SHAPE_LLAMA].set_index("split")
    assert llama.loc["blank", "verdict"] == V.REPRODUCED and llama.loc["blank", "model"] == "smollm2-135m"
    assert "plateaus" in llama.loc["blank", "why"] and "drift 0.050 [0.010, 0.100]" in llama.loc["blank", "note"]
    assert llama.loc["tasks", "verdict"] == V.INCONCLUSIVE and "only 3 independent sources" in llama.loc["tasks", "why"]
    gpt = table[table["claim"] == P.SHAPE_GPT]
    assert len(gpt) == 1 and gpt["why"].item() == "not run: no model of family gpt or gpt2 in this configuration"
    assert "qwen2.5-coder-0.5b" not in set(table.loc[table["claim"].isin([P.SHAPE_GPT, P.SHAPE_LLAMA]), "model"])
    # A GPT-2 model (config family gpt2) is judged by the GPT claim; one profiled nowhere says so.
    gpt2 = {"gpt2-small": "gpt2", "gpt2-xl": "GPT2"}
    shapes = _shapes().assign(model="gpt2-small", family="gpt2").iloc[:1]
    table = P.paper_table(shapes=shapes, expected=P.Expected(datasets={"blank": ["gpt2-small"]}, families=gpt2))
    rows = table[table["claim"] == P.SHAPE_GPT].set_index("model")
    assert rows.loc["gpt2-small", "verdict"] == V.NOT_REPRODUCED  # it starts low: rise > 0 fails "starts high"
    assert rows.loc["gpt2-xl", "why"] == "not run: gpt2-xl is profiled on no dataset"
    assert table.loc[table["claim"] == P.SHAPE_LLAMA, "why"].str.contains("no model of family llama").all()


def test_mmlu_accuracy_is_a_precondition_counted_apart():
    table = P.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), overlap=_overlap(), expected=_expected())
    assert set(table.loc[table["role"] == P.PRECONDITION, "claim"]) == {P.ACCURACY}
    assert set(table.loc[table["claim"] != P.ACCURACY, "role"]) == {P.FINDING}
    top = P.headline(table)
    findings, preconditions = P.summary(top)
    assert findings.startswith("Claims of the study: 5 reproduced, 1 not reproduced, 3 inconclusive; 25 not run")
    assert preconditions.startswith("Preconditions: 0 met, 0 not met, 1 undecided (not findings of the study")
    n_findings = int((top["role"] == P.FINDING).sum())
    counted = sum(int(part.split()[0]) for part in findings.split(": ", 1)[1].rstrip(".").replace(";", ",").split(", "))
    assert counted == n_findings  # every finding is counted once, no precondition among them
    text = P.verdicts_markdown(top, "Verdicts")
    body, section = text.split(f"## {P.PRECONDITION_HEADING}")
    assert text.startswith("# Verdicts\n\n**Claims of the study:") and "| claim | model |" in body
    assert P.ACCURACY not in body and f"{P.ACCURACY} (precondition)" in section
    html = P.verdicts_html(top)
    assert html.index("Preconditions: 0 met") < html.index(P.PRECONDITION_HEADING.replace("?", ""))
    assert html.count("<table") == 2


def _pairs(gap: tuple[float, float, float] = (0.4, 0.3, 0.5), n_other: int = 2) -> pd.DataFrame:
    return _csv(
        [
            {
                "statistic": statistic,
                "family": "qwen",
                "small": "q-0.5b",
                "large": "q-1.5b",
                "n_models": 2 + n_other,
                "n_other": n_other,
                "n_samples": 40,
                "same": 0.2,
                "nearest": "s-135m" if n_other else "",
                "nearest_value": 0.6 if n_other else float("nan"),
                "gap": gap[0] if n_other else float("nan"),
                "gap_low": gap[1] if n_other else float("nan"),
                "gap_high": gap[2] if n_other else float("nan"),
            }
            for statistic in (FAMILY_GAP, RESOLUTION_GAP)
        ]
    )


def _family_expected(families: dict[str, str]) -> P.Expected:
    return P.Expected(datasets={"blank": list(families)}, families=families)


PAIR_FAMILIES = {"q-0.5b": "qwen", "q-1.5b": "qwen", "s-135m": "llama", "g-270m": "gemma"}


def test_same_family_pairs_get_verdicts_and_reach_the_headline():
    table = P.paper_table(family_pairs=_pairs(), expected=_family_expected(PAIR_FAMILIES))
    rows = table[table["claim"].isin([P.CLUSTERING, P.SIZE_RESOLUTION])].set_index("claim")
    assert set(rows["verdict"]) == {V.REPRODUCED} and set(rows["model"]) == {"q-0.5b, q-1.5b"}
    assert "lies above 0" in rows.loc[P.CLUSTERING, "why"] and "(s-135m)" in rows.loc[P.CLUSTERING, "why"]
    assert rows.loc[P.CLUSTERING, "note"].startswith("d(q-0.5b, q-1.5b) = 0.200 nats; nearest other family: s-135m")
    assert rows.loc[P.SIZE_RESOLUTION, "n_sources"] == 40 and rows.loc[P.SIZE_RESOLUTION, "ci_low"] == 0.3
    markdown = P.verdicts_markdown(P.headline(table), "Verdicts")
    assert P.CLUSTERING in markdown and P.SIZE_RESOLUTION in markdown and "0.400 [0.300, 0.500] nats" in markdown
    below = P.paper_table(family_pairs=_pairs((-0.3, -0.4, -0.2)), expected=_family_expected(PAIR_FAMILIES))
    assert set(below.loc[below["claim"] == P.SIZE_RESOLUTION, "verdict"]) == {V.NOT_REPRODUCED}
    wide = P.paper_table(family_pairs=_pairs((0.05, -0.1, 0.2)), expected=_family_expected(PAIR_FAMILIES))
    why = wide.loc[wide["claim"] == P.CLUSTERING, "why"].item()
    assert "with 40 blank samples per model: about 360 would decide it" in why, why


def test_same_family_pair_claims_without_a_pair_say_why_more_prompts_would_not_help():
    def reasons(families, pairs=None, clustering=True):
        frame = pd.DataFrame([{"grouping": "family", "ari_models": 1.0, "silhouette_samples": 0.5}])
        table = P.paper_table(
            clustering=frame if clustering else None, family_pairs=pairs, expected=_family_expected(families)
        )
        rows = table[table["claim"].isin([P.CLUSTERING, P.SIZE_RESOLUTION])]
        assert len(rows) == 2 and (rows["verdict"] == V.INCONCLUSIVE).all()
        return set(rows["why"])

    assert reasons({"a": "x", "b": "y"}) == {
        "not run: one model per family: family and model identity coincide, so size cannot be told apart "
        "(make families)"
    }
    assert reasons({"a": "x", "b": "x"}) == {"not run: only family x on 'blank': no other family to compare with"}
    assert reasons({"a": "x", "b": "x", "c": "y"}) == {
        "not run: no two models of one family with different layer counts on 'blank'"
    }
    alone = reasons({"q-0.5b": "qwen", "q-1.5b": "qwen"}, pairs=_pairs(n_other=0))
    assert alone == {"not run: only family qwen on 'blank': no other family to compare with"}
    assert reasons({"a": "x"}, clustering=False) == {"not run: needs >= 2 models on 'blank', got 1"}


def test_family_pairs_and_pooled_accuracy_from_files(tmp_path):
    path = tmp_path / "family_pairs.csv"
    _pairs(n_other=0).to_csv(path, index=False)
    table = P.paper_table_from_files({"family_pairs": str(path)}, _family_expected(PAIR_FAMILIES))
    assert table.loc[table["claim"] == P.CLUSTERING, "why"].str.startswith("not run: only family qwen").all()
    styles = _accuracy(top_share=0.4)
    pooled = styles.assign(style=ALL_STYLES, n=80)  # 40 questions in two styles: the pooled n counts prompts
    acc = P.paper_table(accuracy=pd.concat([styles, pooled]), expected=_expected())
    why = acc.loc[(acc["claim"] == P.ACCURACY) & (acc["split"] == ALL_STYLES), "why"]
    assert why.str.contains("with 40 questions: about").all(), why.tolist()


def test_renyi_row_names_the_rows_that_keep_it_from_reproduced():
    rows = _knn().to_dict("records")
    rows.append(_knn_row("family", "all", "grouped", 0.6, 0.52, 0.68, measure="renyi(a=0.5)"))
    table = P.paper_table(knn=_csv(rows), expected=_expected())
    renyi = table[table["claim"] == P.RENYI].iloc[0]
    assert renyi["verdict"] == V.INCONCLUSIVE
    assert "renyi(a=0.5), family separability" in renyi["why"] and "would decide it" in renyi["why"]
    assert "renyi(a=5)" not in renyi["why"]  # reproduced where Shannon did: not named
