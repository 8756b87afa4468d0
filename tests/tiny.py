"""Tiny random-init models and a word-level tokenizer, built offline from explicit configs."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from entropy_lens.model.loading import SOURCE_FILE, LensModel, _save_plain, wrap_model

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
WORDS = (
    "the a an once upon time there was little girl boy cat dog who loved to play in park "
    "and sun moon story happy sad big small red blue green tree house ran jumped saw said "
    "one two three four five how many words are is what main idea of question answer "
    "continue count subject write poem about science chat log france paris capital A B C D Answer:"
).split()
VOCAB_SIZE = 96  # > len(SPECIALS) + len(WORDS); unused ids still get logits
HIDDEN = 32
N_LAYERS = 3
MAX_PARAMS = 200_000

CHAT_TEMPLATE = (
    "{% for m in messages %}<bos>{{ m['role'] }} {{ m['content'] }}<eos>{% endfor %}"
    "{% if add_generation_prompt %}<bos>assistant{% endif %}"
)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level tokenizer over :data:`WORDS` with BOS added to every encoding."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    from tokenizers.processors import TemplateProcessing

    core.post_processor = TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _common(tok) -> dict:
    return dict(
        vocab_size=VOCAB_SIZE,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


def tiny_config(arch: str, tok) -> transformers.PretrainedConfig:
    """Config for ``arch`` in {llama, gemma2, gemma3, qwen2, gpt2, gpt_neox}."""
    c = _common(tok)
    decoder = dict(
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        **c,
    )
    if arch == "llama":
        return transformers.LlamaConfig(**decoder, tie_word_embeddings=False)
    if arch == "qwen2":
        return transformers.Qwen2Config(**decoder, tie_word_embeddings=True)
    if arch == "gemma2":
        return transformers.Gemma2Config(
            **decoder,
            head_dim=8,
            final_logit_softcapping=2.0,
            attn_logit_softcapping=50.0,
            sliding_window=4,
            query_pre_attn_scalar=8,
        )
    if arch == "gemma3":
        return transformers.Gemma3TextConfig(**decoder, head_dim=8, sliding_window=4, query_pre_attn_scalar=8)
    if arch == "gpt2":
        return transformers.GPT2Config(n_embd=HIDDEN, n_layer=N_LAYERS, n_head=4, n_positions=256, **c)
    if arch == "gpt_neox":
        return transformers.GPTNeoXConfig(
            hidden_size=HIDDEN,
            intermediate_size=64,
            num_hidden_layers=N_LAYERS,
            num_attention_heads=4,
            max_position_embeddings=256,
            **c,
        )
    raise ValueError(f"unknown tiny architecture {arch!r}")


ARCHS = ("llama", "gemma2", "gemma3", "qwen2", "gpt2", "gpt_neox")


def tiny_model(arch: str = "llama", seed: int = 0, scale: float = 1.0) -> LensModel:
    """A random-init model of ``arch`` with the tiny tokenizer, checked to be tiny.

    ``scale`` multiplies the initializer range so logits are spread enough to give
    non-trivial entropies.
    """
    tok = tiny_tokenizer()
    config = tiny_config(arch, tok)
    config.initializer_range = 0.02 * scale * 10
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params < MAX_PARAMS, f"{arch} tiny model has {n_params} parameters: a config key was ignored"
    return wrap_model(model, tok, name=f"tiny-{arch}", source="tests", family=arch)


def save_tiny_model(arch: str, folder: Path, family: str) -> Path:
    """Save ``tiny_model(arch)`` as a local model folder with provenance, like a materialized one."""
    _save_plain(tiny_model(arch), folder)
    (folder / SOURCE_FILE).write_text(json.dumps({"source": "tests", "sha256": "", "family": family}))
    return folder
