"""Model loading, lens-part discovery and the real embedded SmolLM2."""

import logging
import math
import re

import numpy as np
import pytest
import torch
from tiny import tiny_model
from torch import nn

from entropy_lens import REGISTRY, extract_profiles, load_model
from entropy_lens.lens.decoding import lens_logits
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.model import loading as models
from entropy_lens.model import registry
from entropy_lens.model.generation import GenerationSettings, generate
from entropy_lens.model.lens_model import CONTIGUOUS_HOOK, contiguous_head_input, find_lens_parts


def test_unknown_model_lists_the_registry():
    with pytest.raises(ValueError, match=r"unknown model source 'smolm2'.*smollm2-135m"):
        load_model("smolm2")


def test_missing_gguf_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"GGUF file .*nothing\.gguf.* does not exist"):
        load_model(tmp_path / "nothing.gguf")


def test_architecture_without_final_norm_is_named():
    class Headless(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2)])

        def get_output_embeddings(self):
            return nn.Linear(2, 4)

    with pytest.raises(ValueError, match=r"architecture 'Headless' .*final norm"):
        find_lens_parts(Headless())


def test_softcap_is_found_only_where_configured():
    assert tiny_model("gemma2").softcap == 2.0
    assert tiny_model("llama").softcap is None


def test_materialized_copy_reloads_identically(tmp_path):
    lm = tiny_model("qwen2")
    folder = tmp_path / "m"
    models._save_plain(lm, folder)
    again = load_model(folder, device="cpu", family="qwen")
    ids = torch.tensor([[1, 5, 9, 12]])
    torch.testing.assert_close(again.model(ids).logits, lm.model(ids).logits)
    assert again.family == "qwen" and again.n_layers == lm.n_layers


def test_tied_embeddings_count_once():
    lm = tiny_model("gemma2")
    assert lm.model.config.tie_word_embeddings
    every_tensor = sum(t.numel() for t in lm.model.state_dict().values())
    assert lm.n_params == every_tensor - lm.vocab_size * lm.model.config.hidden_size > 0


def test_bad_dtype_is_refused():
    with pytest.raises(ValueError, match="dtype must be one of"):
        models.resolve_dtype("float8", "cpu")


def test_registry_entries_are_complete():
    assert {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"} <= set(REGISTRY)
    for spec in REGISTRY.values():
        assert spec.family in {"smollm", "gemma", "qwen"}
        assert spec.install.startswith("pip install")


@pytest.mark.slow
def test_real_smollm2_profile(smollm2):
    lm = smollm2
    assert (lm.n_layers, lm.vocab_size, lm.family) == (30, 49152, "smollm")
    assert lm.n_params == 134_515_008  # SmolLM2-135M's published count (tied embeddings)
    assert len(lm.sha256) == 64
    ds = extract_profiles(
        lm,
        ["The capital of France is", "Once upon a time, there was a little"],
        generation=GenerationSettings(4),
        prompting=PromptSettings(batch_size=2),
    )
    assert ds.attrs["n_params"] == lm.n_params
    text = lm.tokenizer.decode([t for t in ds.token_id.values[0] if t >= 0])
    assert "Paris" in text
    H = ds.entropy.values
    assert np.isfinite(H).all() and (H >= 0).all() and (math.log(lm.vocab_size) >= H).all()
    # the last layer reads the model's real next-token distribution
    ids = lm.tokenizer("The capital of France is")["input_ids"]
    pairs = []
    generate(
        lm, [ids], GenerationSettings(2), lambda s, r, logits, a: pairs.append((lens_logits(lm, r[:, -1]), logits))
    )
    for lens_last, real in pairs:
        torch.testing.assert_close(lens_last, real, atol=1e-4, rtol=1e-4)
    # an intermediate layer decoded by hand in float64 from output_hidden_states
    with torch.no_grad():
        out = lm.model(torch.tensor([ids]), output_hidden_states=True)
    hidden = out.hidden_states[11][0, -1].double()  # residual after block 10
    norm = lm.final_norm
    normed = hidden * torch.rsqrt(hidden.pow(2).mean() + norm.variance_epsilon) * norm.weight.double()
    probs = torch.softmax(normed @ lm.unembed.weight.double().T, -1)
    ref = float(-(probs * probs.log()).sum())
    assert abs(float(ds.entropy.values[0, 0, 10]) - ref) < 1e-4


@pytest.mark.parametrize(
    ("source", "kind"),
    [("smollm2-135m", "registry"), ("meta-llama/Llama-3.2-1B-Instruct", "hub"), ("org/name.v2", "hub")],
)
def test_source_kind_names_what_a_source_is(source, kind):
    assert registry.source_kind(source) == kind


def test_source_kind_of_local_files_and_bad_sources(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    assert registry.source_kind("m", base=tmp_path) == "folder"
    assert registry.source_kind("x.gguf", base=tmp_path) == "gguf"
    with pytest.raises(ValueError, match=r"GGUF file .* does not exist"):
        registry.source_kind("y.gguf", base=tmp_path)
    with pytest.raises(ValueError, match=r"folder .* does not exist"):
        registry.source_kind("./missing", base=tmp_path)
    for bad in ("smollm2-135", "a/b/c", "/org name"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            registry.source_kind(bad, base=tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_gets_a_contiguous_last_position_with_the_same_logits(dtype):
    lm = tiny_model("qwen2")
    lm.model.to(dtype)
    seen = []
    lm.unembed.register_forward_pre_hook(lambda _m, args: seen.append(args[0].is_contiguous()))
    ids = torch.tensor([[5, 6, 7, 8, 9], [0, 0, 7, 8, 9]])
    mask = (ids != 0).long()
    with torch.inference_mode():
        kept = lm.model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits
        full = lm.model(input_ids=ids, attention_mask=mask).logits[:, -1:]
        getattr(lm.unembed, CONTIGUOUS_HOOK).remove()  # transformers alone: a strided slice
        strided = lm.model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits
    assert seen == [True, True, False]
    torch.testing.assert_close(kept, full)
    torch.testing.assert_close(kept, strided)


def test_contiguous_head_hook_is_registered_once():
    lm = tiny_model("llama")
    handle = getattr(lm.unembed, CONTIGUOUS_HOOK)
    contiguous_head_input(lm.unembed)
    assert getattr(lm.unembed, CONTIGUOUS_HOOK) is handle
    assert len(lm.unembed._forward_pre_hooks) == 1


def test_one_gguf_parse_shares_one_reader_per_file(tmp_path):
    """transformers parses a GGUF file for its config, tokenizer and weights; within the block each file
    is parsed once, and the library's reader class is back afterwards, also after an error."""
    import gguf

    path = models.gguf_from_registry(REGISTRY["smollm2-135m"], tmp_path)
    original = gguf.GGUFReader
    with models.one_gguf_parse() as readers:
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first
        assert isinstance(first, original) and list(readers) == [str(path.resolve())]
    assert gguf.GGUFReader is original
    with pytest.raises(RuntimeError, match="inside"), models.one_gguf_parse():
        raise RuntimeError("inside")
    assert gguf.GGUFReader is original and gguf.GGUFReader(path) is not first


def test_bfloat16_on_a_cpu_without_hardware_support_is_named(tmp_path, monkeypatch, caplog):
    """bfloat16 matmuls on an AVX2-only CPU run in software (13-17 s per MMLU prompt of the 1.5B model, against
    about 1.5 s where the CPU has AVX512-BF16): loading in bfloat16 there says so and names the remedy."""
    folder = tmp_path / "m"
    models._save_plain(tiny_model("qwen2"), folder)
    for supported, warned in ((False, True), (True, False)):
        monkeypatch.setattr(models, "cpu_has_bf16_matmul", lambda supported=supported: supported)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=models.__name__):
            load_model(folder, device="cpu", dtype="bfloat16")
        assert ("set compute.dtype: float32" in caplog.text) is warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=models.__name__):
        load_model(folder, device="cpu", dtype="float32")
    assert "AVX512-BF16" not in caplog.text
    assert isinstance(models.cpu_has_bf16_matmul(), bool)


def test_a_model_already_in_memory_is_taken_as_it_is():
    """A Hugging Face causal LM and tokenizer loaded elsewhere (nnsight's lm._model, a fine-tuning loop): the
    lens reads it where it is, in its own dtype, with the profiles of the same weights loaded any other way."""
    tiny = tiny_model("llama")
    hf_model, tokenizer = tiny.model, tiny.tokenizer
    hf_model.config._name_or_path = "acme/tiny-llama"
    lm = load_model(hf_model, tokenizer=tokenizer, family="llama")
    assert lm.model is hf_model and lm.source == "memory:acme/tiny-llama" and lm.family == "llama"
    settings = GenerationSettings(3)
    ours = extract_profiles(lm, ["the cat sat"], generation=settings)
    theirs = extract_profiles(tiny, ["the cat sat"], generation=settings)
    np.testing.assert_array_equal(ours.entropy.values, theirs.entropy.values)
    assert load_model(hf_model, tokenizer=tokenizer, dtype="bfloat16").model.dtype == torch.bfloat16


def test_a_model_in_memory_without_its_tokenizer_or_a_tokenizer_beside_a_name_is_refused():
    tiny = tiny_model("llama")
    with pytest.raises(ValueError, match=r"needs its tokenizer: load_model\(model, tokenizer=tokenizer\)"):
        load_model(tiny.model)
    with pytest.raises(ValueError, match=r"tokenizer= goes with a model object already in memory"):
        load_model("smollm2-135m", tokenizer=tiny.tokenizer)
    with pytest.raises(ValueError, match=r"takes a Hugging Face model object.*got Linear"):
        load_model(nn.Linear(2, 2), tokenizer=tiny.tokenizer)
