"""Pruning criteria read off the sweep's intact pass, checked against plain hooks; their Spearman with the cost."""

import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from tiny import tiny_model

from entropy_lens.lens.choices import rendered_queries
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping import criteria, prefix, pruning, readings
from entropy_lens.skipping import exit as early
from entropy_lens.skipping.conditions import ALL_BLOCKS, NO_FINAL, Condition, sweep_conditions
from entropy_lens.skipping.readings import BlockReadings
from entropy_lens.skipping.recorder import ReadingRecorder

PROMPTS = [
    "once upon a time there was a little girl who loved to play in the park Answer:",
    "what is the capital of france Answer:",
    "the cat Answer:",
    "how many words are in the story one two three four five Answer:",
]
N_LAYERS = 4


@pytest.fixture(scope="module", params=["llama", "gemma2"])
def lm(request):
    return tiny_model(request.param, n_layers=N_LAYERS, scale=3.0)


def recorded(lm, batch_size: int) -> BlockReadings:
    recorder = ReadingRecorder(lm, len(PROMPTS))
    prefix.condition_letter_logprobs(
        lm, PROMPTS, [Condition("intact", 0), Condition("single", 1, (1,))], batch_size=batch_size, observe=recorder
    )
    return recorder.result([f"q{i}" for i in range(len(PROMPTS))])


@torch.inference_mode()
def hooked_states(lm, ids: list[int]) -> list[np.ndarray]:
    """The ``L + 1`` residual states ``[S, d]`` of one unpadded prompt: each block's input from a plain forward
    pre-hook, and the last block's output from a plain forward hook (written apart from the project's hooks)."""
    states: dict[int, torch.Tensor] = {}

    def keep_input(index):
        def hook(_module, args, kwargs):
            states[index] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        return hook

    def keep_output(_module, _args, output):
        states[len(lm.blocks)] = (output[0] if isinstance(output, tuple) else output).detach().clone()

    handles = [b.register_forward_pre_hook(keep_input(i), with_kwargs=True) for i, b in enumerate(lm.blocks)]
    handles.append(lm.blocks[-1].register_forward_hook(keep_output))
    try:
        lm.model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return [states[i][0].float().numpy() for i in range(len(lm.blocks) + 1)]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_block_influence_and_angular_distance_match_plain_hooks(lm):
    got = recorded(lm, batch_size=3)  # padded batches: the mask must keep padding out of the token mean
    queries, _ = rendered_queries(lm, PROMPTS, LETTERS, chat_template=False)
    assert got.token_cos.shape == (len(PROMPTS), N_LAYERS)
    for row, query in enumerate(queries):
        states = hooked_states(lm, list(query.input_ids))
        token_cos = [cosine(states[i], states[i + 1]).mean() for i in range(N_LAYERS)]
        np.testing.assert_allclose(got.token_cos[row], token_cos, atol=1e-5)
        angle = [math.acos(np.clip(cosine(states[i][-1], states[i + 1][-1]), -1, 1)) / math.pi for i in range(N_LAYERS)]
        scores = criteria.question_scores(got)
        np.testing.assert_allclose(scores[criteria.ANGULAR][row], angle, atol=1e-4)
        np.testing.assert_allclose(scores[criteria.BLOCK_INFLUENCE][row], 1 - np.array(token_cos), atol=1e-5)
        span = math.acos(np.clip(cosine(states[1][-1], states[4][-1]), -1, 1)) / math.pi
        assert got.angle[row, 1, 4] == pytest.approx(span, abs=1e-4)
    # the blocks really turn the stream: a criterion equal to 0 everywhere would pass trivially
    assert (1 - got.token_cos).min() > 1e-3


def numpy_bucket_entropy(states: np.ndarray, bins: int = 20) -> float:
    """EntroDrop's bucket estimate written apart: per dimension, NumPy's histogram of the tokens' values over
    ``bins`` equal-width buckets between their minimum and maximum, its Shannon entropy, summed (nats)."""
    total = 0.0
    for column in states.T:  # [S] values of one dimension
        counts, _ = np.histogram(column, bins=bins, range=(column.min(), column.max()))
        share = counts[counts > 0] / column.size
        total -= float((share * np.log(share)).sum())
    return total


def test_entrodrop_hidden_entropy_matches_a_numpy_histogram_per_dimension(lm):
    got = recorded(lm, batch_size=3)  # padded batches: padding must stay out of the buckets
    queries, _ = rendered_queries(lm, PROMPTS, LETTERS, chat_template=False)
    assert got.hidden_entropy.shape == (len(PROMPTS), N_LAYERS + 1)
    for row, query in enumerate(queries):
        states = hooked_states(lm, list(query.input_ids))
        expected = [numpy_bucket_entropy(state) for state in states]
        np.testing.assert_allclose(got.hidden_entropy[row], expected, rtol=1e-3, atol=0.3)
    scores = criteria.question_scores(got)[criteria.ENTRODROP]
    finite = np.isfinite(scores)
    np.testing.assert_allclose(scores[finite], np.diff(got.hidden_entropy, axis=1)[finite])


def test_entrodrop_never_prunes_the_early_entropy_decrease_stage():
    hidden = np.array([[9.0, 7.0, 5.0, 6.0, 6.5, 8.0], [9.5, 6.5, 5.5, 5.8, 7.0, 7.5]])  # minimum at x_2
    scores = criteria.entrodrop_scores(hidden, 2, 5)
    assert np.isinf(scores[:, :2]).all() and np.isfinite(scores[:, 2:]).all()  # blocks 0, 1 lead down to x_2
    np.testing.assert_allclose(scores[:, 2:], np.diff(hidden, axis=1)[:, 2:])
    table = pd.DataFrame({"layer": range(5), "entrodrop": scores.mean(axis=0)})
    assert pruning.least_critical(table, criteria.ENTRODROP, 2, range(1, 5)) == (2, 3)  # least increase first
    assert np.isnan(criteria.entrodrop_scores(None, 2, 5)).all()


def test_last_position_reads_the_models_own_distribution(lm):
    got = recorded(lm, batch_size=2)
    queries, _ = rendered_queries(lm, PROMPTS, LETTERS, chat_template=False)
    intact = prefix.condition_letter_logprobs(lm, PROMPTS, [Condition("intact", 0)], batch_size=1)["intact"]
    np.testing.assert_allclose(got.letters[:, -1, :], intact, atol=1e-4)
    for row, query in enumerate(queries):
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([list(query.input_ids)]), use_cache=False).logits[:, -1]
        assert got.entropy[row, -1] == pytest.approx(float(shannon_entropy(logits)[0]), abs=1e-4)
    assert np.all((got.entropy >= 0) & (got.entropy <= math.log(lm.model.config.vocab_size) + 1e-5))


def test_readings_do_not_depend_on_the_batching(lm):
    one, three = recorded(lm, batch_size=1), recorded(lm, batch_size=3)
    for name in ("token_cos", "angle", "entropy", "letters"):
        np.testing.assert_allclose(getattr(one, name), getattr(three, name), atol=1e-4, err_msg=name)


def test_readings_round_trip_through_their_tables():
    got = recorded(tiny_model("llama", n_layers=N_LAYERS, scale=3.0), batch_size=2)
    frame, angles = readings.readings_frames(got)
    columns = [*readings.READING_COLUMNS, *readings.LINEAR_COLUMNS, readings.HIDDEN_COLUMN]
    assert list(frame.columns) == columns and len(frame) == len(PROMPTS) * (N_LAYERS + 1)
    back = readings.frames_readings(frame.sample(frac=1.0, random_state=0), angles)
    assert sorted(back.questions) == sorted(got.questions) and back.questions != got.questions  # really shuffled
    order = [back.questions.index(q) for q in got.questions]
    for name in ("token_cos", "angle", "entropy", "letters", "hidden_entropy"):
        np.testing.assert_allclose(getattr(back, name)[order], getattr(got, name), atol=1e-6, err_msg=name)
    with pytest.raises(ValueError, match=r"lacks columns \['angle'\]"):
        readings.frames_readings(frame, angles.drop(columns="angle"))


def test_linear_letters_are_the_translated_residual_through_the_models_own_head():
    """Written apart from the recorder: plain hooks for the residual, the translator as a matmul, then the HF
    model's own final norm and unembedding, log-softmax, gathered at the letters' token ids."""
    from test_drop_sets import linear_lens

    lm = tiny_model("llama", n_layers=N_LAYERS, scale=3.0)
    lens = linear_lens(lm)
    recorder = ReadingRecorder(lm, len(PROMPTS), translators=lens)
    prefix.condition_letter_logprobs(lm, PROMPTS, [Condition("intact", 0)], batch_size=3, observe=recorder)
    got = recorder.result([f"q{i}" for i in range(len(PROMPTS))])
    assert got.letters_linear.shape == (len(PROMPTS), N_LAYERS + 1, len(LETTERS))
    assert np.isnan(got.letters_linear[:, 0]).all() and np.isfinite(got.letters_linear[:, 1:]).all()
    queries, _ = rendered_queries(lm, PROMPTS, LETTERS, chat_template=False)
    letter_ids = lm.tokenizer.convert_tokens_to_ids(list(LETTERS))
    norm, head = lm.model.model.norm, lm.model.lm_head
    for row, query in enumerate(queries):
        states = hooked_states(lm, list(query.input_ids))
        for block in range(N_LAYERS):
            mapped = torch.from_numpy(states[block + 1][-1]) @ lens.weight[block] + lens.bias[block]  # [d]
            with torch.inference_mode():
                logp = torch.log_softmax(head(norm(mapped)).float(), dim=-1)  # [V]
            np.testing.assert_allclose(got.letters_linear[row, block + 1], logp[letter_ids].numpy(), atol=1e-4)
    np.testing.assert_allclose(got.letters_linear[:, -1], got.letters[:, -1], atol=1e-5)  # the model's own answer
    assert not np.allclose(got.letters_linear[:, 1:-1], got.letters[:, 1:-1], atol=1e-2)  # the translators matter
    frame, angles = readings.readings_frames(got)
    back = readings.frames_readings(frame, angles)
    np.testing.assert_allclose(back.letters_linear, got.letters_linear, atol=1e-6)
    older = readings.frames_readings(frame.drop(columns=list(readings.LINEAR_LETTER_COLUMNS)), angles)
    assert older.letters_linear is None and older.entropy_linear is not None  # a table from before: no letters


def test_recorder_refuses_unseen_prompts_and_wrong_ids():
    lm = tiny_model("llama", n_layers=N_LAYERS)
    recorder = ReadingRecorder(lm, 3)
    with pytest.raises(ValueError, match=r"prompts \[0, 1, 2\] were never recorded"):
        recorder.result(["a", "b", "c"])
    with pytest.raises(ValueError, match="got 2 question ids for 3 recorded prompts"):
        recorder.result(["a", "b"])


# --------------------------------------------------------------------------- criteria from constructed readings


def constructed(n: int = 6, n_layers: int = 8, seed: int = 0) -> BlockReadings:
    rng = np.random.default_rng(seed)
    positions = n_layers + 1
    angle = rng.uniform(0.2, 0.6, size=(n, positions, positions))
    angle = (angle + angle.transpose(0, 2, 1)) / 2
    angle[:, np.arange(positions), np.arange(positions)] = 0.0
    return BlockReadings(
        tuple(f"q{i}" for i in range(n)),
        rng.uniform(0.5, 0.99, size=(n, n_layers)),
        angle,
        np.cumsum(rng.normal(0, 1, size=(n, positions)), axis=1),
        rng.normal(-3, 1, size=(n, positions, len(LETTERS))),
    )


def test_criteria_table_has_one_row_per_block_with_each_criterion():
    got = constructed()
    table = criteria.criteria_table(got, "m")
    assert list(table.columns) == list(criteria.CRITERIA_COLUMNS) and len(table) == 8
    np.testing.assert_allclose(table["block_influence"], 1 - got.token_cos.mean(0))
    np.testing.assert_allclose(table["delta_h"], (got.entropy[:, 1:] - got.entropy[:, :-1]).mean(0))
    np.testing.assert_allclose(table["angular"], [got.angle[:, i, i + 1].mean() for i in range(8)])
    assert table["position"].tolist() == list(range(7, -1, -1))


def test_gromov_choice_takes_the_closest_contiguous_span_within_the_pool():
    got = constructed()
    angle = got.angle.copy()
    angle[:, 3, 6] = angle[:, 6, 3] = 0.01  # blocks 3, 4, 5: input and output nearly aligned
    angle[:, 5, 8] = angle[:, 8, 5] = 0.0  # 5, 6, 7 are closer still but hold the final block
    planted = BlockReadings(got.questions, got.token_cos, angle, got.entropy, got.letters)
    assert criteria.gromov_choice(planted, 3, range(1, 8)) == (5, 6, 7)
    assert criteria.gromov_choice(planted, 3, range(1, 7)) == (3, 4, 5)
    with pytest.raises(ValueError, match="no 3 consecutive blocks"):
        criteria.gromov_choice(planted, 3, [1, 2, 4, 5])
    with pytest.raises(ValueError, match="exceeds the model's 8"):
        criteria.contiguous_angles(planted, 9)


def test_criterion_ranks_put_the_most_critical_block_first():
    table = criteria.criteria_table(constructed(), "m")
    ranks = criteria.criterion_ranks(table, [1, 2, 3])
    assert ranks.loc["position"].tolist() == [1, 2, 3]


# --------------------------------------------------------------------------- which criterion predicts the cost


def test_spearman_sees_a_criterion_that_predicts_the_cost_and_one_that_contradicts_it():
    rng = np.random.default_rng(1)
    truth = np.linspace(0, 2, 20)
    score = truth + rng.normal(0, 0.3, size=(60, 20))
    cost = truth + rng.normal(0, 0.5, size=(60, 20))
    rho, low, high = criteria.paired_block_spearman(cost, score, n_boot=400, seed=0)
    assert rho > 0.8 and low > 0 and criteria.spearman_reading(low, high) == criteria.PREDICTS
    rho, low, high = criteria.paired_block_spearman(-cost, score, n_boot=400, seed=0)
    assert rho < -0.8 and high < 0 and criteria.spearman_reading(low, high) == criteria.CONTRARY
    with pytest.raises(ValueError, match="one shape"):
        criteria.paired_block_spearman(cost[:, :3], score)


def test_margins_name_a_best_criterion_only_where_it_separates():
    rng = np.random.default_rng(4)
    truth = np.linspace(0, 2, 20)
    cost = truth + rng.normal(0, 0.3, size=(60, 20))
    sharp, blurred, twin = (truth + rng.normal(0, s, size=(60, 20)) for s in (0.1, 3.0, 0.1))
    draws = {
        name: criteria.criterion_draws(cost, s, n_boot=400, seed=0)[1]
        for name, s in (("sharp", sharp), ("blurred", blurred))
    }
    got = criteria.margins(draws)
    assert got["sharp"][0] > 0 and got["blurred"][1] < 0
    draws["twin"] = criteria.criterion_draws(cost, twin, n_boot=400, seed=0)[1]
    got = criteria.margins(draws)
    assert got["sharp"][0] <= 0 <= got["sharp"][1]  # two equally good criteria: neither separates
    assert got["twin"][0] <= 0 <= got["twin"][1]


def test_planted_null_costs_shuffled_across_blocks_cover_zero():
    """A criterion that ranks the blocks perfectly for the true cost, read against costs with no block structure
    (each question's costs shuffled across blocks): the interval must cover 0 in at least 95% of draws (it is what
    no information looks like), blocks fixed."""
    rng = np.random.default_rng(2)
    truth = np.linspace(0, 2, 27)
    covered = []
    for draw in range(200):
        cost = truth + rng.normal(0, 0.5, size=(40, 27))
        score = truth + rng.normal(0, 0.3, size=(40, 27))
        _, low, high = criteria.paired_block_spearman(
            criteria.shuffled_blocks(cost, seed=draw), score, n_boot=200, seed=draw
        )
        covered.append(low <= 0 <= high)
    assert np.mean(covered) >= 0.95


def sweep_rows(cost: np.ndarray) -> pd.DataFrame:
    """Sweep score rows whose gold log-probability drops by ``cost[q, b]`` when block ``b`` is skipped."""
    n, n_layers = cost.shape
    rows = []
    for condition in sweep_conditions(n_layers):
        drop = cost[:, condition.layers[0]] if condition.layers else np.zeros(n)
        for measure in ("ll", "calibrated"):
            rows.append(
                pd.DataFrame(
                    {
                        "question": [f"q{i}" for i in range(n)],
                        "measure": measure,
                        "correct": (drop < 1.0).astype(np.int8),
                        "gold_logprob": -1.0 - drop,
                        "condition": condition.name,
                        "kind": condition.kind,
                        "k": condition.k,
                        "replicate": condition.replicate,
                        "layers": condition.layer_text,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_criteria_spearman_reads_each_criterion_against_the_sweep():
    got = constructed(n=30, n_layers=10, seed=3)
    bi = 1 - got.token_cos  # [N, L]: the cost follows Block Influence
    correct = sweep_rows(3 * bi)
    table = criteria.criteria_spearman(correct, got, "m", [ALL_BLOCKS, NO_FINAL], n_boot=300, seed=0)
    assert list(table.columns) == list(criteria.SPEARMAN_COLUMNS)
    assert len(table) == 2 * 2 * 2 * len(criteria.CRITERIA)
    logprob = table[(table["statistic"] == "gold_logprob") & (table["measure"] == "ll")].set_index(
        ["variant", "criterion"]
    )
    assert logprob.loc[(ALL_BLOCKS, "block_influence"), "rho"] == pytest.approx(1.0)
    assert logprob.loc[(ALL_BLOCKS, "block_influence"), "reading"] == criteria.PREDICTS
    assert logprob.loc[(NO_FINAL, "block_influence"), "n_blocks"] == 8
    assert (
        logprob.loc[(ALL_BLOCKS, "block_influence"), "null_low"]
        < 0
        < logprob.loc[(ALL_BLOCKS, "block_influence"), "null_high"]
    )
    costs = criteria.sweep_costs(correct, "ll", "gold_logprob", [1, 2])
    np.testing.assert_allclose(costs.to_numpy(), 3 * bi[:, [1, 2]])
    with pytest.raises(ValueError, match=r"lacks conditions \['12'\]"):
        criteria.sweep_costs(correct, "ll", "gold_logprob", [12])
    with pytest.raises(ValueError, match="statistic must be one of"):
        criteria.sweep_costs(correct, "ll", "loss", [1])


# --------------------------------------------------------------------------- the exit curve


def forming_answer(n: int = 12, n_layers: int = 6, forms_at: int = 3) -> tuple[BlockReadings, list[str]]:
    """Readings whose letters favour a wrong letter before position ``forms_at`` and the gold one from there,
    with the lens entropy falling by one nat per block from 6."""
    answers = [LETTERS[i % 4] for i in range(n)]
    letters = np.full((n, n_layers + 1, 4), -3.0)
    for q, answer in enumerate(answers):
        gold = LETTERS.index(answer)
        letters[q, :forms_at, (gold + 1) % 4] = -0.5
        letters[q, forms_at:, gold] = -0.5
    entropy = np.tile(6.0 - np.arange(n_layers + 1, dtype=float), (n, 1))
    base = constructed(n=n, n_layers=n_layers)
    return BlockReadings(base.questions, base.token_cos, base.angle, entropy, letters), answers


def test_exit_curve_shows_where_the_answer_forms():
    got, answers = forming_answer()
    curve = early.exit_curve(got, answers, ["base"] * len(answers), "m")
    assert list(curve.columns) == list(early.EXIT_COLUMNS) and len(curve) == 2 * 7
    raw = curve[curve["measure"] == "ll"].set_index("position")
    assert raw.loc[[0, 1, 2], "accuracy"].tolist() == [0.0, 0.0, 0.0]
    assert raw.loc[[3, 4, 5, 6], "accuracy"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert raw.loc[3, "gold_logprob"] > math.log(0.25) > raw.loc[2, "gold_logprob"]
    assert raw["entropy"].tolist() == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"answer 1 is 'E'"):
        early.exit_curve(got, ["A", "E", *answers[2:]], ["base"] * len(answers), "m")


def test_threshold_exit_trades_blocks_for_accuracy():
    got, answers = forming_answer()
    table = early.threshold_exit(got, answers, ["base"] * len(answers), "m", taus=[5.5, 3.5, 2.5, -1.0])
    raw = table[table["measure"] == "ll"].set_index("tau")
    # below 5.5 after one block (too early, wrong); below 3.5 after three (the answer has formed)
    assert raw.loc[5.5, ["mean_blocks", "accuracy"]].tolist() == [1.0, 0.0]
    assert raw.loc[3.5, ["mean_blocks", "accuracy"]].tolist() == [3.0, 1.0]
    assert raw.loc[-1.0, "mean_blocks"] == 6.0  # never below: the full model
    assert raw.loc[3.5, "fixed_accuracy"] == 1.0 and raw.loc[5.5, "fixed_accuracy"] == 0.0
    assert early.tau_grid(got.entropy).max() > got.entropy[:, 1:].max()


def with_linear(got: BlockReadings, answers: list[str], forms_at: int = 1) -> BlockReadings:
    """``got`` with a linear lens whose gold letter wins from position ``forms_at`` (a wrong one before) and whose
    entropy falls by two nats per block from 6 to 0; position 0 holds no reading (NaN), as the recorder writes."""
    n, positions = got.entropy.shape
    letters = np.full((n, positions, 4), -3.0)
    for q, answer in enumerate(answers):
        gold = LETTERS.index(answer)
        letters[q, :forms_at, (gold + 2) % 4] = -0.5
        letters[q, forms_at:, gold] = -0.5
    entropy = np.tile(np.clip(6.0 - 2.0 * np.arange(positions, dtype=float), 0.0, None), (n, 1))
    letters[:, 0], entropy[:, 0] = np.nan, np.nan
    return dataclasses.replace(got, entropy_linear=entropy, letters_linear=letters)


def test_exit_curve_reads_each_lens_from_its_first_position():
    logit, answers = forming_answer(forms_at=3)
    got = with_linear(logit, answers, forms_at=1)
    curve = early.exit_curve(got, answers, ["base"] * len(answers), "m")
    assert len(curve) == 2 * 7 + 2 * 6 and curve.notna().all().all()  # no row for the linear lens at 0
    by_lens = curve.set_index(["lens", "measure", "position"]).sort_index()
    for measure in early.MEASURES:
        assert by_lens.loc[("linear", measure), "accuracy"].tolist() == [1.0] * 6  # blocks 1..6: formed from 1
        assert by_lens.loc[("logit", measure), "accuracy"].tolist() == [0.0] * 3 + [1.0] * 4
    assert by_lens.loc[("linear", "ll"), "entropy"].tolist() == [4.0, 2.0, 0.0, 0.0, 0.0, 0.0]
    assert (
        by_lens.loc[("linear", "ll", 1), "gold_logprob"]
        > math.log(0.25)
        > by_lens.loc[("logit", "ll", 1), "gold_logprob"]
    )
    late = early.exit_curve(with_linear(logit, answers, forms_at=4), answers, ["base"] * len(answers), "m")
    late = late[(late["lens"] == "linear") & (late["measure"] == "ll")].set_index("position")
    assert (
        late.loc[[1, 2, 3], "accuracy"].tolist() == [0.0] * 3 and late.loc[[4, 5, 6], "accuracy"].tolist() == [1.0] * 3
    )


def test_without_a_linear_lens_the_exit_tables_hold_the_logit_lens_alone():
    logit, answers = forming_answer()
    styles = ["base"] * len(answers)
    assert set(early.exit_curve(logit, answers, styles, "m")["lens"]) == {"logit"}
    assert set(early.threshold_exit(logit, answers, styles, "m")["lens"]) == {"logit"}
    older = dataclasses.replace(with_linear(logit, answers), letters_linear=None)  # entropy only: a table from before
    assert set(early.exit_curve(older, answers, styles, "m")["lens"]) == {"logit"}


def test_the_linear_lens_exits_by_its_own_entropy():
    logit, answers = forming_answer(forms_at=3)
    got = with_linear(logit, answers, forms_at=1)
    table = early.threshold_exit(got, answers, ["base"] * len(answers), "m", taus=[5.5, 3.5, -10.0])
    raw = table[table["measure"] == "ll"].set_index(["lens", "tau"]).sort_index()
    # below 3.5 after three blocks through the logit lens (6 - p), after two through the linear lens (6 - 2p)
    assert raw.loc[("logit", 3.5), ["mean_blocks", "accuracy"]].tolist() == [3.0, 1.0]
    assert raw.loc[("linear", 3.5), ["mean_blocks", "accuracy"]].tolist() == [2.0, 1.0]
    # below 5.5 after one block through both: too early for the logit lens, formed already through the linear one
    assert raw.loc[("logit", 5.5), "accuracy"] == 0.0 and raw.loc[("linear", 5.5), "accuracy"] == 1.0
    assert raw.loc[("linear", -10.0), "mean_blocks"] == 6.0  # never below: the full model
    default = early.threshold_exit(got, answers, ["base"] * len(answers), "m")
    linear_taus = default.loc[default["lens"] == "linear", "tau"]
    assert linear_taus.min() == pytest.approx(0.0) and linear_taus.notna().all()  # its own entropies' grid


def test_pruning_figures_are_written(tmp_path):
    from entropy_lens.plots.pruning import plot_criteria, plot_exit_curve
    from entropy_lens.skipping import exit as early

    got, answers = forming_answer()
    table = criteria.criteria_table(got, "m")
    skip_map = pd.DataFrame(
        {"layer": range(6), "d_logprob": -np.arange(6.0), "d_logprob_low": -np.arange(6.0) - 1, "d_logprob_high": 0.0}
    )
    plot_criteria(skip_map, table, tmp_path / "criteria.png", title="m")
    plot_exit_curve(early.exit_curve(with_linear(got, answers), answers, ["base"] * 12, "m"), tmp_path / "exit.png")
    assert (tmp_path / "criteria.png").stat().st_size > 0 and (tmp_path / "exit.svg").is_file()
    plot_exit_curve(early.exit_curve(got, answers, ["base"] * 12, "m"), tmp_path / "logit.svg")
    svg, logit = ((tmp_path / f).read_text() for f in ("exit.svg", "logit.svg"))
    assert {"ll, logit", "calibrated, linear", "linear"} <= set(re.findall(r"<text[^>]*>([^<]*)</text>", svg))
    dashes = {
        f: set(re.findall(r"stroke-dasharray: ([0-9.,]+)", text)) for f, text in (("both", svg), ("logit", logit))
    }
    assert dashes["both"] - dashes["logit"]  # the linear lens drawn in a dash of its own
    with pytest.raises(ValueError, match=r"lacks columns \['block_influence'\]"):
        plot_criteria(skip_map, table.drop(columns="block_influence"), tmp_path / "x.png")


def test_skip_map_prints_which_criterion_predicts_the_cost_and_the_exit(tmp_path, capsys):
    from test_cli import _skip_map_csv

    from entropy_lens import cli

    _skip_map_csv(tmp_path)
    got = constructed(n=30, n_layers=16, seed=3)
    table = criteria.criteria_spearman(sweep_rows(3 * (1 - got.token_cos)), got, "m", [ALL_BLOCKS], n_boot=300)
    table.to_csv(tmp_path / "tables" / "skip_criteria_spearman.csv", index=False)
    forming, answers = forming_answer()
    curve = early.exit_curve(with_linear(forming, answers), answers, ["base"] * 12, "m")
    curve.to_csv(tmp_path / "tables" / "skip_exit.csv", index=False)
    assert cli.main(["skip-map", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "cost = drop of gold_logprob, all_blocks (15 blocks fixed, 30 questions resampled):" in printed
    section = printed.split("cost = drop of gold_logprob")[1]
    bi = next(line for line in section.splitlines() if line.strip().startswith("block_influence"))
    assert "+1.00" in bi and bi.endswith("predicts")
    assert "best: block_influence (its margin over the next best, paired: [+" in printed
    assert (
        "read through the logit lens, the answer's accuracy first reaches it (within its interval) after block 2 "
        "(3 of 6 blocks run); through the linear lens, after block 0 (1 of 6 blocks run)" in printed
    )
    from entropy_lens.skipping.pruning import drop_sets

    drop_sets(criteria.criteria_table(got, "m"), got, "m", [ALL_BLOCKS]).to_csv(
        tmp_path / "tables" / "skip_drop_sets.csv", index=False
    )
    assert cli.main(["skip-map", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "  all_blocks, k = 2: delta_h " in printed and "position 14,15; gromov_contiguous " in printed


# --------------------------------------------------------------------------- multi-block drop sets


def test_drop_sets_take_each_criterions_least_critical_blocks_and_gromovs_span():
    from entropy_lens.skipping import pruning

    got = constructed(n=6, n_layers=28, seed=5)
    table = criteria.criteria_table(got, "m")
    assert [pruning.drop_k(28, s) for s in pruning.DEFAULT_SHARES] == [3, 7]
    sets = pruning.drop_sets(table, got, "m", [ALL_BLOCKS, NO_FINAL]).set_index(["variant", "k", "criterion"])
    assert len(sets) == 2 * 2 * (len(criteria.CRITERIA) + 1)
    # position from the end: the deepest blocks go first; without the final block, the deepest before it
    assert sets.loc[(ALL_BLOCKS, 3, "position"), "layers"] == "25,26,27"
    assert sets.loc[(NO_FINAL, 3, "position"), "layers"] == "24,25,26"
    bi = table.set_index("layer").loc[1:27, "block_influence"].sort_values()
    assert sets.loc[(ALL_BLOCKS, 7, "block_influence"), "layers"] == ",".join(map(str, sorted(bi.index[:7])))
    span = [int(b) for b in sets.loc[(NO_FINAL, 7, "gromov_contiguous"), "layers"].split(",")]
    assert span == list(range(span[0], span[0] + 7)) and span[0] >= 1 and span[-1] <= 26
    shallow = constructed(n=4, n_layers=4)
    few = pruning.drop_sets(criteria.criteria_table(shallow, "m"), shallow, "m", [ALL_BLOCKS])
    assert few["k"].tolist() == [1] * 5  # 12% and 25% of 4 blocks both round to 1: listed once
    with pytest.raises(ValueError, match=r"share must lie in \(0, 1\)"):
        pruning.drop_k(28, 1.5)
    with pytest.raises(ValueError, match=r"k=30 must lie in 1\.\.27"):
        pruning.least_critical(table, "position", 30, range(1, 28))
