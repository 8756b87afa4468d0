"""The paper comparison: every claim with our interval, the study's figure and a verdict in its role's words."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest

from entropy_lens.analysis.families.gaps import ALIGNMENT_GAP, FAMILY_GAP, RESOLUTION_GAP
from entropy_lens.analysis.families.scales import CENTRED, NATS, NORMALIZED
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.core.tables import to_markdown, write_table
from entropy_lens.verdicts import claim_verdicts, decision, outcomes, registry, render, study, units
from entropy_lens.verdicts import table as paper
from entropy_lens.verdicts.absences import absent_rows
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PRECONDITION
from entropy_lens.verdicts.claims.separability import KNN_CLAIMS
from entropy_lens.verdicts.claims.skipping import NO_RANK_CLAIM


def _csv(rows: list[dict]) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(pd.DataFrame(rows).to_csv(index=False)))  # as the rule reads it


def _knn_row(target, model, protocol, mean, low, high, *, measure="shannon", split="", k=29, groups=20, note=""):
    return {
        "dataset": KNN_CLAIMS[target].dataset,
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
        # the paired fold difference over the dummy (its interval as wide as the AUC's here)
        "null_name": "stratified dummy (same folds)",
        "null_estimate": 0.5,
        "null_low": 0.42,
        "null_high": 0.58,
        "beyond": mean - 0.5,
        "beyond_low": low - 0.5,
        "beyond_high": high - 0.5,
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


FAMILIES = {"smollm2-135m": "smollm", "gemma-2-2b-it": "gemma", "meta-llama/Llama-3.2-1B": "llama"}


def _expected(**extra) -> paper.Expected:
    return paper.Expected(
        datasets={"tasks": ["smollm2-135m"], "formats": ["smollm2-135m", "gemma-2-2b-it"], "blank": ["a", "b"]},
        layer_skip=["smollm2-135m"],
        families={**FAMILIES, "a": "x", "b": "y"},
        **extra,
    )


def test_study_model_matching_and_scopes():
    assert study.study_model_for("meta-llama/Llama-3.2-1B-Instruct") == "Llama-3.2-1B"
    assert study.study_model_for("gemma-2-2b-it") == "Gemma-2-2B"
    assert study.study_model_for("gemma-2-27b") is None
    assert study.study_model_for("llama-3.2-10b") is None
    assert study.study_model_for("smollm2-135m") is None
    assert study.skip_scope("gemma2", "gemma", "google/gemma-2-2b-it") == study.GEMMA2_SCOPE
    assert study.skip_scope("gemma-2-9b-it", "gemma") is None  # the sentence names Gemma-2-2B-it only
    assert study.skip_scope("llama-3.2-1b", "Llama") == study.LLAMA_SCOPE
    assert study.skip_scope("smollm2-135m", "smollm") is None
    assert study.shape_scope("llama") == ("llama", FINDING)
    assert study.shape_scope("smollm", "llama") == ("llama", EXTENSION)
    assert study.shape_scope("qwen", "qwen2") is None


def test_separability_rows_carry_interval_study_protocol_and_verdict():
    table = paper.paper_table(knn=_knn(), expected=_expected())
    assert list(table.columns) == list(paper.COLUMNS)
    task = table[(table["claim_id"] == "task") & (table["measure"] == "shannon")].set_index("model")
    row = task.loc["smollm2-135m"]
    assert row["verdict"] == decision.REPRODUCED and row["estimate"] == 0.9 and row["ci_low"] == 0.85
    assert row["study_protocol"] == 0.93 and row["baseline_high"] == 0.58 and row["n_sources"] == 20
    assert row["study"] == "94.77–98.38"  # not a study model: the study's range
    assert task.loc["meta-llama/Llama-3.2-1B", "study"] == "94.94"
    fmt = table[table["claim_id"] == "format"].set_index("model")
    assert fmt.loc["smollm2-135m", "verdict"] == decision.NOT_REPRODUCED
    assert fmt.loc["gemma-2-2b-it", "verdict"] == decision.INCONCLUSIVE and "k=29" in fmt.loc["gemma-2-2b-it", "why"]
    assert fmt.loc["gemma-2-2b-it", "study"] == "98.7 ± 1.1"
    assert np.isnan(fmt.loc["gemma-2-2b-it", "study_protocol"])  # a missing number is NaN, not ""


def test_family_knn_with_one_model_per_family_is_model_identity_an_extension():
    one_each = paper.paper_table(knn=_knn(), expected=_expected())
    row = one_each[one_each["claim_id"] == "model_identity"].iloc[0]
    assert row["model"] == "all" and row["role"] == EXTENSION and row["verdict"] == "holds"
    # the study's claim is not dropped: its row says why it could not be read
    (family,) = one_each[one_each["claim_id"] == "family"].to_dict("records")
    assert family["role"] == FINDING and family["why"].startswith("not run: one model per family")
    pair = paper.Expected(datasets={"blank": ["a", "b", "c"]}, families={"a": "x", "b": "x", "c": "y"})
    shared = paper.paper_table(knn=_knn(), expected=pair)
    row = shared[shared["model"] == "all"].iloc[0]
    assert row["claim_id"] == "family" and row["role"] == FINDING and row["verdict"] == decision.REPRODUCED


def _heldout(share=(1.0, 0.4, 1.0), n_models: int = 4) -> pd.DataFrame:
    """The held-out family's table: a model's own row (its observation) and the claim's row over models."""
    model = {"model": "q-1.5b", "own_majority": True, "family": "qwen", "n_family_models": 2, "n": 20, "n_own": 18}
    model |= {"share": 0.9, "ci_low": 0.7, "ci_high": 0.97, "chance": 1 / 3, "majority_share": 1 / 3}
    over = {"model": "all", "n": n_models, "n_own": round(n_models * share[0]), "share": share[0]}
    over |= {"ci_low": share[1], "ci_high": share[2], "chance": 1 / 3, "majority_share": 1 / 3, "models_to_decide": 4}
    over |= {"predicted": "q-1.5b 18/20; q-0.5b 17/20", "note": "one observation per held-out model"}
    return _csv([model, over])


def test_held_out_family_rows():
    families = {"q-0.5b": "qwen", "q-1.5b": "qwen", "s": "smollm", "g": "gemma"}
    expected = paper.Expected(datasets={"blank": list(families)}, families=families)
    table = paper.paper_table(heldout=_heldout(), expected=expected)
    rows = table[table["claim_id"] == "family_heldout"]
    assert len(rows) == 1  # one claim row over models; a model is one observation, in the note
    row = rows.iloc[0]
    assert row["model"] == "all" and row["n"] == 4 and row["n_sources"] == 4
    assert (
        row["verdict"] == decision.REPRODUCED and row["baseline"] == pytest.approx(1 / 3) and row["unit"] == units.SHARE
    )
    assert "q-1.5b 18/20; q-0.5b 17/20" in row["note"]
    low = paper.paper_table(heldout=_heldout((0.0, 0.0, 0.2), n_models=16), expected=expected)
    assert low.loc[low["claim_id"] == "family_heldout", "verdict"].item() == decision.NOT_REPRODUCED
    pair = paper.paper_table(heldout=_heldout((1.0, 0.158, 1.0), n_models=2), expected=expected)
    why = pair.loc[pair["claim_id"] == "family_heldout", "why"].item()
    assert why.endswith("4 would decide it")  # one same-family pair: two models cannot decide it
    none = paper.paper_table(knn=_knn(), expected=_expected())
    why = none.loc[none["claim_id"] == "family_heldout", "why"].item()
    assert why.startswith("not run: one model per family")


def _renyi(diff=(0.01, -0.02, 0.03), target="task", model="smollm2-135m") -> pd.DataFrame:
    return _csv(
        [
            {
                "dataset": KNN_CLAIMS[target].dataset,
                "target": target,
                "split": "",
                "model": model,
                "measure": "renyi(a=5)",
                "alpha": 5.0,
                "n_samples": 120,
                "n_groups": 20,
                "n_folds": 15,
                "shannon_auc": 0.9,
                "renyi_auc": 0.9 + diff[0],
                "difference": diff[0],
                "ci_low": diff[1],
                "ci_high": diff[2],
                "note": "",
            }
        ]
    )


def test_renyi_is_an_equivalence_on_the_rows_shannon_decided():
    table = paper.paper_table(knn=_knn(), renyi=_renyi(), expected=_expected())
    rows = table[table["claim_id"] == "renyi"]
    summary, per_row = rows[rows["model"] == "all"].iloc[0], rows[rows["model"] != "all"]
    assert summary["verdict"] == decision.REPRODUCED and len(per_row) == 1
    assert (
        per_row.iloc[0]["split"] == f"{registry.claim('task').name}, α = 5"
        and per_row.iloc[0]["unit"] == units.AUC_POINTS
    )
    # the headline keeps the claim's summary alone, also when a per-order row is pooled over models ("all")
    pooled = table.copy()  # a per-order row pooled over models, as family separability's is
    pooled.loc[(pooled["claim_id"] == "renyi") & (pooled["split"] != ""), "model"] = "all"
    top = paper.headline(pooled)
    assert top.loc[top["claim_id"] == "renyi", "split"].tolist() == [""]
    far = paper.paper_table(knn=_knn(), renyi=_renyi((-0.2, -0.25, -0.15)), expected=_expected())
    assert far.loc[(far["claim_id"] == "renyi") & (far["model"] == "all"), "verdict"].item() == decision.NOT_REPRODUCED
    wide = paper.paper_table(knn=_knn(), renyi=_renyi((0.0, -0.08, 0.08)), expected=_expected())
    assert wide.loc[(wide["claim_id"] == "renyi") & (wide["model"] == "all"), "verdict"].item() == decision.INCONCLUSIVE
    # a row Shannon left undecided (gemma's capped k) carries no equivalence row
    undecided = paper.paper_table(
        knn=_knn(), renyi=_renyi(target="format", model="gemma-2-2b-it"), expected=_expected()
    )
    assert undecided.loc[undecided["claim_id"] == "renyi", "model"].tolist() == ["all"]


def test_mmlu_correctness_is_inconclusive_under_letter_bias():
    table = paper.paper_table(knn=_knn(), accuracy=_accuracy(top_share=1.0), expected=_expected())
    row = table[table["claim_id"] == "mmlu_correct"].iloc[0]
    assert row["verdict"] == decision.INCONCLUSIVE and "letter bias: 'A' answered for 100%" in row["why"]
    acc = table[(table["claim_id"] == "accuracy") & (table["measure"] == "calibrated")].iloc[0]
    assert acc["verdict"] == "undecided" and acc["baseline"] == 0.3  # the majority letter beats chance
    assert acc["role"] == PRECONDITION and "gold C 30%" in acc["note"]


def test_every_absent_claim_gets_a_reason():
    table = paper.paper_table(knn=_knn(), expected=_expected())
    absent = table[table["why"].str.startswith("not run")]
    reasons = {(c, m): w for c, m, w in zip(absent["claim_id"], absent["model"], absent["why"], strict=True)}
    assert "not profiled on 'tasks'" in reasons[("task", "gemma-2-2b-it")]
    assert "dataset 'mmlu' is disabled" in reasons[("mmlu_correct", "gemma-2-2b-it")]
    assert "not in layer_skip.models" in reasons[("skip_vs_pruning", "gemma-2-2b-it")]  # the Gemma-2 finding
    gemma = absent[absent["model"] == "gemma-2-2b-it"]
    assert set(gemma.loc[gemma["claim_id"].isin(registry.SKIP_CLAIMS), "claim_id"]) == {
        "skip_vs_pruning"
    }  # rank: extension
    findings = absent["role"] == FINDING
    assert (absent.loc[findings, "verdict"] == decision.INCONCLUSIVE).all()
    # every finding and precondition of the registry has a row, measured or not
    for claim in registry.CLAIMS:
        if claim.role != EXTENSION:
            assert ((table["claim"] == claim.name) & (table["role"] == claim.role)).any(), claim.name
    (accuracy,) = absent[absent["claim_id"] == "accuracy"].to_dict("records")
    assert accuracy["role"] == PRECONDITION and accuracy["why"] == "not run: dataset 'mmlu' is disabled"
    collapse = absent[absent["claim_id"] == "skip_collapse"]
    assert collapse["why"].tolist() == ["not run: meta-llama/Llama-3.2-1B not in layer_skip.models"]
    no_llama = paper.paper_table(
        knn=_knn(), expected=paper.Expected(datasets={"tasks": ["smollm2-135m"]}, families={"smollm2-135m": "smollm"})
    )
    assert no_llama.loc[no_llama["claim_id"] == "skip_collapse", "why"].tolist() == [
        "not run: no model of the Llama family (the study's scope) in this configuration; other models' rows are "
        "extensions"
    ]
    one_model = paper.paper_table(knn=_knn().iloc[:0], expected=paper.Expected(datasets={"blank": ["a"]}))
    family = one_model[one_model["model"] == "all"].iloc[0]
    assert "needs >= 2 models on 'blank', got 1" in family["why"]


def _comparison(model, first, second, diff, *, k=1, variant="all_blocks", statistic="accuracy", n_sets=27, **extra):
    return {
        "model": model,
        "measure": "calibrated",
        "statistic": statistic,
        "variant": variant,
        "k": k,
        "first": first,
        "second": second,
        "first_layers": "27" if first == "expansion" else "19",
        "second_layers": "mean of 27 eligible blocks" if second == "random" else "19",
        "n": 300,
        "n_sets": n_sets,
        "first_value": 0.4,
        "second_value": 0.45,
        "difference": diff[0],
        "ci_low": diff[1],
        "ci_high": diff[2],
        "intact": 0.6,
        "intact_low": 0.54,
        "intact_high": 0.65,
        "skipped": extra.get("skipped", (0.27, 0.22, 0.32))[0],
        "skipped_low": extra.get("skipped", (0.27, 0.22, 0.32))[1],
        "skipped_high": extra.get("skipped", (0.27, 0.22, 0.32))[2],
        "chance": 0.25,
    }


HURTS, SAME, HELPS = (-0.3, -0.4, -0.2), (0.0, -0.03, 0.03), (0.1, 0.05, 0.15)


def _skip_frame(model: str) -> pd.DataFrame:
    rows = [
        _comparison(model, "expansion", "random", HURTS),
        _comparison(model, "pruning", "random", SAME),
        _comparison(model, "expansion", "pruning", HURTS),
        _comparison(model, "expansion", "random", HELPS, variant="no_final"),
        _comparison(model, "pruning", "random", SAME, variant="no_final"),
        _comparison(model, "expansion", "pruning", HELPS, variant="no_final"),
        _comparison(model, "expansion", "random", HURTS, statistic="gold_logprob"),
        _comparison(model, "expansion", "random", HURTS, k=2, n_sets=12),
    ]
    return _csv(rows)


def _rank(model: str, rho=(0.6, 0.4, 0.75)) -> pd.DataFrame:
    return _csv(
        [
            {
                "model": model,
                "measure": "calibrated",
                "variant": variant,
                "n_blocks": 27,
                "n": 300,
                "n_calibration": 32,
                "rho": rho[0],
                "ci_low": rho[1],
                "ci_high": rho[2],
                "most_costly": 1,
                "largest_delta_h": 27,
            }
            for variant in ("all_blocks", "no_final")
        ]
    )


def test_skip_rows_are_findings_only_where_the_study_names_a_direction():
    families = {"llama-3.2-1b": "llama", "gemma-2-2b-it": "gemma", "qwen-1.5b": "qwen"}
    expected = paper.Expected(datasets={"mmlu": list(families)}, layer_skip=list(families), families=families)
    skip = pd.concat([_skip_frame(m) for m in families], ignore_index=True)
    rank = pd.concat([_rank(m) for m in families], ignore_index=True)
    table = paper.paper_table(layer_skip=skip, skip_spearman=rank, expected=expected)
    k1 = table[table["split"] == "k=1, all blocks eligible"]

    def row(model, claim):
        hit = k1[(k1["model"] == model) & (k1["claim_id"] == claim) & (k1["unit"] != units.LOGPROB)]
        assert len(hit) == 1, hit
        return hit.iloc[0]

    llama = row("llama-3.2-1b", "skip_vs_random")
    assert (llama["role"], llama["verdict"]) == (FINDING, decision.REPRODUCED)
    assert llama["study"] == study.STUDY_SKIP_SENTENCE[study.LLAMA_SCOPE]
    assert row("llama-3.2-1b", "pruning_vs_random")["role"] == EXTENSION  # the study says nothing of it
    assert row("llama-3.2-1b", "skip_collapse")["verdict"] == decision.REPRODUCED  # 27 [22, 32] < chance + 10
    gemma = row("gemma-2-2b-it", "skip_vs_pruning")
    assert (gemma["role"], gemma["verdict"]) == (FINDING, decision.NOT_REPRODUCED)  # expansion hurt more: not the claim
    assert "where the study found pruning more critical" in gemma["why"]
    assert row("gemma-2-2b-it", "skip_vs_random")["role"] == EXTENSION
    qwen = row("qwen-1.5b", "skip_vs_random")
    assert (qwen["role"], qwen["verdict"]) == (EXTENSION, "expansion more critical")
    assert qwen["study"] == study.NO_SKIP_CLAIM and not (k1["model"].eq("qwen-1.5b") & k1["role"].eq(FINDING)).any()
    no_final = table[(table["split"] == "k=1, final block excluded") & (table["unit"] == units.POINTS)]
    flipped = no_final[(no_final["model"] == "llama-3.2-1b") & (no_final["claim_id"] == "skip_vs_random")].iloc[0]
    assert flipped["verdict"] == decision.NOT_REPRODUCED and "random more critical" in flipped["why"]
    same = no_final[(no_final["model"] == "qwen-1.5b") & (no_final["claim_id"] == "pruning_vs_random")].iloc[0]
    assert same["verdict"] == outcomes.NO_DIFFERENCE
    few_sets = table[(table["split"].str.startswith("k=2")) & (table["model"] == "llama-3.2-1b")].iloc[0]
    assert few_sets["verdict"] == decision.INCONCLUSIVE and "random baseline of 12 sets" in few_sets["why"]
    # the rank over blocks is no claim of the study's: an extension with its outcome on every model
    ranks = table[(table["claim_id"] == "skip_rank")].set_index(["model", "split"])
    assert (ranks["role"] == EXTENSION).all() and (ranks["verdict"] == "expansion more critical").all()
    assert set(ranks.index.get_level_values("model")) == set(families) and (ranks["study"] == NO_RANK_CLAIM).all()


def test_skip_headline_is_k1_accuracy_for_findings_log_p_for_extensions_counted_apart():
    families = {"llama-3.2-1b": "llama", "qwen-1.5b": "qwen"}
    expected = paper.Expected(datasets={"mmlu": list(families)}, layer_skip=list(families), families=families)
    skip = pd.concat([_skip_frame(m) for m in families], ignore_index=True)
    top = paper.headline(paper.paper_table(layer_skip=skip, skip_spearman=_rank("qwen-1.5b"), expected=expected))
    not_run = top["why"].str.startswith("not run")
    skip_rows = top[top["claim_id"].isin(registry.SKIP_CLAIMS) & ~not_run]
    assert not (top["claim_id"].eq("skip_rank") & top["role"].ne(EXTENSION)).any()  # no finding, even where missing
    assert set(skip_rows["split"]) == {
        "k=1, all blocks eligible",
        "k=1, final block excluded",
        "all blocks eligible",
        "final block excluded",
    }
    findings = skip_rows[skip_rows["role"] == FINDING]
    assert units.LOGPROB not in set(findings["unit"])  # the study's statistic: accuracy
    # an extension row (the study states no statistic) reads the gold letter's log-probability, accuracy beside
    comparisons = skip_rows[skip_rows["claim_id"].isin(["skip_vs_random", "pruning_vs_random", "skip_vs_pruning"])]
    extension = comparisons[comparisons["role"] == EXTENSION]
    assert set(extension["unit"]) == {units.LOGPROB} and set(extension["model"]) == {"qwen-1.5b"}
    qwen = extension[extension["model"] == "qwen-1.5b"].iloc[0]
    assert "accuracy beside: -30.0 [-40.0, -20.0] points" in qwen["note"]
    collapse = skip_rows[skip_rows["claim_id"] == "skip_collapse"]
    assert units.LOGPROB not in set(collapse["unit"])  # "collapses to chance" keeps accuracy on every model
    lines = render.summary(top)
    # llama: vs random and vs pruning and the collapse under all blocks, the collapse under no_final; the two
    # no_final comparisons went the other way
    # per claim: the collapse reproduced (both variants); vs random and vs pruning each reproduced under one
    # variant and not under the other: mixed
    assert lines[0].startswith("Claims of the study: 1 reproduced, 0 not reproduced, 2 mixed, 0 inconclusive")
    assert lines[1].startswith("Extensions (where the study made no claim; counted apart):")
    assert "expansion more critical" in lines[1]  # qwen's log-probability row; its accuracy rows stay in the table
    roles = top["role"].tolist()
    assert roles == sorted(roles, key=[FINDING, EXTENSION, PRECONDITION].index)


def test_headline_keeps_the_verdict_measure_and_shannon():
    table = paper.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), expected=_expected())
    top = paper.headline(table)
    assert set(top.loc[top["claim_id"] == "accuracy", "measure"]) == {"calibrated"}
    assert "renyi(a=5)" not in set(top.loc[top["claim_id"] == "task", "measure"])
    assert (top["verdict"] != "").all()
    findings = top[top["role"] == FINDING]
    measured = findings[~findings["why"].str.startswith("not run")]
    order = [registry.CLAIM_ORDER.index(c) for c in measured["claim_id"]]
    assert order == sorted(order)
    not_run = findings["why"].str.startswith("not run").tolist()
    assert not_run == sorted(not_run)  # findings not run come after those measured
    assert set(top.loc[top["role"] == PRECONDITION, "claim_id"]) == {"accuracy"}
    assert "not run by this configuration (listed last)" in render.verdicts_html(top)


def test_the_readme_digest_gives_one_line_per_claim_with_its_verdict_null_and_rows():
    top = paper.headline(paper.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), expected=_expected()))
    digest = render.digest_markdown(top)
    claims = claim_verdicts.claim_verdicts(top)
    assert digest.startswith(f"**{render.summary(top)[0]}**")
    for rec in claims.to_dict("records"):
        name = rec["claim"] if rec["role"] == FINDING else f"{rec['claim']} ({rec['role']})"
        (line,) = [line for line in digest.splitlines() if line.startswith(f"| {name} |")]
        rows = top[(top["claim"] == rec["claim"]) & (top["role"] == rec["role"])]
        assert f"| {rec['verdict']}" in line and f"| {rec['beyond_null']}" in line
        assert sum(int(n) for n in re.findall(r"×(\d+)", line.rsplit("|", 2)[1])) == len(rows)  # every row tallied
        if rec["verdict"] == "not run":  # the reason is said
            assert rows["why"].iloc[0].removeprefix("not run:").strip() in line
    assert (claims["verdict"] == "not run").any()


def test_the_digest_names_a_not_run_claims_reason():
    table = pd.DataFrame(
        {
            "claim": ["format separability"] * 2,
            "role": ["finding"] * 2,
            "model": ["gemma3-270m", "all"],
            "verdict": ["inconclusive"] * 2,
            "why": ["not run: dataset 'formats' is disabled"] * 2,
        }
    )
    line = render.digest_markdown(table).splitlines()[-1]
    assert line == "| format separability | not run (dataset 'formats' is disabled) | no null | not run ×2 |"


def test_display_and_html_show_intervals_in_the_units_people_read():
    table = paper.paper_table(knn=_knn(), expected=_expected())
    top = paper.headline(table)
    view = render.display(top)
    first = view.iloc[0]
    assert first["ours (95% CI)"] == "90.0 [85.0, 95.0] AUC %" and first["study protocol"].startswith("93.0 [90.0")
    html = render.verdicts_html(top)
    assert html.count('<span class="verdict"') == len(top)
    assert "reproduced</span>" in html and "<table" in html
    assert render.colour("holds") == render.GREEN and render.colour("expansion more critical") == render.BLUE


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
                    "n_sources": 8,
                    "spearman": 0.9,
                    "ci_low": 0.8,
                    "ci_high": 0.95,
                    "p_value": 0.0,
                    "dataset": dataset,
                }
            ]
        ).to_csv(path, index=False)
        paths.append(str(path))
    table = paper.paper_table_from_files({"expansion": paths}, paper.Expected())
    assert list(table["split"]) == ["tasks", "blank"]
    with pytest.raises(ValueError, match=r"unknown paper-table inputs \['bogus'\]"):
        paper.paper_table_from_files({"bogus": paths}, paper.Expected())


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
    row = {
        "model": "smollm2-135m",
        "family": "smollm",
        "n_layers": 30,
        "n": 5000,
        "n_prompts": 40,
        "n_sources": 40,
        "std": 0.2,
    }
    return _csv(
        [
            {**row, "statistic": "jaccard", "mean": 0.38, "ci_low": 0.35, "ci_high": 0.41, "dataset": "blank"},
            {**row, "statistic": "containment", "mean": 0.78, "ci_low": 0.75, "ci_high": 0.81, "dataset": "blank"},
            {**row, "statistic": "containment", "mean": 0.52, "ci_low": 0.45, "ci_high": 0.6, "dataset": "tasks"},
        ]
    )


def test_overlap_is_judged_by_containment_with_jaccard_beside_it():
    table = paper.paper_table(overlap=_overlap(), expected=_expected())
    rows = table[table["claim_id"] == "overlap"].set_index(["split", "measure"])
    assert rows.loc[("blank", "containment"), "verdict"] == decision.REPRODUCED
    assert (
        rows.loc[("blank", "jaccard"), "verdict"] == decision.NOT_REPRODUCED
    )  # the same sets, the statistic that shrinks
    assert rows.loc[("tasks", "containment"), "verdict"] == decision.INCONCLUSIVE
    top = paper.headline(table).query("claim_id == 'overlap'")
    assert set(top["measure"]) == {"containment"} and set(top["split"]) == {"blank", "tasks"}


def _shapes() -> pd.DataFrame:
    base = {"n_layers": 30, "n_prompts": 20, "n_sources": 20, "third_layers": 10, "start": 1.0, "final": 1.5}
    llama_like = {"rise": 2.0, "rise_low": 1.5, "rise_high": 2.5, "refine": 1.5, "refine_low": 1.0}
    llama_like |= {"refine_high": 2.0, "drift": 0.05, "drift_low": 0.01, "drift_high": 0.1}
    return _csv(
        [
            {"model": "llama-3.2-1b", "family": "llama", **base, **llama_like, "dataset": "blank"},
            {"model": "llama-3.2-1b", "family": "llama", **base, **llama_like, "n_sources": 3, "dataset": "tasks"},
            {"model": "smollm2-135m", "family": "smollm", **base, **llama_like, "dataset": "blank"},
            {"model": "qwen2.5-coder-0.5b", "family": "qwen", **base, **llama_like, "dataset": "blank"},
        ]
    )


def test_family_shape_rows_findings_for_the_family_extensions_for_its_architecture():
    families = {"llama-3.2-1b": "llama", "smollm2-135m": "smollm", "qwen2.5-coder-0.5b": "qwen"}
    architectures = {"llama-3.2-1b": "llama", "smollm2-135m": "llama", "qwen2.5-coder-0.5b": "qwen2"}
    expected = paper.Expected(
        datasets={"blank": list(families), "tasks": ["llama-3.2-1b"]}, families=families, architectures=architectures
    )
    table = paper.paper_table(shapes=_shapes(), expected=expected)
    llama = table[table["claim_id"] == "shape_llama"].set_index(["model", "split"])
    assert llama.loc[("llama-3.2-1b", "blank"), "verdict"] == decision.REPRODUCED
    assert llama.loc[("llama-3.2-1b", "blank"), "role"] == FINDING
    assert "drift 0.050 [0.010, 0.100]" in llama.loc[("llama-3.2-1b", "blank"), "note"]
    assert llama.loc[("llama-3.2-1b", "tasks"), "verdict"] == decision.INCONCLUSIVE
    smol = llama.loc[("smollm2-135m", "blank")]
    assert (smol["role"], smol["verdict"]) == (EXTENSION, "holds") and smol["note"].startswith("llama architecture")
    gpt = table[table["claim_id"] == "shape_gpt"]
    assert len(gpt) == 1 and gpt["why"].item() == "not run: no model of family gpt or gpt2 in this configuration"
    assert "qwen2.5-coder-0.5b" not in set(table.loc[table["claim_id"].isin(["shape_gpt", "shape_llama"]), "model"])
    gpt2 = {"gpt2-small": "gpt2", "gpt2-xl": "GPT2"}
    shapes = _shapes().assign(model="gpt2-small", family="gpt2").iloc[:1]
    table = paper.paper_table(shapes=shapes, expected=paper.Expected(datasets={"blank": ["gpt2-small"]}, families=gpt2))
    rows = table[table["claim_id"] == "shape_gpt"].set_index("model")
    assert rows.loc["gpt2-small", "verdict"] == decision.NOT_REPRODUCED  # it starts low: rise > 0 fails "starts high"
    assert rows.loc["gpt2-xl", "why"] == "not run: gpt2-xl is profiled on no dataset"


def test_summary_counts_each_role_apart():
    table = paper.paper_table(knn=_knn(), accuracy=_accuracy(top_share=0.4), overlap=_overlap(), expected=_expected())
    top = paper.headline(table)
    lines = render.summary(top)
    findings = lines[0]
    claims = claim_verdicts.claim_verdicts(top)
    found = claims[claims["role"] == FINDING]["verdict"].value_counts()
    assert findings.startswith(
        f"Claims of the study: {found.get('reproduced', 0)} reproduced, {found.get('not reproduced', 0)} not "
        f"reproduced, {found.get('mixed', 0)} mixed, {found.get('inconclusive', 0)} inconclusive, "
        f"{found.get('mechanical', 0)} mechanical; "
    )
    counted = sum(
        int(part.split()[0]) for part in findings.split(". Beyond")[0].split(": ", 1)[1].replace(";", ",").split(", ")
    )
    assert counted == len(claims[claims["role"] == FINDING])  # every finding claim counted once, by claim not row
    assert counted < int((top["role"] == FINDING).sum())  # several rows per claim: rows are not what is counted
    assert lines[-1].startswith("Preconditions: 0 met, 0 not met, 1 undecided (not findings of the study")
    text = render.verdicts_markdown(top, "Verdicts")
    body, section = text.split(f"## {render.HEADINGS[PRECONDITION][0]}")
    assert text.startswith("# Verdicts\n\n**Claims of the study:") and "| claim | model |" in body
    assert "## Claims\n\n| claim | as stated | beyond its null | beyond the simplest feature | rows |" in body
    assert f"{registry.claim('accuracy').name} (precondition)" in section
    assert f"{registry.claim('model_identity').name} (extension)" in body
    html = render.verdicts_html(top)
    assert html.count("<table") == 3


TWO_PAIRS = (("qwen", "q-0.5b", "q-1.5b"), ("gemma", "g-270m", "g-1b"))


def _pairs(gap=(0.4, 0.3, 0.5), n_other: int = 2, scales=(NATS, NORMALIZED, CENTRED), pairs=TWO_PAIRS) -> pd.DataFrame:
    return _csv(
        [
            {
                "statistic": statistic,
                "scale": scale,
                "family": family,
                "small": small,
                "large": large,
                "n_models": 2 + n_other,
                "n_other": 0 if statistic == ALIGNMENT_GAP else n_other,
                "n_samples": 40,
                "same": 0.2,
                "nearest": "s-135m" if n_other and statistic != ALIGNMENT_GAP else "",
                "nearest_value": 0.6 if n_other or statistic == ALIGNMENT_GAP else float("nan"),
                "gap": gap[0] if n_other or statistic == ALIGNMENT_GAP else float("nan"),
                "gap_low": gap[1] if n_other or statistic == ALIGNMENT_GAP else float("nan"),
                "gap_high": gap[2] if n_other or statistic == ALIGNMENT_GAP else float("nan"),
            }
            for family, small, large in pairs
            for statistic in (FAMILY_GAP, RESOLUTION_GAP, ALIGNMENT_GAP)
            for scale in scales
        ]
    )


def _family_expected(families: dict[str, str]) -> paper.Expected:
    return paper.Expected(datasets={"blank": list(families)}, families=families)


PAIR_FAMILIES = {"q-0.5b": "qwen", "q-1.5b": "qwen", "s-135m": "smollm", "g-270m": "gemma", "g-1b": "gemma"}
QWEN = "q-0.5b, q-1.5b"


def test_same_family_pairs_get_verdicts_per_scale_and_the_headline_reads_the_normalized_one():
    table = paper.paper_table(family_pairs=_pairs(), expected=_family_expected(PAIR_FAMILIES))
    rows = table[table["claim_id"].isin(["clustering", "size_resolution"])].set_index(["claim_id", "model", "measure"])
    assert len(rows) == 12 and set(rows["verdict"]) == {decision.REPRODUCED}  # one row per pair, claim and scale
    assert set(rows.index.get_level_values("model")) == {QWEN, "g-270m, g-1b"}
    assert (
        rows.loc[("clustering", QWEN, NORMALIZED), "unit"] == units.LOG_V
        and rows.loc[("clustering", QWEN, NATS), "unit"] == units.NATS
    )
    assert "(s-135m)" in rows.loc[("clustering", QWEN, NATS), "why"]
    assert "on absolute layer 0.600" in rows.loc[("size_resolution", QWEN, NATS), "note"]
    assert RESOLUTION_GAP not in " ".join(table["note"])  # the old closeness statistic is no verdict any more
    top = paper.headline(table)
    assert set(top.loc[top["claim_id"].isin(["clustering", "size_resolution"]), "measure"]) == {NORMALIZED}
    below = paper.paper_table(family_pairs=_pairs((-0.3, -0.4, -0.2)), expected=_family_expected(PAIR_FAMILIES))
    assert set(below.loc[below["claim_id"] == "size_resolution", "verdict"]) == {decision.NOT_REPRODUCED}
    wide = paper.paper_table(
        family_pairs=_pairs((0.05, -0.1, 0.2), scales=(NATS,)), expected=_family_expected(PAIR_FAMILIES)
    )
    why = wide.loc[(wide["claim_id"] == "clustering") & (wide["model"] == QWEN), "why"].item()
    assert "with 40 blank samples per model: about 360 would decide it" in why, why


def test_one_same_family_pair_cannot_test_family_not_size():
    """One pair is one observation: whatever its numbers, "family, not size" and "size as resolution" read cannot
    test, with no beyond-null reading."""
    one = paper.paper_table(family_pairs=_pairs(pairs=TWO_PAIRS[:1]), expected=_family_expected(PAIR_FAMILIES))
    rows = one[one["claim_id"].isin(["clustering", "size_resolution"])]
    assert len(rows) == 6 and set(rows["model"]) == {QWEN}
    assert set(rows["why"]) == {
        "cannot test: one pair: cannot test 'family, not size'; needs two families with two sizes each"
    }
    assert (rows["beyond_verdict"] == "").all()


def test_same_family_pair_claims_without_a_pair_say_why_more_prompts_would_not_help():
    def reasons(families, pairs=None, clustering=True, claims=("clustering", "size_resolution")):
        frame = pd.DataFrame([{"grouping": "family", "ari_models": 1.0, "silhouette_samples": 0.5}])
        table = paper.paper_table(
            clustering=frame if clustering else None, family_pairs=pairs, expected=_family_expected(families)
        )
        rows = table[table["claim_id"].isin(claims)]
        # a design that cannot test the claims says so; a blank set that cannot be read is not run
        words = (
            rows["why"]
            .str.split(":")
            .str[0]
            .map({"cannot test": decision.CANNOT_TEST, "not run": decision.INCONCLUSIVE})
        )
        assert (rows["verdict"] == words).all(), rows[["verdict", "why"]]
        return set(rows["why"])

    design = "cannot test: no family has two sizes: cannot test 'family, not size'; needs two families with two sizes"
    assert reasons({"a": "x", "b": "y"}) == {
        f"{design} each (one model per family: family and model identity coincide, so size cannot be told apart "
        "(make study))"
    }
    assert reasons({"a": "x", "b": "x"}) == {
        f"{design} each (only family x on 'blank': no other family to compare with)"
    }
    assert reasons({"a": "x", "b": "x", "c": "y"}) == {
        f"{design} each (no two models of one family with different layer counts on 'blank')"
    }
    # one family with two sizes cannot test the claims, with or without another family beside it
    alone = reasons({"q-0.5b": "qwen", "q-1.5b": "qwen"}, pairs=_pairs(n_other=0, scales=(NATS,), pairs=TWO_PAIRS[:1]))
    assert alone == {"cannot test: one pair: cannot test 'family, not size'; needs two families with two sizes each"}
    assert reasons({"a": "x"}, clustering=False) == {"not run: needs >= 2 models on 'blank', got 1"}


def test_pooled_accuracy_counts_questions_not_prompts():
    styles = _accuracy(top_share=0.4)
    pooled = styles.assign(style=ALL_STYLES, n=80)  # 40 questions in two styles: the pooled n counts prompts
    acc = paper.paper_table(accuracy=pd.concat([styles, pooled]), expected=_expected())
    why = acc.loc[(acc["claim_id"] == "accuracy") & (acc["split"] == ALL_STYLES), "why"]
    assert why.str.contains("with 40 questions: about").all(), why.tolist()


def test_terminal_table_fits_120_columns_and_cuts_nothing():
    top = paper.headline(
        paper.paper_table(knn=_knn(), accuracy=_accuracy(0.4), overlap=_overlap(), expected=_expected())
    )
    text = render.terminal_table(top)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= render.TERMINAL_WIDTH
    body = lines[lines.index(next(line for line in lines if line.startswith("-----"))) + 1 :]
    starts = np.cumsum([0] + [w + 2 for _, w in render.TERMINAL_COLUMNS])
    for i, (name, width) in enumerate(render.TERMINAL_COLUMNS):
        column = " ".join(" ".join(line[starts[i] : starts[i] + width].split()) for line in body)
        for value in render.compact(top)[name]:
            assert " ".join(str(value).split()) in column, (name, value)  # every cell whole, in its column
    under = top.assign(under_linear=["inconclusive"] + [""] * (len(top) - 1))  # read again under a fitted lens
    lens_lines = render.terminal_table(under).splitlines()
    assert max(len(line) for line in lens_lines) <= render.TERMINAL_WIDTH
    verdicts = " ".join(line[starts[3] :].strip() for line in lens_lines[len(lines) - len(body) :])
    assert f"{render.compact(top)['verdict'].iloc[0]}; under linear: inconclusive" in verdicts
    assert verdicts.count("under linear") == 1


def test_a_precondition_not_run_is_counted_apart():
    lines = render.summary(paper.headline(paper.paper_table(knn=_knn(), expected=_expected())))  # mmlu disabled
    assert lines[-1].startswith("Preconditions: 0 met, 0 not met, 0 undecided; 1 not run (not findings of the study")


def test_every_row_with_a_null_reaches_the_nulls_table_with_its_planted_rate():
    from entropy_lens.core.draws import DrawSettings
    from entropy_lens.verdicts.nulls import nulls_table
    from entropy_lens.verdicts.planted_nulls import planted_share_at_bar

    spear = _csv(
        [
            {"model": "m", "family": "f", "n_layers": 8, "n": 900, "n_prompts": 30, "n_sources": 30, "spearman": 0.9}
            | {"ci_low": 0.85, "ci_high": 0.94, "p_value": 0.0, "dataset": "blank", "null_name": "cross-prompt"}
            | {"null_estimate": 0.91, "null_low": 0.88, "null_high": 0.94, "beyond": -0.01}
            | {"beyond_low": -0.04, "beyond_high": 0.02}
        ]
    )
    table = paper.paper_table(expansion=spear, accuracy=_accuracy(top_share=0.4), expected=_expected())
    rho = table[table["claim_id"] == "spearman"].iloc[0]
    assert rho["verdict"] == decision.REPRODUCED  # as stated: 0.9 clears 0.5, but so does its null
    assert rho["beyond_verdict"] == decision.NOT_SHOWN and "without the claim" in rho["beyond_why"]
    assert "containment of adjacent top-p sets is the claim's test" in rho["beyond_why"]
    calls = []
    planted = {"spearman": lambda n, d, s: calls.append(n) or 0.04, "accuracy": planted_share_at_bar}
    nulls = nulls_table(table, planted, planted_true={}, settings=DrawSettings(min_draws=50, max_draws=50))
    assert set(nulls["claim_id"]) == {"spearman", "accuracy"}
    assert calls == [30]  # simulated at the row's own number of prompts
    (rate,) = nulls.loc[nulls["claim_id"] == "spearman", "planted_null_rate"]
    assert rate == 0.04
    row = nulls.loc[nulls["claim_id"] == "spearman"].iloc[0]  # the row's null and excess, carried as they are
    assert (row["null_estimate"], row["beyond_high"], row["beyond_verdict"]) == (0.91, 0.02, decision.NOT_SHOWN)
    assert row["null"] == rho["null"] != "" and row["beyond"] == -0.01
    assert (nulls["planted_null_rate"] <= 0.1).all() and (nulls["planted_draws"] == 50).all()


def test_correctness_reads_the_greedy_letter_and_the_calibrated_letter_is_an_extension():
    """mmlu_correct labels the greedy (ll) letter, so its letter-bias check reads the ll accuracy; the calibrated
    variant's rows are extension rows checked against the calibrated accuracy."""
    rows = [
        _knn_row("mmlu_correct", "smollm2-135m", "grouped", 0.6, 0.5, 0.7, split="base"),
        _knn_row("mmlu_correct_calibrated", "smollm2-135m", "grouped", 0.6, 0.5, 0.7),
    ]
    biased = _accuracy(top_share=1.0)
    fair = _accuracy(top_share=0.25).assign(accuracy=0.6, ci_low=0.5, ci_high=0.7)
    accuracy = pd.concat([biased[biased["measure"] == "ll"], fair[fair["measure"] != "ll"]])
    accuracy = pd.concat([accuracy, accuracy.assign(style=ALL_STYLES)], ignore_index=True)
    table = paper.paper_table(knn=_csv(rows), accuracy=accuracy, expected=_expected())
    greedy = table[table["claim_id"] == "mmlu_correct"].iloc[0]
    assert greedy["verdict"] == decision.INCONCLUSIVE and "letter bias" in greedy["why"]
    calibrated = table[table["claim"] == registry.BY_ID["mmlu_correct_calibrated"].name].iloc[0]
    assert calibrated["role"] == EXTENSION and calibrated["split"] == ALL_STYLES
    assert "letter bias" not in calibrated["why"] and "at chance" not in calibrated["why"]


def test_no_absent_row_where_a_model_cannot_or_need_not_read_a_finding():
    """An image classifier owes the text sets' findings no "not run" row, nor a GPT-2 model MMLU correctness
    (the study states it for Llama and Gemma); a Gemma model left off MMLU and a Llama one off the tasks still do."""
    expected = paper.Expected(
        datasets={"tasks": ["gpt2", "gem"], "mmlu": ["llama"], "images": ["vit"]},
        families={"gpt2": "gpt2", "gem": "gemma", "llama": "llama", "vit": "vit"},
    )
    absent = {(r["claim_id"], r["model"]): r["why"] for r in absent_rows([], expected)}
    assert ("task", "vit") not in absent and ("format", "vit") not in absent and ("mmlu_correct", "vit") not in absent
    assert ("mmlu_correct", "gpt2") not in absent
    assert "gem is not profiled on 'mmlu'" in absent[("mmlu_correct", "gem")]
    assert "llama is not profiled on 'tasks'" in absent[("task", "llama")]
