"""MMLU scoring: letter log-likelihood on tiny models, completion-only letter parsing, accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from tiny import CHAT_TEMPLATE, SPECIALS, tiny_model
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

from entropy_lens.answers import accuracy, letters, scoring
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.lens.choices import RAW_SEPARATOR, choice_queries, readout_of
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.extract import extract_table
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.lens_model import wrap_model
from entropy_lens.prompts.mmlu import build_mmlu
from entropy_lens.store import combine, storage

WORDS = "what is the answer question one two three cat dog a".split()
LETTERS = ["A", "B", "C", "D"]
PROMPTS = [
    "what is the answer",
    "one two three cat dog a question what is the answer",
    "cat",
    "the dog is a cat what is the answer",
    "two",
]

# -- completion-only parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "letter"),
    [
        ("Because the sun is hot.", "unparsed"),
        ("C. Because B is wrong", "C"),
        ("Because of gravity, the answer is c", "C"),
        ("(B)", "B"),
        (" B", "B"),
        ("D", "D"),
        ("**A**", "A"),
        ("b) mitochondria", "B"),
        ("Answer: (d)", "D"),
        ("I think the correct option is B.", "B"),
        ("The answer is a tricky one; I would say (C)", "C"),
        ("a dog barked", "unparsed"),
        ("A dog barked", "unparsed"),
        ("A cell divides, so (C)", "C"),
        ("A is right", "A"),
        ("A because B is wrong", "A"),
        ("A. dogs", "A"),
        ("SOCIAL norms matter", "unparsed"),
        ("Bacteria divide quickly", "unparsed"),
        ("", "unparsed"),
        ("No letter at all here.", "unparsed"),
        ("The answered question", "unparsed"),
    ],
)
def test_parse_letter(completion, letter):
    assert letters.parse_letter(completion) == letter


def test_parse_letter_refuses_non_text():
    with pytest.raises(TypeError, match="completion must be a str"):
        letters.parse_letter(None)


# -- letter log-likelihood -------------------------------------------------------------------------


def _tokenizer(tokens: list[str], pre_tokenizer) -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + tokens)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizer
    core.post_processor = TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )


def word_tokenizer():
    """Words split on whitespace: the space vanishes, "A" is read right after the prompt."""
    return _tokenizer(WORDS + LETTERS, pre_tokenizers.WhitespaceSplit()), LETTERS, ""


def space_tokenizer():
    """The space is a token of its own: it is fed, "A" is read after it."""
    return _tokenizer([" ", *WORDS, *LETTERS], pre_tokenizers.Split(" ", behavior="isolated")), LETTERS, " "


def merged_tokenizer():
    """GPT-2 style: " A" is one token, read right after the prompt."""
    tokens = WORDS + [f" {w}" for w in WORDS + LETTERS]
    return (
        _tokenizer(tokens, pre_tokenizers.Split(Regex(r" ?[^ ]+"), behavior="isolated")),
        [f" {x}" for x in LETTERS],
        "",
    )


def _reference(lm, prompts, letter_tokens, fed_suffix) -> np.ndarray:
    """Each prompt alone, unpadded, full logits: log-softmax at the last position."""
    ids = lm.tokenizer.convert_tokens_to_ids(letter_tokens)
    rows = []
    for prompt in prompts:
        context = lm.tokenizer(prompt + fed_suffix)["input_ids"]
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([context])).logits[0, -1]
        rows.append(torch.log_softmax(logits.float(), -1)[ids].numpy())
    return np.stack(rows)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("make_tokenizer", [word_tokenizer, space_tokenizer, merged_tokenizer])
def test_letter_logprobs_match_the_models_own_next_token(arch, make_tokenizer):
    tok, letter_tokens, fed_suffix = make_tokenizer()
    assert len(tok) <= 96  # fits the tiny model's vocabulary
    lm = wrap_model(tiny_model(arch).model, tok, name=f"tiny-{arch}")
    got = scoring.letter_logprobs(lm, PROMPTS, batch_size=3)
    want = _reference(lm, PROMPTS, letter_tokens, fed_suffix)
    assert got.shape == (len(PROMPTS), 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert letters.predicted_letters(got) == [LETTERS[i] for i in want.argmax(1)]
    assert (got < 0).all()


def test_letter_logprobs_do_not_depend_on_batching():
    tok, _, _ = word_tokenizer()
    lm = wrap_model(tiny_model("qwen2").model, tok, name="tiny-qwen2")
    one = scoring.letter_logprobs(lm, PROMPTS, batch_size=1)
    np.testing.assert_allclose(scoring.letter_logprobs(lm, PROMPTS, batch_size=5), one, atol=1e-4)


def test_letter_logprobs_after_a_chat_template():
    tok = _tokenizer(WORDS + LETTERS + ["user", "assistant"], pre_tokenizers.WhitespaceSplit())
    tok.chat_template = CHAT_TEMPLATE
    lm = wrap_model(tiny_model("llama").model, tok, name="tiny-chat")
    rendered = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    contexts = [tok(r, add_special_tokens=False)["input_ids"] for r in rendered]
    assert all(c[:2] != [tok.bos_token_id] * 2 for c in contexts)  # one BOS, from the template
    got = scoring.letter_logprobs(lm, PROMPTS, batch_size=2, chat_template=True, separator=" ")
    ids = tok.convert_tokens_to_ids(LETTERS)
    with torch.no_grad():
        want = [torch.log_softmax(lm.model(input_ids=torch.tensor([c])).logits[0, -1], -1)[ids] for c in contexts]
    np.testing.assert_allclose(got, torch.stack(want).numpy(), atol=1e-4)
    raw = scoring.letter_logprobs(lm, PROMPTS, batch_size=2)
    assert not np.allclose(raw, got)


def test_letters_unknown_to_the_tokenizer_are_an_error():
    base = tiny_model("llama")
    tok = _tokenizer(WORDS, pre_tokenizers.WhitespaceSplit())  # no letters: all four become <unk>
    lm = wrap_model(base.model, tok, name="no-letters")
    with pytest.raises(ValueError, match="do not start with 4 distinct tokens"):
        scoring.letter_logprobs(lm, ["what is the answer"])
    with pytest.raises(ValueError, match="non-empty list of strings"):
        scoring.letter_logprobs(lm, "what is the answer")


# -- labels and accuracy ---------------------------------------------------------------------------


def test_predicted_letters_and_flags():
    logprobs = np.log(np.array([[0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1]]))
    assert letters.predicted_letters(logprobs) == ["C", "A"]
    with pytest.raises(ValueError, match=r"shape \[N, 4\]"):
        letters.predicted_letters(logprobs[:, :3])
    flags = letters.correct_flags(["C", "B", "A"], ["C", "A", "unparsed"])
    assert flags.tolist() == [1, 0, -1] and flags.dtype == np.int8


def test_accuracy_table_gives_wilson_intervals_and_the_letter_bias():
    n = 40
    scores = pd.DataFrame(
        {
            "model": "m",
            "style": "base",
            "answer": ["A"] * 10 + ["C"] * 30,  # majority gold letter C: 75%
            "ll_letter": ["A"] * n,  # a model that always answers A
            "calibrated_letter": ["A"] * 10 + ["C"] * 20 + ["B"] * 10,
            "parsed_letter": ["unparsed"] * 20 + ["C"] * 20,
        }
    ).assign(
        correct_ll=lambda d: (d["ll_letter"] == d["answer"]).astype(int),
        correct_calibrated=lambda d: (d["calibrated_letter"] == d["answer"]).astype(int),
        correct_parsed=lambda d: np.where(d["parsed_letter"] == "unparsed", -1, d["parsed_letter"] == d["answer"]),
    )
    table = accuracy.accuracy_table(scores).set_index("measure")
    assert list(table.columns) == [c for c in accuracy.ACCURACY_COLUMNS if c != "measure"]
    ll = table.loc["ll"]
    assert ll["accuracy"] == 0.25 and ll["top_letter"] == "A" and ll["top_share"] == 1.0 and ll["answered_A"] == 1.0
    assert ll["majority_letter"] == "C" and ll["majority_baseline"] == 0.75 and ll["chance"] == 0.25
    assert ll["ci_low"] < 0.25 < ll["ci_high"]  # Wilson: 10 of 40
    cal = table.loc["calibrated"]
    assert cal["accuracy"] == 0.75 and cal["answered_C"] == 0.5 and cal["answered_B"] == 0.25
    parsed = table.loc["parsed"]
    assert parsed["n"] == 20 and parsed["n_unparsed"] == 20 and parsed["accuracy"] == 1.0
    with pytest.raises(ValueError, match=r"lack columns \['parsed_letter'\]"):
        accuracy.accuracy_table(scores.drop(columns="parsed_letter"))


def test_calibration_removes_a_constant_letter_preference():
    # every question favours A by the same margin; the rest is the model's knowledge
    rng = np.random.default_rng(0)
    knowledge = rng.normal(size=(40, 4))
    logprobs = knowledge + np.array([5.0, 0.0, 0.0, 0.0])
    styles = ["base"] * 20 + ["instruct"] * 20
    assert set(letters.predicted_letters(logprobs)) == {"A"}
    calibrated = letters.predicted_letters(letters.calibrate(logprobs, styles))
    centred = np.concatenate([knowledge[:20] - knowledge[:20].mean(0), knowledge[20:] - knowledge[20:].mean(0)])
    assert calibrated == letters.predicted_letters(centred)
    assert len(set(calibrated)) == 4
    prior = letters.letter_prior(logprobs, styles)
    np.testing.assert_allclose(prior[0], logprobs[:20].mean(0))
    np.testing.assert_allclose(prior[-1], logprobs[20:].mean(0))
    with pytest.raises(ValueError, match=r"need \[N, C\] log-probabilities and N styles"):
        letters.calibrate(logprobs, styles[:3])


def _questions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": ["q1"],
            "subject": ["anatomy"],
            "question": ["Which?"],
            "choice_a": ["x"],
            "choice_b": ["y"],
            "choice_c": ["z"],
            "choice_d": ["w"],
            "answer": ["B"],
        }
    )


def test_score_prompts_gives_every_measure_on_a_tiny_model():
    lm = tiny_model("llama")
    table = build_mmlu(_questions(), n=1, seed=0, styles=["base", "instruct"])
    logprobs = scoring.letter_logprobs(lm, table["prompt_text"].tolist(), batch_size=2)
    scores = scoring.score_prompts(table, logprobs, ["The answer is B", "hmm"], model="tiny")
    assert list(scores["model"]) == ["tiny", "tiny"] and list(scores["parsed_letter"]) == ["B", "unparsed"]
    assert list(scores["correct_parsed"]) == [1, -1]
    raw = scores[[f"logprob_{x}" for x in "ABCD"]].to_numpy()
    np.testing.assert_array_equal(raw, logprobs)
    prior = scores[[f"prior_{x}" for x in "ABCD"]].to_numpy()
    assert list(scores["calibrated_letter"]) == letters.predicted_letters(raw - prior)
    assert list(scores["ll_letter"]) == letters.predicted_letters(raw)
    np.testing.assert_allclose(prior, letters.letter_prior(raw, scores["style"]))
    with pytest.raises(ValueError, match="got 1 completions and 2 letter log-probabilities for 2 prompts"):
        scoring.score_prompts(table, logprobs, ["x"], model="tiny")


@pytest.mark.slow
def test_real_tokenizer_letters(smollm2):
    lm = smollm2
    header = "The following are multiple choice questions (with answers) about anatomy.\n\n"
    prompt = header + "Which?\nA. x\nB. y\nC. z\nD. w\nAnswer:"
    raw = choice_queries(lm.tokenizer, [prompt], LETTERS, RAW_SEPARATOR)[0]
    assert lm.tokenizer.convert_ids_to_tokens(list(raw.choice_ids)) == ["ĠA", "ĠB", "ĠC", "ĠD"]
    assert raw.input_ids == lm.tokenizer(prompt)["input_ids"]
    got = scoring.letter_logprobs(lm, [prompt, "Is the sky blue?\nA. yes\nB. no\nC. maybe\nD. never\nAnswer:"])
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([raw.input_ids])).logits[0, -1]
    np.testing.assert_allclose(got[0], torch.log_softmax(logits.float(), -1)[list(raw.choice_ids)].numpy(), atol=1e-3)
    rendered = lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )
    chat = choice_queries(lm.tokenizer, [rendered], LETTERS, "", add_special_tokens=False)[0]
    assert lm.tokenizer.convert_ids_to_tokens(list(chat.choice_ids)) == ["A", "B", "C", "D"]


def test_accuracy_table_pools_styles_with_a_question_bootstrap():
    rows = []
    for q in range(30):
        for style in ("base", "instruct"):
            right = q < 15  # a question is known in every style or in none: prompts are not independent
            rows.append(
                {
                    "model": "m",
                    "style": style,
                    "question_id": f"q{q}",
                    "answer": "A",
                    "ll_letter": "A" if right else "B",
                    "calibrated_letter": "A" if right else "B",
                    "parsed_letter": "unparsed",
                    "correct_ll": int(right),
                    "correct_calibrated": int(right),
                    "correct_parsed": -1,
                }
            )
    table = accuracy.accuracy_table(pd.DataFrame(rows)).set_index(["style", "measure"])
    pooled, one = table.loc[(accuracy.ALL_STYLES, "calibrated")], table.loc[("base", "calibrated")]
    assert pooled["n"] == 60 and pooled["accuracy"] == 0.5 == one["accuracy"]
    wilson_60 = wilson_interval(30, 60)
    assert pooled["ci_high"] - pooled["ci_low"] > 1.2 * (wilson_60[1] - wilson_60[0])  # 30 questions, not 60


# -- letters from the extraction pass --------------------------------------------------------------


def _extracted_letters(lm, prompts, *, chat_template=False, batch_size=3):
    """The extraction pass's ``choice_logprob`` of ``prompts`` and the readout it used."""
    readout = readout_of(lm, prompts, LETTERS, chat_template=chat_template)
    table = pd.DataFrame({"prompt_id": [f"q{i}" for i in range(len(prompts))], "prompt_text": prompts})
    ds = extract_table(
        lm,
        table,
        "blank",  # any kind: the readout does not depend on it
        generation=GenerationSettings(2),
        lens=LensSettings(alphas=(1.0,)),
        prompting=PromptSettings(batch_size, chat_template),
        choices=LETTERS,
    )
    return ds["choice_logprob"].sel(choice=LETTERS).values, readout


@pytest.mark.parametrize(
    ("make_tokenizer", "readable"), [(word_tokenizer, True), (merged_tokenizer, True), (space_tokenizer, False)]
)
def test_extraction_reads_the_same_letters_as_a_forward_pass(make_tokenizer, readable):
    tok, _, _ = make_tokenizer()
    lm = wrap_model(tiny_model("llama").model, tok, name="tiny-llama")
    got, readout = _extracted_letters(lm, PROMPTS)
    # readable prompts come from the first generation step; the others (the space is fed) from a pass of their own
    assert readout.readable.tolist() == [readable] * len(PROMPTS)
    want = scoring.letter_logprobs(lm, PROMPTS, batch_size=3)
    assert got.dtype == np.float32 and not np.isnan(got).any()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert letters.predicted_letters(got) == letters.predicted_letters(want)


def test_extraction_letters_after_a_chat_template_and_across_batches():
    tok = _tokenizer(WORDS + LETTERS + ["user", "assistant"], pre_tokenizers.WhitespaceSplit())
    # like the registry models' templates, the assistant header ends in a newline
    tok.chat_template = CHAT_TEMPLATE.replace("assistant{% endif %}", "assistant\n{% endif %}")
    lm = wrap_model(tiny_model("qwen2").model, tok, name="tiny-chat")
    got, readout = _extracted_letters(lm, PROMPTS, chat_template=True, batch_size=2)
    assert readout.readable.all()
    np.testing.assert_allclose(got, scoring.letter_logprobs(lm, PROMPTS, batch_size=5, chat_template=True), atol=1e-5)


def test_store_logprobs_round_trip_and_refusals(tmp_path):
    tok, _, _ = word_tokenizer()
    lm = wrap_model(tiny_model("llama").model, tok, name="tiny-llama")
    table = build_mmlu(_questions(), n=1, seed=0, styles=["base", "instruct"])
    ds = extract_table(
        lm, table, "mmlu", generation=GenerationSettings(1), lens=LensSettings(), prompting=PromptSettings(2)
    )
    with pytest.raises(ValueError, match=r"has no 'choice_logprob'.*--forcerun extract_profiles"):
        scoring.store_logprobs(ds, table["prompt_id"])
    ds = extract_table(
        lm,
        table,
        "mmlu",
        generation=GenerationSettings(1),
        lens=LensSettings(),
        prompting=PromptSettings(2),
        choices=LETTERS,
    )
    storage.write_profiles(ds, tmp_path / "m.zarr")
    back = storage.open_profiles(tmp_path / "m.zarr")
    ids = table["prompt_id"].tolist()[::-1]
    got = scoring.store_logprobs(back, ids)
    np.testing.assert_allclose(got, scoring.letter_logprobs(lm, table["prompt_text"].tolist()[::-1]), atol=1e-5)
    combined = combine.combine_models({"a": back}, families={"a": "x"}, n_params={"a": 1})
    assert "choice_logprob" not in combined and "choice" not in combined.dims


@pytest.mark.slow
def test_real_model_extraction_letters_equal_letter_logprobs(smollm2):
    questions = pd.concat([_questions().assign(question_id=f"q{i}", question=f"Which {i}?") for i in range(3)])
    table = build_mmlu(questions.reset_index(drop=True), n=3, seed=0, styles=["base", "instruct"])
    for chat in (False, True):
        ds = extract_table(
            smollm2,
            table,
            "mmlu",
            generation=GenerationSettings(1),
            lens=LensSettings(alphas=(1.0,)),
            prompting=PromptSettings(4, chat),
            choices=LETTERS,
        )
        want = scoring.letter_logprobs(smollm2, table["prompt_text"].tolist(), batch_size=4, chat_template=chat)
        assert readout_of(smollm2, table["prompt_text"].tolist(), LETTERS, chat_template=chat).readable.all()
        np.testing.assert_allclose(scoring.store_logprobs(ds, table["prompt_id"]), want, atol=1e-4)
