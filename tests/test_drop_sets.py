"""Drop sets scored: each criterion's k-block set against the intact model and random k-sets, paired over questions."""

import numpy as np
import pandas as pd
import pytest
import torch
from tiny import tiny_model

from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping import drop_scores, evaluation, prefix, pruning
from entropy_lens.skipping.conditions import ALL_BLOCKS, DROP, INTACT, NO_FINAL, RANDOM, Condition, random_name
from entropy_lens.skipping.criteria import ACCURACY, GOLD_LOGPROB, criteria_table
from entropy_lens.skipping.recorder import ReadingRecorder
from entropy_lens.verdicts.decision import shown_beyond

N_LAYERS = 10


def drops_table(sets: dict[str, str], k: int = 2, variant: str = ALL_BLOCKS) -> pd.DataFrame:
    rows = [
        {"model": "m", "variant": variant, "share": 0.2, "k": k, "criterion": c, "layers": t} for c, t in sets.items()
    ]
    return pd.DataFrame(rows, columns=list(pruning.DROP_COLUMNS))


def score_rows(conditions: list[Condition], correct: np.ndarray, logprob: np.ndarray | None = None) -> pd.DataFrame:
    """Score rows of ``conditions`` from ``[N, C]`` 0/1 answers (one measure)."""
    n = correct.shape[0]
    logprob = np.log(np.where(correct > 0, 0.9, 0.1)) if logprob is None else logprob
    frames = [
        pd.DataFrame(
            {
                "condition": c.name,
                "kind": c.kind,
                "k": c.k,
                "replicate": c.replicate,
                "layers": c.layer_text,
                "question": [f"q{i}" for i in range(n)],
                "measure": "calibrated",
                "correct": correct[:, j].astype(np.int8),
                "gold_logprob": logprob[:, j],
            }
        )
        for j, c in enumerate(conditions)
    ]
    return pd.concat(frames, ignore_index=True)


def scenario(
    chosen_keep: dict[str, float], random_keep: float, n: int = 60, n_sets: int = 20, seed: int = 0, variant=ALL_BLOCKS
):
    """Intact answers all right; each chosen set keeps its share of them; each question is scored under one random
    set drawn for it from a population of ``n_sets`` (``random_keep`` of the questions kept, at random)."""
    rng = np.random.default_rng(seed)
    sets = {c: f"{2 * i + 1},{2 * i + 2}" for i, c in enumerate(chosen_keep)}
    conditions = [Condition(INTACT, 0)]
    conditions += [Condition(DROP, 2, tuple(int(v) for v in t.split(",")), i) for i, t in enumerate(sets.values())]
    keep = [1.0, *chosen_keep.values()]
    correct = np.column_stack([np.arange(n) < round(p * n) for p in keep]).astype(float)
    population = [f"{a},{a + 1 + i // 8}" for i, a in enumerate(range(n_sets))]
    drawn = [population[i % n_sets] for i in rng.permutation(n)]
    kept = rng.permutation(np.arange(n) < round(random_keep * n))
    random = pd.DataFrame(
        {
            "condition": random_name(2, variant),
            "kind": RANDOM,
            "k": 2,
            "replicate": 0,
            "layers": drawn,
            "question": [f"q{i}" for i in range(n)],
            "measure": "calibrated",
            "correct": kept.astype(np.int8),
            "gold_logprob": np.log(np.where(kept, 0.9, 0.1)),
        }
    )
    return pd.concat([score_rows(conditions, correct), random], ignore_index=True), drops_table(sets, variant=variant)


def scored(rows, drops, statistic=ACCURACY):
    got = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=400, seed=0)
    return got[got["statistic"] == statistic].set_index("criterion")


def test_a_set_that_keeps_more_than_every_random_set_is_better_than_random_and_one_that_loses_is_worse():
    rows, drops = scenario({"keeps": 0.95, "loses": 0.2, "typical": 0.6}, random_keep=0.6)
    got = scored(rows, drops)
    assert got.loc["keeps", "reading"] == drop_scores.BETTER and got.loc["keeps", "beyond_low"] > 0
    assert got.loc["loses", "reading"] == drop_scores.WORSE and got.loc["loses", "beyond_high"] < 0
    assert got.loc["typical", "reading"] in (drop_scores.UNDECIDED, drop_scores.SAME)
    assert got.loc["keeps", "change"] == pytest.approx(-0.05, abs=0.02)
    assert got.loc["keeps", "null_estimate"] == pytest.approx(-0.4, abs=0.02)
    assert got.loc["keeps", "beyond"] == pytest.approx(0.35, abs=0.02)  # the set minus the draw, per question
    assert set(got["n_sets"]) == {20} and set(got["n"]) == {60}
    assert got.loc["keeps", "best"] and not got.loc["loses", "best"] and not got.loc["typical", "best"]
    assert got.loc["keeps", "margin_low"] > 0 > got.loc["typical", "margin_high"]


def test_no_criterion_is_named_best_where_two_keep_alike():
    rows, drops = scenario({"a": 0.9, "b": 0.9, "c": 0.3}, random_keep=0.5)
    got = scored(rows, drops)
    assert not got["best"].any()
    assert got.loc["a", "margin_low"] <= 0 <= got.loc["a", "margin_high"]


def test_the_same_blocks_chosen_twice_are_one_set_against_the_others():
    rows, drops = scenario({"a": 0.95, "c": 0.3}, random_keep=0.5)
    drops = pd.concat([drops, drops.iloc[[0]].assign(criterion="twin")], ignore_index=True)
    got = scored(rows, drops)
    assert got.loc["a", "best"] and got.loc["twin", "best"]  # the twin is the same set, no rival to itself


def test_no_difference_inside_the_margins_and_undecided_across_them():
    assert drop_scores.drop_reading(-0.02, 0.03, 0.05) == drop_scores.SAME
    assert drop_scores.drop_reading(-0.08, 0.03, 0.05) == drop_scores.UNDECIDED
    assert drop_scores.drop_reading(0.01, 0.2, 0.05) == drop_scores.BETTER
    assert drop_scores.drop_reading(-0.2, -0.01, 0.05) == drop_scores.WORSE
    assert drop_scores.drop_reading(np.nan, 0.1, 0.05) == drop_scores.UNDECIDED
    assert (
        drop_scores.drop_reading(0.0, 0.0, 0.05) == drop_scores.UNDECIDED
    )  # zero width: every replicate alike decides nothing


def test_each_variant_reads_its_own_random_draws():
    rows, drops = scenario({"a": 0.9}, random_keep=0.5, variant=NO_FINAL)
    got = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=200, seed=0)
    assert set(got["n_sets"]) == {20} and (got["beyond_low"] > 0).any()
    other = drop_scores.drop_scores(rows, drops.assign(variant=ALL_BLOCKS), N_LAYERS, n_boot=200, seed=0)
    assert set(other["n_sets"]) == {0} and other["beyond"].isna().all()  # no draws of that variant: not read
    assert set(other["reading"]) == {drop_scores.UNDECIDED}


def test_gold_logprob_rows_read_the_letters_probability():
    rows, drops = scenario({"keeps": 1.0}, random_keep=0.5)
    got = scored(rows, drops, GOLD_LOGPROB)
    assert got.loc["keeps", "change"] == pytest.approx(0.0)
    assert got.loc["keeps", "null_estimate"] == pytest.approx(0.5 * (np.log(0.1) - np.log(0.9)), abs=0.05)
    assert got.loc["keeps", "reading"] == drop_scores.BETTER


def test_unscored_sets_and_a_missing_intact_model_are_refused():
    rows, drops = scenario({"a": 0.9}, random_keep=0.5)
    with pytest.raises(ValueError, match="were not scored; rerun layer_skip_eval"):
        drop_scores.drop_scores(rows, drops.assign(layers="7,8"), N_LAYERS, n_boot=100)
    with pytest.raises(ValueError, match="lack the intact model"):
        drop_scores.drop_scores(rows[rows["kind"] != INTACT], drops, N_LAYERS, n_boot=100)
    with pytest.raises(ValueError, match="equal-length non-empty 1-D arrays"):
        drop_scores.beyond_random(np.ones(3), np.ones(4), n_boot=10, seed=0)


def test_planted_null_a_set_as_good_as_the_mean_random_set_is_rarely_better_than_random():
    assert (
        drop_scores.drop_set_planted_rate(36, 100, 0, shown=shown_beyond) <= 0.05
        and drop_scores.drop_set_planted_rate(200, 100, 1, n_sets=20, shown=shown_beyond) <= 0.05
    )


def test_planted_signal_a_set_that_keeps_everything_is_shown():
    rng = np.random.default_rng(1)
    know = rng.random(60) < 0.7
    drawn = (know & (rng.random(60) < rng.uniform(0.3, 0.8, 60))).astype(float)  # one random set per question
    assert drop_scores.beyond_random(know.astype(float), drawn, n_boot=400, seed=0)[1] > 0


def test_drop_conditions_score_each_chosen_set_once():
    drops = drops_table({"a": "3,4", "b": "3,4", "c": "5,8"})
    conditions = pruning.drop_conditions(drops)
    assert [c.layers for c in conditions] == [(3, 4), (5, 8)] and {c.kind for c in conditions} == {DROP}
    assert len({c.name for c in conditions}) == len(conditions)


def test_evaluate_drop_sets_scores_the_criteria_sets_and_random_sets_on_a_tiny_model():
    lm = tiny_model("llama", n_layers=8, scale=3.0)
    prompts = [f"question {i} about the cat and the park Answer:" for i in range(6)]
    table = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(6)],
            "prompt_text": prompts,
            "style": "base",
            "answer": [LETTERS[i % 4] for i in range(6)],
        }
    )
    recorder = ReadingRecorder(lm, len(prompts))
    prefix.condition_letter_logprobs(lm, prompts, [Condition(INTACT, 0)], observe=recorder)
    readings = recorder.result(table["question_id"].tolist())
    kwargs = {"variants": [ALL_BLOCKS, NO_FINAL], "seed": 0, "batch_size": 4, "chat_template": False}
    rows = evaluation.evaluate_drop_sets(lm, table, readings, shares=[0.12, 0.25], n_questions=4, **kwargs)
    assert rows["question"].nunique() == 4
    assert set(rows["kind"]) == {INTACT, DROP, RANDOM} and set(rows["k"]) == {0, 1, 2}
    random = rows[rows["kind"] == RANDOM]
    assert set(random["condition"]) == {random_name(k, v) for k in (1, 2) for v in (ALL_BLOCKS, NO_FINAL)}
    assert (random.groupby("condition")["question"].nunique() == 4).all()  # one draw per question and variant
    drops = pruning.drop_sets(
        criteria_table(readings, lm.name), readings, lm.name, [ALL_BLOCKS, NO_FINAL], [0.12, 0.25]
    )
    got = drop_scores.drop_scores(rows, drops, lm.n_layers, n_boot=100, seed=0)
    assert len(got) == len(drops) * 2 * 2  # two measures, two statistics
    # a set scored beside the others on the shared prefix scores as it does alone
    one = rows[(rows["kind"] == DROP) & (rows["measure"] == "ll")].drop_duplicates("condition").iloc[-1]
    asked = table[table["question_id"].isin(rows["question"])]
    layers = tuple(int(v) for v in one["layers"].split(","))
    alone = prefix.score_conditions_shared(lm, asked, [Condition(DROP, int(one["k"]), layers)])
    alone = alone[alone["measure"] == "ll"].set_index("question")["gold_logprob"]
    shared = rows[(rows["condition"] == one["condition"]) & (rows["measure"] == "ll")].set_index("question")
    np.testing.assert_allclose(shared["gold_logprob"], alone.loc[shared.index], atol=1e-5)
    assert evaluation.evaluate_drop_sets(lm, table, readings, shares=[], n_questions=4, **kwargs).empty


def test_drop_rows_are_extension_rows_judged_beyond_the_random_sets():
    from entropy_lens.verdicts import claim, registry
    from entropy_lens.verdicts.claims import drop_sets
    from entropy_lens.verdicts.rows import rows_of

    rows, drops = scenario({"keeps": 0.95, "loses": 0.2, "typical": 0.62}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=400, seed=0)
    frame = drop_scores.DROP_SCORE_READING.frame(scores, "drop_scores")
    table = pd.DataFrame(rows_of(frame, drop_sets.DROP_RULE)).set_index(["measure", "unit", "split"])
    assert len(table) == len(scores) and set(table["role"]) == {claim.EXTENSION}
    assert set(table["claim"]) == {registry.BY_ID["drop_sets"].name}
    accuracy = table.xs(drop_sets.POINTS, level="unit").reset_index()
    words = dict(zip(accuracy["split"].str.rsplit(", ", n=1).str[-1], accuracy["verdict"], strict=True))
    assert words == {"keeps": "holds", "loses": "does not hold", "typical": "undecided"}
    assert accuracy["beyond_low"].notna().all() and accuracy["null"].str.startswith("random k-sets").all()
    logprob = table.xs(drop_sets.LOGPROB, level="unit")
    assert len(logprob) == len(accuracy)  # the primary statistic, accuracy beside


def test_drop_verdict_needs_a_population_and_an_intact_model_above_chance():
    from entropy_lens.verdicts.claims import drop_sets

    rec = {"statistic": ACCURACY, "intact": 0.6, "n_sets": 20, "beyond": 0.1, "beyond_low": 0.02,
           "beyond_high": 0.2, "layers": "3,4", "n": 60, "best": True}  # fmt: skip
    assert (
        drop_sets.drop_verdict(rec).verdict == "reproduced"
        and "best of the criteria" in drop_sets.drop_verdict(rec).why
    )
    assert drop_sets.drop_verdict(rec | {"beyond_low": -0.1, "beyond_high": 0.04}).verdict == "not reproduced"
    assert drop_sets.drop_verdict(rec | {"beyond_low": -0.1, "beyond_high": 0.06}).verdict == "inconclusive"
    assert "not above chance" in drop_sets.drop_verdict(rec | {"intact": 0.25}).why
    assert "random baseline of 19 sets" in drop_sets.drop_verdict(rec | {"n_sets": 19}).why
    flat = drop_sets.drop_verdict(rec | {"beyond": 0.0, "beyond_low": 0.0, "beyond_high": 0.0})
    assert flat.verdict == "inconclusive" and "zero width" in flat.why


def test_a_set_is_recommended_only_where_it_beats_random_and_every_other_set():
    from entropy_lens.verdicts.claims import drop_sets

    rows, drops = scenario({"keeps": 0.95, "loses": 0.2}, random_keep=0.6)
    got = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=300, seed=0)
    logp = got[(got["statistic"] == GOLD_LOGPROB)]
    assert list(drop_sets.recommended(logp)["criterion"]) == ["keeps"]
    rows, drops = scenario({"a": 0.9, "b": 0.9}, random_keep=0.6)  # both beat random, neither the other
    got = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=300, seed=0)
    assert drop_sets.recommended(got[got["statistic"] == GOLD_LOGPROB]).empty
    rows, drops = scenario({"a": 0.62, "b": 0.2}, random_keep=0.6)  # a beats b, not random
    got = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=300, seed=0)
    logp = got[got["statistic"] == GOLD_LOGPROB].set_index("criterion")
    assert logp.loc["a", "margin_low"] > 0 and drop_sets.recommended(logp.reset_index()).empty
    rec = {"statistic": GOLD_LOGPROB, "margin": 0.2, "margin_low": 0.1, "margin_high": 0.3}
    assert drop_sets.separates(rec).verdict == "reproduced"
    assert drop_sets.separates(rec | {"margin_low": -0.1}).verdict == "inconclusive"
    assert drop_sets.separates(rec | {"margin": -0.2, "margin_low": -0.3, "margin_high": -0.1}).verdict == (
        "not reproduced"
    )


def test_skip_map_prints_each_criterions_set_with_what_it_keeps_and_the_recommended_one(tmp_path, capsys):
    from test_cli import _skip_map_csv

    from entropy_lens import cli
    from entropy_lens.verdicts.claims import drop_sets

    model = _skip_map_csv(tmp_path)["model"].iloc[0]
    rows, drops = scenario({"keeps": 0.95, "loses": 0.2}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops.assign(model=model), N_LAYERS, n_boot=300, seed=0)
    scores.to_csv(tmp_path / "tables" / "skip_drop_scores.csv", index=False)
    assert cli.main(["skip-map", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "all_blocks, k = 2 (60 questions; a random k-set drawn per question: log p -0.879" in printed
    keeps = next(line for line in printed.splitlines() if line.strip().startswith("keeps"))
    assert "1,2" in keeps and "accuracy  95.0% (-5.0 [" in keeps and keeps.endswith("; better than random")
    assert "log p -0.110 [" in keeps
    assert "recommended: keeps's blocks 1,2" in printed
    line = drop_sets.drop_line(scores, "calibrated", model_names={model: "Tiny"})
    assert line.startswith("Which blocks of Tiny can be dropped (60 questions, calibrated letters")
    assert "drop keeps's blocks 1,2: log p -0.11 [" in line and "accuracy -5.0 points" in line
    rows, drops = scenario({"a": 0.9, "b": 0.9}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops.assign(model=model), N_LAYERS, n_boot=300, seed=0)
    scores.to_csv(tmp_path / "tables" / "skip_drop_scores.csv", index=False)
    assert cli.main(["skip-map", "--results", str(tmp_path)]) == 0
    assert "recommended: none (no set keeps more than random and than every other" in capsys.readouterr().out
    assert "no set separates from random and from the others (least costly" in drop_sets.drop_line(scores, "calibrated")


# --------------------------------------------------------------------------- ΔH read through a linear lens


def linear_lens(lm, seed: int = 0):
    """A linear lens of random affine maps (the final block's the identity), built in code."""
    from entropy_lens.lens.translators import Translators

    generator = torch.Generator().manual_seed(seed)
    n, d = lm.n_layers, lm.unembed.weight.shape[1]
    weight = torch.eye(d) + 0.3 * torch.randn(n, d, d, generator=generator)
    bias = 0.1 * torch.randn(n, d, generator=generator)
    weight[-1], bias[-1] = torch.eye(d), 0.0
    return Translators("linear", weight, bias)


def test_the_linear_lens_entropy_is_read_through_each_blocks_translator(tmp_path):
    from entropy_lens.lens.decoding import lens_logits
    from entropy_lens.lens.entropy import shannon_entropy
    from entropy_lens.plots.pruning import plot_criteria
    from entropy_lens.skipping import criteria, readings

    lm = tiny_model("llama", n_layers=4, scale=3.0)
    prompts = ["the cat sat on the mat Answer:", "what is two and two Answer:", "a b c Answer:"]
    lens = linear_lens(lm)
    recorder = ReadingRecorder(lm, len(prompts), translators=lens)
    states: list = []
    prefix.condition_letter_logprobs(
        lm, prompts, [Condition(INTACT, 0)], batch_size=2, observe=lambda *a: (recorder(*a), states.append(a))
    )
    got = recorder.result(["a", "b", "c"])
    assert np.isnan(got.entropy_linear[:, 0]).all() and np.isfinite(got.entropy_linear[:, 1:]).all()
    np.testing.assert_allclose(got.entropy_linear[:, -1], got.entropy[:, -1], atol=1e-5)  # the model's own
    rows, _, calls, _ = states[0]
    block = 1  # block 1's output is block 2's input, through translator 1, written apart from the recorder
    mapped = calls[2].hidden[:, -1, :].float() @ lens.weight[1] + lens.bias[1]
    np.testing.assert_allclose(got.entropy_linear[rows, block + 1], shannon_entropy(lens_logits(lm, mapped)), atol=1e-4)
    assert not np.allclose(got.entropy_linear[:, 1:-1], got.entropy[:, 1:-1], atol=1e-3)
    table = criteria.criteria_table(got, "m")
    assert np.isnan(table.loc[0, "delta_h_linear"]) and table.loc[1:, "delta_h_linear"].notna().all()
    back = readings.frames_readings(*readings.readings_frames(got))
    np.testing.assert_allclose(back.entropy_linear, got.entropy_linear, atol=1e-6)
    sets = pruning.drop_sets(table, got, "m", [ALL_BLOCKS])
    assert "delta_h_linear" in set(sets["criterion"])
    ranks = criteria.criterion_ranks(table, range(4))
    assert np.isnan(ranks.loc["delta_h_linear", 0]) and ranks.loc["delta_h_linear", 1:].notna().all()
    skip_map = pd.DataFrame({"layer": range(4), "d_logprob": -0.1, "d_logprob_low": -0.2, "d_logprob_high": 0.0})
    plot_criteria(skip_map, table, tmp_path / "criteria.png")  # block 0 unranked by the linear lens: drawn blank
    assert (tmp_path / "criteria.png").stat().st_size > 0


def test_without_a_linear_lens_its_criterion_is_nan_and_chooses_nothing():
    from entropy_lens.skipping import criteria, readings

    lm = tiny_model("llama", n_layers=4, scale=3.0)
    recorder = ReadingRecorder(lm, 2)
    prefix.condition_letter_logprobs(lm, ["x y Answer:", "z Answer:"], [Condition(INTACT, 0)], observe=recorder)
    got = recorder.result(["a", "b"])
    assert got.entropy_linear is None
    table = criteria.criteria_table(got, "m")
    assert table["delta_h_linear"].isna().all() and criteria.present(table) == (*criteria.CRITERIA, criteria.ENTRODROP)
    assert readings.frames_readings(*readings.readings_frames(got)).entropy_linear is None
    assert "delta_h_linear" not in set(pruning.drop_sets(table, got, "m", [ALL_BLOCKS])["criterion"])


def test_drop_rows_reach_the_full_paper_table_but_not_the_headline():
    from entropy_lens.verdicts import registry
    from entropy_lens.verdicts import table as paper

    rows, drops = scenario({"keeps": 0.95, "loses": 0.2}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=200, seed=0)
    expected = paper.Expected(datasets={"mmlu": ["m"]}, layer_skip=["m"], families={"m": "qwen"})
    table = paper.paper_table(drop_scores=scores, expected=expected)
    drop_name = registry.BY_ID["drop_sets"].name
    assert (table["claim"] == drop_name).sum() == len(scores)
    assert table.loc[table["claim"] == drop_name, "split"].str.match(r"k=\d+ \(\d+% of blocks\)").all()
    top = paper.headline(table)
    assert not top.empty and drop_name not in set(top["claim"])


def test_the_readme_answer_gains_one_line_on_which_blocks_to_drop(tmp_path):
    import importlib.util
    from pathlib import Path

    from entropy_lens.verdicts import table as paper

    script = Path(__file__).resolve().parents[1] / "scripts" / "readme_answer.py"
    spec = importlib.util.spec_from_file_location("readme_answer", script)
    readme_answer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_answer)
    rows, drops = scenario({"keeps": 0.95, "loses": 0.2}, random_keep=0.6)
    scores = drop_scores.drop_scores(rows, drops, N_LAYERS, n_boot=200, seed=0)
    expected = paper.Expected(datasets={"mmlu": ["m"]}, layer_skip=["m"], families={"m": "qwen"})
    (tmp_path / "tables").mkdir()
    top = paper.headline(paper.paper_table(drop_scores=scores, expected=expected))
    top.to_csv(tmp_path / "tables" / "verdicts.csv")
    scores.to_csv(tmp_path / "tables" / "skip_drop_scores.csv", index=False)
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- answer:study begin -->\nold\n<!-- answer:study end -->\n", encoding="utf-8")
    assert readme_answer.main([str(tmp_path), "study", "--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert "Which blocks of m can be dropped (60 questions, calibrated letters" in text and "old" not in text
    assert "drop keeps's blocks 1,2" in text and "skip_drop_scores.md" in text
