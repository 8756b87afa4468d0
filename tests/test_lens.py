"""The extractor on tiny random models of six architectures against hand-decoded references."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from reference import reference
from tiny import ARCHS, VOCAB_SIZE, tiny_model

from entropy_lens import extract_profiles
from entropy_lens.lens import decoding, encoding
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.model.generation import GenerationSettings, generate
from entropy_lens.store import schema

PROMPTS = ["once upon a time there was a little girl", "the cat", "how many words are in the story"]
TOKENS = 5
TOP_P = 0.6
ALPHAS = (0.5, 1.0, 5.0, math.inf)


@pytest.fixture(scope="module", params=ARCHS)
def arch_run(request):
    lm = tiny_model(request.param)
    ds = extract_profiles(
        lm,
        PROMPTS,
        generation=GenerationSettings(TOKENS),
        lens=LensSettings(top_p=TOP_P, alphas=ALPHAS),
        prompting=PromptSettings(batch_size=3),
    )
    return lm, ds


def test_every_metric_matches_float64_reference(arch_run):
    lm, ds = arch_run
    for i, prompt in enumerate(PROMPTS):
        generated = [t for t in ds.token_id.values[i].tolist() if t >= 0]
        ref = reference(lm, prompt, generated, TOP_P)
        row = ds.isel(prompt=i, token=slice(0, len(generated)))
        np.testing.assert_allclose(row.entropy.values, ref["entropy"], atol=1e-4)
        np.testing.assert_allclose(row.renyi.sel(alpha=1.0).values, ref["entropy"], atol=1e-4)
        np.testing.assert_allclose(row.renyi.sel(alpha=0.5).values, ref["renyi_half"], atol=1e-4)
        np.testing.assert_allclose(row.renyi.sel(alpha=5.0).values, ref["renyi_five"], atol=1e-4)
        np.testing.assert_allclose(row.renyi.sel(alpha=math.inf).values, ref["min_entropy"], atol=1e-4)
        np.testing.assert_array_equal(row.nucleus_size.values, ref["nucleus_size"])
        np.testing.assert_allclose(row.nucleus_jaccard.values, ref["jaccard"], atol=1e-6)
        np.testing.assert_array_equal(row.top1_id.values, ref["top1"])
        # greedy: the generated token is the last layer's top-1
        np.testing.assert_array_equal(row.top1_id.values[:, -1], generated)


def test_dataset_follows_schema(arch_run):
    lm, ds = arch_run
    schema.validate_profiles(ds)
    assert dict(ds.sizes) == {"prompt": 3, "token": TOKENS, "layer": lm.n_layers, "alpha": len(ALPHAS)}
    assert ds.attrs["n_layers"] == lm.n_layers and ds.attrs["vocab_size"] == VOCAB_SIZE
    assert ds.depth.values[-1] == 1.0
    assert float(ds.entropy.max()) <= math.log(VOCAB_SIZE) + 1e-4


def test_last_layer_equals_model_logits():
    lm = tiny_model("gemma2")  # soft-capped: the cap must be applied to match
    ids = lm.tokenizer(PROMPTS[0])["input_ids"]
    seen = []

    def on_step(step, resid, logits, alive):
        seen.append((decoding.lens_logits(lm, resid[:, -1]), logits))

    generate(lm, [ids], GenerationSettings(3), on_step)
    for lens_last, real in seen:
        torch.testing.assert_close(lens_last, real, atol=1e-5, rtol=1e-5)


def test_batched_equals_one_by_one():
    lm = tiny_model("qwen2")
    together = extract_profiles(
        lm, PROMPTS, generation=GenerationSettings(TOKENS), prompting=PromptSettings(batch_size=3)
    )
    alone = [
        extract_profiles(
            lm, [p], generation=GenerationSettings(TOKENS), prompting=PromptSettings(batch_size=1), prompt_ids=[pid]
        )
        for p, pid in zip(PROMPTS, together.prompt.values, strict=True)
    ]
    merged = xr.concat(alone, dim="prompt")
    np.testing.assert_array_equal(together.token_id.values, merged.token_id.values)
    for var in ("entropy", "renyi", "nucleus_jaccard"):
        np.testing.assert_allclose(together[var].values, merged[var].values, atol=1e-4)
    np.testing.assert_array_equal(together.nucleus_size.values, merged.nucleus_size.values)


def test_eos_masks_later_slots():
    lm = tiny_model("llama")
    first = extract_profiles(lm, PROMPTS[:1], generation=GenerationSettings(1)).token_id.values[0, 0]
    lm.model.generation_config.eos_token_id = int(first)
    ds = extract_profiles(lm, PROMPTS[:2], generation=GenerationSettings(4), prompting=PromptSettings(batch_size=2))
    assert ds.token_id.values[0].tolist() == [first, -1, -1, -1]
    assert np.isfinite(ds.entropy.values[0, 0]).all()
    assert np.isnan(ds.entropy.values[0, 1:]).all() and np.isnan(ds.renyi.values[0, 1:]).all()
    assert (ds.nucleus_size.values[0, 1:] == -1).all() and (ds.top1_id.values[0, 1:] == -1).all()
    assert (ds.token_id.values[1] >= 0).sum() >= 1


def test_sampling_is_reproducible_and_batch_independent():
    lm = tiny_model("gpt2")

    def run(seed: int, batch_size: int):
        generation = GenerationSettings(6, do_sample=True, temperature=1.5, seed=seed)
        return extract_profiles(lm, PROMPTS, generation=generation, prompting=PromptSettings(batch_size))

    a, b, c = run(11, 3), run(11, 1), run(12, 3)
    np.testing.assert_array_equal(a.token_id.values, b.token_id.values)
    assert not np.array_equal(a.token_id.values, c.token_id.values)


def test_chat_template_is_rendered_and_recorded():
    lm = tiny_model("llama")
    ds = extract_profiles(
        lm, ["the cat"], generation=GenerationSettings(2), prompting=PromptSettings(chat_template=True)
    )
    assert ds.prompt_text.values[0] == "<bos>user the cat<eos><bos>assistant"
    assert ds.attrs["chat_template"] is True


def test_blank_prompt_is_bos_alone():
    lm = tiny_model("llama")
    ids, _ = encoding.encode_prompts(lm, [""], chat_template=False)
    assert ids == [[lm.tokenizer.bos_token_id]]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (lambda: dict(prompts=[]), "non-empty list"),
        (lambda: dict(generation=GenerationSettings(0)), "max_new_tokens must be a positive integer, got 0"),
        (lambda: dict(lens=LensSettings(top_p=1.2)), r"top_p must lie in \(0, 1\], got 1.2"),
        (lambda: dict(lens=LensSettings(alphas=(0.5, -1.0))), "alpha must be >= 0"),
        (lambda: dict(prompting=PromptSettings(batch_size=0)), "batch_size must be a positive integer"),
        (lambda: dict(lens=LensSettings(budget_bytes=100)), "chunk budget of 100 bytes is below one row"),
        (lambda: dict(prompt_ids=["a", "a"]), "distinct ids"),
    ],
)
def test_bad_arguments_are_refused(settings, message):
    lm = tiny_model("llama")
    with pytest.raises(ValueError, match=message):
        args = dict(prompts=["the cat", "a dog"], generation=GenerationSettings(2)) | settings()
        extract_profiles(lm, **args)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (lambda: dict(generation={"max_new_tokens": 2}), "generation must be a GenerationSettings, got dict"),
        (lambda: dict(lens={"top_p": 0.5}), "lens must be a LensSettings, got dict"),
        (lambda: dict(prompting=4), "prompting must be a PromptSettings, got int"),
        (lambda: dict(prompting=PromptSettings(chat_template=1)), "chat_template must be True or False, got 1"),
    ],
)
def test_settings_of_the_wrong_type_are_refused(settings, message):
    with pytest.raises(TypeError, match=message):
        extract_profiles(tiny_model("llama"), ["the cat"], **(dict(generation=GenerationSettings(2)) | settings()))


def test_settings_read_from_an_extraction_job_params():
    params = {"max_new_tokens": 3, "do_sample": True, "temperature": 0.7, "seed": 5, "batch_size": 2}
    params |= {"chat_template": False, "choices": []}
    assert GenerationSettings.from_config(params) == GenerationSettings(3, True, 0.7, 5)
    assert PromptSettings.from_config(params) == PromptSettings(batch_size=2, chat_template=False)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        PromptSettings.from_config(params | {"batch_size": 0})


def test_lens_settings_from_the_config_section():
    section = {"top_p": 0.6, "alphas": [0.5, 1.0, 5.0], "budget_mb": 256}
    assert decoding.LensSettings.from_config(section) == decoding.LensSettings(0.6, (0.5, 1.0, 5.0), 256 * 2**20)
    with pytest.raises(ValueError, match="top_p"):
        decoding.LensSettings.from_config({**section, "top_p": 1.5})


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_bfloat16_tiles_equal_the_model_head(arch):
    """Tiles run in the weight dtype: with bf16 weights the last layer is the model's own head."""
    lm = tiny_model(arch)
    lm.model.to(torch.bfloat16)
    ids = lm.tokenizer(PROMPTS[0])["input_ids"]
    seen = []

    def on_step(step, resid, logits, alive):
        tile = decoding.project_tile(lm, lm.final_norm(resid[:, -1]).T, 0, lm.vocab_size).T
        seen.append((tile, decoding.lens_logits(lm, resid[:, -1]), logits))

    generate(lm, [ids, ids[:3]], GenerationSettings(3), on_step)
    for tile, whole, real in seen:
        assert tile.dtype == torch.float32
        torch.testing.assert_close(tile, whole, rtol=0, atol=0)
        if not lm.softcap:  # Gemma 2 caps its bf16 logits in bf16, the lens in float32
            torch.testing.assert_close(tile, real, rtol=0, atol=0)
    ds = extract_profiles(lm, PROMPTS, generation=GenerationSettings(3))
    generated = ds.token_id.values >= 0
    np.testing.assert_array_equal(ds.top1_id.values[..., -1][generated], ds.token_id.values[generated])


def test_prompts_past_the_context_window_are_refused_before_any_work():
    lm = tiny_model("gpt2")
    window = lm.model.config.n_positions
    long_prompt = " ".join(["the cat"] * window)
    with pytest.raises(ValueError, match=rf"1 prompts need more than .*context of {window} tokens, e.g. 'p0001'"):
        extract_profiles(lm, ["a short one", long_prompt], generation=GenerationSettings(2))


def test_cross_prompt_overlap_pairs_each_prompt_with_its_batch_partner():
    """Two copies of one prompt share a batch, so each is the other's partner and decodes the same
    sets: the cross-prompt overlap equals the adjacent one. The long prompt is a batch of one."""
    lm = tiny_model("qwen2")
    prompts = ["the cat", "once upon a time there was a little girl", "the cat"]
    ds = extract_profiles(lm, prompts, generation=GenerationSettings(TOKENS), prompting=PromptSettings(batch_size=2))
    schema.validate_profiles(ds)
    assert ds.partner.values.tolist() == ["p0002", "", "p0000"]
    for i in (0, 2):
        np.testing.assert_array_equal(ds.nucleus_jaccard_cross.values[i], ds.nucleus_jaccard.values[i])
    assert np.isfinite(ds.nucleus_jaccard_cross.values[0, :, :-1]).all()
    assert np.isnan(ds.nucleus_jaccard_cross.values[1]).all()


def test_cross_prompt_partners_are_of_another_source():
    """Four prompts of two stories, about as long within a story: length order alone would batch (and partner)
    each story with itself; with their sources every batch mixes them and every partner is of the other story."""
    lm = tiny_model("qwen2")
    prompts = ["the cat sat", "the cat ran", "once upon a time a girl", "once upon a time a boy"]
    sources = ["cat", "cat", "girl", "girl"]
    batched = PromptSettings(batch_size=2)
    alone = extract_profiles(lm, prompts, generation=GenerationSettings(TOKENS), prompting=batched)
    assert alone.partner.values.tolist() == ["p0001", "p0000", "p0003", "p0002"]  # the same story's
    ds = extract_profiles(lm, prompts, generation=GenerationSettings(TOKENS), prompting=batched, sources=sources)
    of = dict(zip(ds.prompt.values.tolist(), sources, strict=True))
    assert all(of[str(p)] != of[str(q)] for p, q in zip(ds.prompt.values, ds.partner.values, strict=True))
    np.testing.assert_allclose(ds.entropy.values, alone.entropy.values, rtol=1e-5, atol=1e-5)  # a row's own numbers
    with pytest.raises(ValueError, match="sources must hold one source per prompt"):
        extract_profiles(lm, prompts, generation=GenerationSettings(TOKENS), sources=sources[:2])


def test_cross_prompt_overlap_is_masked_once_the_partner_is_done():
    lm = tiny_model("llama")
    first = extract_profiles(lm, PROMPTS[:1], generation=GenerationSettings(1)).token_id.values[0, 0]
    lm.model.generation_config.eos_token_id = int(first)
    ds = extract_profiles(lm, PROMPTS[:2], generation=GenerationSettings(4), prompting=PromptSettings(batch_size=2))
    assert ds.partner.values.tolist() == ["p0001", "p0000"]
    cross = ds.nucleus_jaccard_cross.values
    assert np.isfinite(cross[:, 0, :-1]).all() and np.isnan(cross[:, :, -1]).all()
    assert np.isnan(cross[:, 1:]).all()  # prompt 0 stopped after its first token: no pair on either side
