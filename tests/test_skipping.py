"""Layer skipping on tiny models of six architectures, skip conditions and the evaluation loop."""

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from tiny import ARCHS, N_LAYERS, tiny_model

from entropy_lens.answers import scoring
from entropy_lens.answers.letters import calibrate
from entropy_lens.core.checks import check_layers
from entropy_lens.model.batching import left_pad
from entropy_lens.model.generation import GenerationSettings, generate
from entropy_lens.model.hooks import capture_block_calls, record_residuals, run_blocks, skip_blocks
from entropy_lens.model.lens_model import find_lens_parts, wrap_model
from entropy_lens.skipping import conditions, criticality, evaluation, prefix
from entropy_lens.skipping.conditions import Condition
from entropy_lens.skipping.delta_h import mean_delta_h, protected_layers, select_layers, selections, top_block_shares
from entropy_lens.skipping.plan import SkipPlan
from entropy_lens.store import schema

PROMPTS = ["once upon a time there was a little girl", "the cat", "how many words are in the story"]
CHOICES = ["one", "two", "three", "four"]
# Modules whose outputs are a block's residual writes, across the six tiny architectures.
OUTPUT_PROJECTIONS = {"o_proj", "down_proj", "c_proj", "dense", "dense_4h_to_h"}
ATOL = 1e-5


@pytest.fixture(scope="module", params=ARCHS)
def lm(request):
    return tiny_model(request.param)


def encode(lm, texts):
    ids = [lm.tokenizer(t)["input_ids"] for t in texts]
    input_ids, mask = left_pad(ids, lm.tokenizer.pad_token_id, lm.device)
    return input_ids, mask, (mask.cumsum(-1) - 1).clamp_min(0)


@torch.inference_mode()
def logits_of(model, input_ids, mask, positions):
    """``[B, S, V]`` logits of a no-cache forward."""
    return model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False).logits


def without_block(lm, index):
    """A copy of the model with block ``index`` removed from its ModuleList and config."""
    model = copy.deepcopy(lm.model)
    blocks = find_lens_parts(model)[0]
    del blocks[index]
    model.config.num_hidden_layers -= 1
    if getattr(model.config, "layer_types", None) is not None:
        model.config.layer_types = [t for i, t in enumerate(model.config.layer_types) if i != index]
    assert len(blocks) == N_LAYERS - 1
    return model


def word_scorer(lm, prompts):
    """Log-probabilities of four choice words at the last prompt position, ``[N, 4]``."""
    input_ids, mask, positions = encode(lm, prompts)
    logits = logits_of(lm.model, input_ids, mask, positions)[:, -1].float()
    choice_ids = lm.tokenizer.convert_tokens_to_ids(CHOICES)
    return torch.log_softmax(logits[:, choice_ids], dim=-1).numpy()


# --------------------------------------------------------------------------- skipping


def test_skipping_an_identity_block_changes_nothing(lm):
    model = copy.deepcopy(lm.model)
    lm_zero = wrap_model(model, lm.tokenizer, name=lm.name)
    for name, module in lm_zero.blocks[1].named_modules():
        if name.rsplit(".", 1)[-1] in OUTPUT_PROJECTIONS:
            for param in module.parameters(recurse=False):
                param.data.zero_()
    batch = encode(lm_zero, PROMPTS)
    with record_residuals(lm_zero) as slots:
        intact = logits_of(lm_zero.model, *batch)
        before = [s.clone() for s in slots]
    torch.testing.assert_close(before[1], before[0], rtol=0, atol=1e-6)  # the block really adds nothing
    with skip_blocks(lm_zero, [1]):
        skipped = logits_of(lm_zero.model, *batch)
    torch.testing.assert_close(skipped, intact, rtol=0, atol=ATOL)
    with skip_blocks(lm_zero, [0]):  # a non-identity block does matter
        assert (logits_of(lm_zero.model, *batch) - intact).abs().max() > 1e-3


@pytest.mark.parametrize("layer", range(N_LAYERS))
def test_skip_equals_model_with_block_deleted(lm, layer):
    batch = encode(lm, PROMPTS)
    expected = logits_of(without_block(lm, layer), *batch)
    with skip_blocks(lm, [layer]) as skipped:
        got = logits_of(lm.model, *batch)
    assert skipped == (layer,)
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    assert (got - logits_of(lm.model, *batch)).abs().max() > 1e-3


def test_skipped_block_output_is_its_input_for_other_hooks(lm):
    batch = encode(lm, PROMPTS)
    with record_residuals(lm) as slots, skip_blocks(lm, [1]), torch.inference_mode():
        lm.model(input_ids=batch[0], attention_mask=batch[1], position_ids=batch[2], use_cache=False)
        torch.testing.assert_close(slots[1], slots[0], rtol=0, atol=0)
        assert (slots[2] - slots[1]).abs().max() > 1e-4


def greedy_run(lm, ids, steps):
    """Logits and alive flags of every step of KV-cached greedy generation."""
    seen = []
    tokens = generate(
        lm,
        ids,
        GenerationSettings(max_new_tokens=steps),
        lambda _t, _r, logits, alive: seen.append((logits.clone(), alive.clone())),
    )
    return tokens, seen


@pytest.mark.parametrize("layers", [[0], [1], [0, 2]])
def test_cached_generation_under_skip_matches_recomputation(lm, layers):
    ids = [lm.tokenizer(p)["input_ids"] for p in PROMPTS]
    steps = 7  # longer than the tiny Gemma sliding window of 4
    with skip_blocks(lm, layers):
        tokens, seen = greedy_run(lm, ids, steps)
        for step, (logits, alive) in enumerate(seen):
            prefixes = [row + tokens[i, :step].tolist() for i, row in enumerate(ids)]
            input_ids, mask = left_pad(prefixes, lm.tokenizer.pad_token_id, lm.device)
            positions = (mask.cumsum(-1) - 1).clamp_min(0)
            fresh = logits_of(lm.model, input_ids, mask, positions)[:, -1].float()
            torch.testing.assert_close(logits[alive], fresh[alive], rtol=0, atol=ATOL)
    _, intact = greedy_run(lm, ids, 1)
    assert (intact[0][0] - seen[0][0]).abs().max() > 1e-3


def test_model_unchanged_after_context_and_after_error(lm):
    batch = encode(lm, PROMPTS)
    before = logits_of(lm.model, *batch)
    with skip_blocks(lm, [0, 2]):
        assert (logits_of(lm.model, *batch) - before).abs().max() > 1e-3
    torch.testing.assert_close(logits_of(lm.model, *batch), before, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="boom"), skip_blocks(lm, [1]):
        raise RuntimeError("boom")
    torch.testing.assert_close(logits_of(lm.model, *batch), before, rtol=0, atol=0)
    assert all(not block._forward_hooks for block in lm.blocks)


def test_empty_skip_is_a_no_op(lm):
    batch = encode(lm, PROMPTS)
    before = logits_of(lm.model, *batch)
    with skip_blocks(lm, []) as skipped:
        torch.testing.assert_close(logits_of(lm.model, *batch), before, rtol=0, atol=0)
    assert skipped == ()


@pytest.mark.parametrize(
    ("layers", "error", "message"),
    [
        ([3], ValueError, r"layer 3 is out of range: the model has 3 blocks, valid 0\.\.2"),
        ([-1], ValueError, r"layer -1 is out of range.*valid 0\.\.2"),
        ([1, 1], ValueError, r"layer 1 is listed twice"),
        ([1.5], TypeError, r"layer index must be an integer, got 1\.5"),
        ([True], TypeError, r"layer index must be an integer, got True"),
    ],
)
def test_bad_layer_indices_are_refused(layers, error, message):
    lm = tiny_model("llama")
    with pytest.raises(error, match=message), skip_blocks(lm, [0, *layers]):
        pass
    assert all(not block._forward_hooks for block in lm.blocks)


def test_numpy_integer_indices_are_accepted():
    assert check_layers(np.array([2, 0]), 3) == [2, 0]


# --------------------------------------------------------------------------- selection

DELTA_H = np.array([math.nan, 0.5, -1.0, 2.0, -0.2, 0.1, 0.5])


@pytest.mark.parametrize(
    ("kind", "k", "variant", "expected"),
    [
        ("expansion", 1, "all_blocks", [3]),
        ("expansion", 2, "all_blocks", [1, 3]),  # tie 0.5 at layers 1 and 6: the lower layer wins
        ("expansion", 3, "all_blocks", [1, 3, 6]),
        ("expansion", 3, "no_final", [1, 3, 5]),  # the final block 6 is not eligible
        ("pruning", 1, "all_blocks", [2]),
        ("pruning", 2, "all_blocks", [2, 4]),
        ("pruning", 6, "all_blocks", [1, 2, 3, 4, 5, 6]),
        ("pruning", 5, "no_final", [1, 2, 3, 4, 5]),
    ],
)
def test_select_layers_on_constructed_profile(kind, k, variant, expected):
    assert select_layers(DELTA_H, k, kind, variant) == expected


def test_select_layers_never_picks_layer_zero_and_checks_arguments():
    with pytest.raises(ValueError, match="k=7 exceeds the 6 candidate layers"):
        select_layers(DELTA_H, 7, "pruning")
    with pytest.raises(ValueError, match="k=6 exceeds the 5 candidate layers"):
        select_layers(DELTA_H, 6, "pruning", "no_final")
    with pytest.raises(ValueError, match="kind must be one of"):
        select_layers(DELTA_H, 1, "shrink")
    with pytest.raises(ValueError, match="variant must be one of"):
        select_layers(DELTA_H, 1, "expansion", "middle")
    with pytest.raises(ValueError, match="k must be a positive integer"):
        select_layers(DELTA_H, 0, "expansion")
    with pytest.raises(ValueError, match=r"1-D array \[L\]"):
        select_layers(DELTA_H[None], 1, "expansion")


def test_excluding_the_final_block_changes_the_expansion_block_when_it_rises_most():
    delta_h = np.array([math.nan, 0.3, 0.8, -0.5, 0.1, 1.5])  # the final block flattens the output most
    chosen = {(s.variant, s.k): s for s in selections(delta_h, [1, 2])}
    assert chosen[("all_blocks", 1)].expansion == (5,) and chosen[("no_final", 1)].expansion == (2,)
    assert chosen[("all_blocks", 2)].expansion == (2, 5) and chosen[("no_final", 2)].expansion == (1, 2)
    assert chosen[("all_blocks", 1)].pruning == chosen[("no_final", 1)].pruning == (3,)
    assert len(selections(delta_h, [5])) == 1  # 5 blocks exceed the no_final pool: left out


def test_top_block_shares_measure_how_stable_the_choice_is():
    rng = np.random.default_rng(0)
    clear = np.column_stack(
        [np.full(40, np.nan), rng.normal(0, 0.1, (40, 2)), rng.normal(2, 0.1, 40), rng.normal(0, 0.1, 40)]
    )
    shares = top_block_shares(clear, "all_blocks", n_boot=300, seed=0)
    top = shares[(shares["kind"] == "expansion") & shares["chosen"]]
    assert top["layer"].tolist() == [3] and top["share"].item() == 1.0
    assert shares.groupby("kind")["share"].sum().round(6).eq(1.0).all()
    tied = np.column_stack([np.full(40, np.nan), rng.normal(1, 1.0, (40, 4))])  # no block stands out
    shares = top_block_shares(tied, "all_blocks", n_boot=300, seed=0)
    assert shares.loc[shares["kind"] == "expansion", "share"].max() < 0.8
    with pytest.raises(ValueError, match="no calibration question has a Delta H"):
        top_block_shares(np.full((3, 4), np.nan), "all_blocks", n_boot=10, seed=0)


def profile_dataset(entropy):
    n_prompts, n_tokens, n_layers = entropy.shape
    return xr.Dataset(
        {schema.ENTROPY: ((schema.PROMPT, schema.TOKEN, schema.LAYER), entropy.astype(np.float32))},
        coords={
            schema.PROMPT: [f"p{i}" for i in range(n_prompts)],
            schema.TOKEN: np.arange(n_tokens),
            schema.LAYER: np.arange(n_layers),
        },
    )


def test_mean_delta_h_ignores_masked_slots():
    entropy = np.array(
        [
            [[4.0, 5.0, 3.0], [4.0, 6.0, 2.0]],
            [[3.0, 3.0, 3.0], [np.nan, np.nan, np.nan]],  # a stopped sequence's masked slot
        ]
    )
    got = mean_delta_h(profile_dataset(entropy))
    assert math.isnan(got[0])
    np.testing.assert_allclose(got[1:], [(1 + 2 + 0) / 3, (-2 - 4 + 0) / 3])


def test_mean_delta_h_on_one_model_of_a_combined_store():
    entropy = np.array([[[1.0, 2.0, 4.0, np.nan]]])  # the model has 3 layers, padded to 4
    ds = profile_dataset(entropy).expand_dims({schema.MODEL: ["m"]})
    ds = ds.assign_coords({schema.N_LAYERS: (schema.MODEL, np.array([3], np.int32))})
    with pytest.raises(ValueError, match="select one model first"):
        mean_delta_h(ds)
    np.testing.assert_allclose(mean_delta_h(ds.sel(model="m")), [np.nan, 1.0, 2.0])
    with pytest.raises(ValueError, match="no unmasked token slot"):
        mean_delta_h(profile_dataset(np.full((1, 1, 3), np.nan)))


def test_random_draws_give_each_question_a_set_of_each_variants_pool():
    first = conditions.random_draws(400, 30, 2, seed=1)
    assert first == conditions.random_draws(400, 30, 2, seed=1) and first != conditions.random_draws(400, 30, 2, 2)
    every = first["all_blocks"]
    assert len(every) == 400 and all(len(set(s)) == 2 and list(s) == sorted(s) and 0 not in s for s in every)
    assert any(29 in s for s in every) and not any(29 in s for s in first["no_final"])
    kept = [a == b for a, b in zip(every, first["no_final"], strict=True)]
    assert all(k == (29 not in a) for k, a in zip(kept, every, strict=True))  # redrawn only where the final was hit
    assert all(conditions.in_variant(s, 30, "no_final") for s in first["no_final"])
    # uniform over the pool: every block drawn about equally often (400 x 2 draws over 29 blocks)
    counts = np.bincount([b for s in every for b in s], minlength=30)[1:]
    assert counts.min() > 10 and counts.max() < 50
    assert set(conditions.random_draws(5, 3, 2, seed=0)) == {"all_blocks"}  # no_final pool {1}: no pair
    with pytest.raises(ValueError, match="k=3 exceeds the 2 candidate layers"):
        conditions.random_draws(4, 3, 3, seed=0)
    with pytest.raises(ValueError, match="has no eligible block"):
        conditions.eligible_layers(1)


def test_protected_layers_marks_expansion_phases_json_safe():
    delta_h = np.array([math.nan, 0.5, 0.25, -1.0, 2.0, -0.2, 0.0])
    guide = protected_layers(delta_h)
    assert guide["protect"] == [0, 1, 2, 4]
    assert guide["phases"] == [
        {"start": 1, "end": 2, "total_increase": 0.75},
        {"start": 4, "end": 4, "total_increase": 2.0},
    ]
    assert guide["largest_expansion_layer"] == 4
    assert guide["pruning_candidates"] == [3, 5, 6]
    assert guide["delta_h"][0] is None
    assert json.loads(json.dumps(guide, allow_nan=False)) == guide
    strict = protected_layers(delta_h, min_increase=0.3, protect_undefined=False)
    assert strict["protect"] == [1, 4]
    assert strict["pruning_candidates"] == [3, 5, 6, 2]
    with pytest.raises(ValueError, match="min_increase must be a finite number >= 0"):
        protected_layers(delta_h, min_increase=-1.0)


# --------------------------------------------------------------------------- evaluation


def test_conditions_have_names_that_are_never_parsed_back():
    delta_h = np.array([math.nan, 0.5, -1.0, 2.0, -0.2, 0.1, 0.5])
    sweep = conditions.sweep_conditions(len(delta_h))
    assert [c.name for c in sweep] == ["intact", *(f"skip_{layer}" for layer in range(7))]
    chosen = selections(delta_h, [1, 2])
    made = conditions.selected_conditions(chosen)
    # k = 1: blocks 3 (expansion) and 2 (pruning), the sweep's own conditions; k = 2: (1, 3) and (2, 4)
    assert [c.name for c in made] == ["skip_3", "skip_2", "expansion_k2_1-3", "pruning_k2_2-4"]
    assert all(Condition.from_dict(json.loads(json.dumps(c.to_dict()))) == c for c in made)
    linear = selections(-delta_h, [1, 2], lens="linear")  # the linear lens swaps them: nothing scored twice
    assert conditions.selected_conditions(chosen + linear) == made
    assert conditions.random_name(2, "no_final") == "random_k2_no_final"
    with pytest.raises(ValueError, match="needs k=2 layers"):
        Condition("random", 2, (1,))
    with pytest.raises(ValueError, match="needs k=2 layers"):
        Condition("single", 2, (1, 2))
    with pytest.raises(ValueError, match="kind must be one of"):
        Condition("shrink", 1, (1,))
    with pytest.raises(ValueError, match="hold sets of another size"):
        conditions.Draws("random_k2_all_blocks", "random", 2, ((1, 2), (3,)))
    with pytest.raises(ValueError, match="lens must be one of"):
        conditions.Selection("all_blocks", 1, (1,), (2,), lens="tuned")


def test_skip_plan_round_trips_and_names_what_to_profile():
    delta_h = np.array([math.nan, 0.5, -1.0, 2.0, -0.2, 0.1, 0.5])
    chosen = selections(delta_h, [1, 2]) + selections(delta_h[::-1].copy(), [1], lens="linear")
    plan = SkipPlan("m", 7, tuple(delta_h), tuple(chosen), 8, tuple(delta_h[::-1]))
    back = SkipPlan.from_dict(json.loads(json.dumps(plan.to_dict(), allow_nan=False)))
    assert back == plan or back.to_dict() == plan.to_dict()
    assert math.isnan(back.delta_h[0]) and back.lenses == ("logit", "linear")
    names = [c.name for c in plan.profiled()]
    assert names[:3] == ["intact", "skip_3", "skip_2"] and {"expansion_k2_1-3", "pruning_k2_2-4"} <= set(names)
    assert len(names) == len(set(names))  # each selected block once, whichever lens chose it
    assert len(plan.sweep) == 8


def test_paired_conditions_score_the_sweep_the_selections_and_one_random_block_per_question():
    delta_h = np.array([math.nan, 0.5, -1.0, 2.0, -0.2, 0.1, 0.5])
    plan = SkipPlan("m", 7, tuple(delta_h), tuple(selections(delta_h, [1, 2])), 8)
    ids = [f"q{i}" for i in range(10)]
    made = evaluation.paired_conditions(
        plan, ids, sweep={"q0", "q1"}, sets={"q0", "q1", "q2"}, variants=["all_blocks", "no_final"], seed=0
    )
    by = {c.name: c for c in made}
    assert by["skip_5"].layers[:3] == ((5,), (5,), None)  # the sweep's block: its questions only
    assert all(v == (3,) for v in by["skip_3"].layers)  # a selected block: every question
    assert by["expansion_k2_1-3"].layers[:4] == ((1, 3),) * 3 + (None,)  # the sets: the set questions
    assert all(v is not None for v in by["random_k1_all_blocks"].layers)
    assert [v is not None for v in by["random_k2_no_final"].layers] == [True] * 3 + [False] * 7
    assert evaluation.set_question_ids(ids, 3, 0) == [q for q in ids if q in evaluation.question_order(ids, 0)[:3]]


def test_shared_prefix_scores_draws_per_question_as_each_alone(lm):
    """A condition whose blocks differ per question (and leaves some out) scores each question as that
    question's skip scored alone: the sub-batches rerun from their own rows of the recorded calls."""
    draws = conditions.Draws("random_k1_all_blocks", "random", 1, ((1,), (2,), None, (1,), (0,)))
    fixed = Condition("expansion", 2, (1, 2))
    got = prefix.condition_letter_logprobs(lm, MMLU_PROMPTS, [fixed, draws], batch_size=5)
    assert np.isnan(got[draws.name][2]).all() and np.isfinite(got[draws.name][[0, 1, 3, 4]]).all()
    for row, layers in enumerate(draws.layers):
        if layers is None:
            continue
        with skip_blocks(lm, layers):
            want = scoring.letter_logprobs(lm, [MMLU_PROMPTS[row]], batch_size=1)
        np.testing.assert_allclose(got[draws.name][row], want[0], atol=ATOL, err_msg=f"row {row}")


def test_score_conditions_scores_each_condition_on_one_model():
    lm = tiny_model("qwen2")
    prompts = PROMPTS * 2
    truth = word_scorer(lm, prompts).argmax(1)
    answers = ["ABCD"[a] for a in truth[:3]] + [int((a + 1) % 4) for a in truth[3:]]  # 3 of 6 right
    chosen = [Condition("intact", 0), Condition("pruning", 1, (1,)), Condition("random", 2, (0, 2))]
    calls = []

    def score(model):
        calls.append(model)
        scores = word_scorer(model, prompts)
        return {"raw": scores, "shifted": scores + np.array([0.0, 0.0, 0.0, 50.0])}  # always D

    correct = evaluation.score_conditions(lm, chosen, score, answers, questions=[f"q{i}" for i in range(6)])
    assert len(calls) == 3 and all(m is lm for m in calls)
    assert list(correct.columns) == list(conditions.CORRECT_COLUMNS) and len(correct) == 3 * 2 * 6
    table = criticality.condition_table(correct).set_index(["measure", "condition"])
    assert table.loc[("raw", "intact"), "accuracy"] == 0.5
    assert table.loc[("raw", "random_k2_r0"), "layers"] == "0,2" and table.loc[("raw", "random_k2_r0"), "k"] == 2
    assert (table["chance"] == 0.25).all() and (table["n"] == 6).all()
    expected = prefix.answer_indices(answers, 4)
    for condition in chosen:
        with skip_blocks(lm, condition.layers):
            acc = float((word_scorer(lm, prompts).argmax(1) == expected).mean())
        assert table.loc[("raw", condition.name), "accuracy"] == acc
        assert table.loc[("shifted", condition.name), "accuracy"] == float((expected == 3).mean())
    assert (table["ci_low"] <= table["accuracy"]).all() and (table["accuracy"] <= table["ci_high"]).all()
    assert all(not block._forward_hooks for block in lm.blocks)


def test_score_conditions_checks_inputs_before_scoring():
    lm = tiny_model("gpt2")

    def never(_lm):
        raise AssertionError("scored before the inputs were checked")

    bad = [Condition("intact", 0), Condition("pruning", 1, (9,))]
    with pytest.raises(ValueError, match="condition 'pruning_k1': layer 9 is out of range"):
        evaluation.score_conditions(lm, bad, never, [0, 1, 2])
    with pytest.raises(ValueError, match="need one question id per answer"):
        evaluation.score_conditions(lm, bad[:1], never, [0], questions=["a", "b"])
    with pytest.raises(ValueError, match="answer 1 is 'E'"):
        evaluation.score_conditions(lm, bad[:1], lambda m: {"x": word_scorer(m, PROMPTS)}, ["A", "E", "B"])
    with pytest.raises(ValueError, match=r"scorer returned shape \(3,\)"):
        evaluation.score_conditions(lm, bad[:1], lambda m: {"x": np.zeros(3)}, [0, 1, 2])


# --------------------------------------------------------------------------- shared prefix

MMLU_PROMPTS = [
    "once upon a time there was a little girl who loved to play in the park Answer:",
    "what is the capital of france Answer:",
    "how many words are in the story one two three four five Answer:",
    "the cat Answer:",
    "what is the main idea of the story A B C D Answer:",
]
SHARED_CONDITIONS = [
    Condition("intact", 0),
    Condition("expansion", 1, (1,)),
    Condition("pruning", 1, (2,)),
    Condition("random", 1, (0,)),
    Condition("random", 2, (0, 2), replicate=1),
    Condition("expansion", 2, (1, 2)),
]


def test_shared_prefix_equals_the_plain_skip(lm):
    got = prefix.condition_letter_logprobs(lm, MMLU_PROMPTS, SHARED_CONDITIONS, batch_size=2)
    assert set(got) == {c.name for c in SHARED_CONDITIONS}
    for condition in SHARED_CONDITIONS:
        with skip_blocks(lm, condition.layers):
            want = scoring.letter_logprobs(lm, MMLU_PROMPTS, batch_size=2)
        np.testing.assert_allclose(got[condition.name], want, atol=ATOL, err_msg=condition.name)
    # the conditions really differ, so equality is not a property of an ignored skip
    assert not np.allclose(got["intact"], got["expansion_k1"], atol=1e-3)
    assert all(not block._forward_pre_hooks and not block._forward_hooks for block in lm.blocks)


def _letter_scorer(prompts: list[str], styles: list[str], *, batch_size: int) -> evaluation.Scorer:
    """The reference scorer: a full forward pass per condition, raw and calibrated letter log-likelihood."""

    def score(lm):
        logprobs = scoring.letter_logprobs(lm, prompts, batch_size=batch_size)
        return {"ll": logprobs, "calibrated": calibrate(logprobs, styles)}

    return score


def test_shared_prefix_scores_equal_scoring_under_skip_blocks():
    lm = tiny_model("gemma2")  # alternating sliding and global layers: per-block masks are replayed
    questions = [f"q{i}" for i in range(len(MMLU_PROMPTS))]
    table = pd.DataFrame(
        {"prompt_text": MMLU_PROMPTS, "style": "base", "answer": list("ABCDA"), "question_id": questions}
    )
    shared = prefix.score_conditions_shared(lm, table, SHARED_CONDITIONS, batch_size=3)
    score = _letter_scorer(table["prompt_text"].tolist(), table["style"].tolist(), batch_size=3)
    plain = evaluation.score_conditions(lm, SHARED_CONDITIONS, score, table["answer"].tolist(), questions)
    pd.testing.assert_frame_equal(shared, plain)


def test_run_blocks_needs_a_kept_input():
    lm = tiny_model("llama")
    input_ids, mask, positions = encode(lm, PROMPTS)
    with capture_block_calls(lm, [1]) as calls:
        logits_of(lm.model, input_ids, mask, positions)
    with pytest.raises(ValueError, match="the input of block 2 was not kept"):
        run_blocks(lm, calls, 2)
    with pytest.raises(ValueError, match="out of range"):
        run_blocks(lm, calls, 1, skip=[7])


def test_recorded_residuals_hold_their_own_memory_not_the_block_output(lm):
    """A slot is one position's copy: a view of it would keep the block's whole [B, S, d] output alive through
    the forward pass (184 MiB for a batch of eight 348-token prompts of SmolLM2-135M)."""
    batch = encode(lm, PROMPTS)
    with record_residuals(lm) as slots, torch.inference_mode():
        lm.model(input_ids=batch[0], attention_mask=batch[1], position_ids=batch[2], use_cache=False)
        for slot in slots:
            assert slot.dim() == 2 and slot.untyped_storage().nbytes() == slot.numel() * slot.element_size()


def test_calibration_chooses_blocks_through_each_lens_at_the_answer_position():
    """With a fitted linear lens the same calibration questions choose blocks through it too; its Delta H is the
    entropy of each block's translated residual, read as the logit lens's is."""
    from test_drop_sets import linear_lens

    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.skipping.selection import calibrate_skips

    lm = tiny_model("llama", n_layers=5, scale=3.0)
    table = pd.DataFrame(
        {
            "prompt_id": [f"p{i}" for i in range(4)],
            "question_id": [f"c{i}" for i in range(4)],
            "prompt_text": [f"question {i} about the cat Answer:" for i in range(4)],
        }
    )
    lens = LensSettings(0.6, (1.0,), 16 << 20)
    kwargs = {"lens": lens, "chat_template": False, "ks": [1], "seed": 0, "n_boot": 50}
    alone = calibrate_skips(lm, table, **kwargs)
    both = calibrate_skips(lm, table, translators=linear_lens(lm), **kwargs)
    assert {s.lens for s in alone.plan.selections} == {"logit"} and alone.plan.delta_h_linear == ()
    assert {s.lens for s in both.plan.selections} == {"logit", "linear"}
    np.testing.assert_array_equal(both.plan.delta_h, alone.plan.delta_h)  # the logit lens reads alike
    linear = np.array(both.plan.delta_h_linear)
    assert (
        math.isnan(linear[0]) and np.isfinite(linear[1:]).all() and not np.allclose(linear[1:], both.plan.delta_h[1:])
    )
    for s in both.plan.selections:  # each lens's blocks are its own Delta H's extremes among the eligible blocks
        values = linear if s.lens == "linear" else np.array(both.plan.delta_h)
        assert s.expansion == tuple(select_layers(values, 1, "expansion", s.variant))
    assert set(both.per_question["lens"]) == {"logit", "linear"} and set(both.stability["lens"]) == {"logit", "linear"}
