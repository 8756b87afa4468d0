"""Tiny random-init models and a word-level tokenizer, built offline from explicit configs."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from entropy_lens.model.lens_model import LensModel, wrap_model
from entropy_lens.model.loading import SOURCE_FILE, _save_plain

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


def tiny_config(arch: str, tok, n_layers: int = N_LAYERS) -> transformers.PretrainedConfig:
    """Config for ``arch`` in :data:`ARCHS` (dense) or :data:`MOE_ARCHS` (mixture of experts)."""
    c = _common(tok)
    decoder = dict(
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=n_layers,
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
    if arch in MOE_ARCHS:
        return _moe_config(arch, decoder)
    if arch == "gpt2":
        return transformers.GPT2Config(n_embd=HIDDEN, n_layer=n_layers, n_head=4, n_positions=256, **c)
    if arch == "gpt_neox":
        return transformers.GPTNeoXConfig(
            hidden_size=HIDDEN,
            intermediate_size=64,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            max_position_embeddings=256,
            **c,
        )
    raise ValueError(f"unknown tiny architecture {arch!r}")


ARCHS = ("llama", "gemma2", "gemma3", "qwen2", "gpt2", "gpt_neox")
# Mixture-of-experts decoders: 4 experts, 2 per token. Qwen2-MoE keeps block 1 dense (mlp_only_layers), so
# that a model mixes MoE and dense blocks.
MOE_ARCHS = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe")
N_EXPERTS = 4
TOP_K = 2
DENSE_QWEN2_MOE_LAYER = 1


def _moe_config(arch: str, decoder: dict) -> transformers.PretrainedConfig:
    experts = dict(num_experts_per_tok=TOP_K, output_router_logits=False)
    narrow = {**decoder, "intermediate_size": 24}  # Mixtral and OLMoE size their experts by intermediate_size
    if arch == "mixtral":
        return transformers.MixtralConfig(**narrow, num_local_experts=N_EXPERTS, **experts)
    if arch == "olmoe":
        return transformers.OlmoeConfig(**narrow, num_experts=N_EXPERTS, **experts)
    moe = dict(num_experts=N_EXPERTS, moe_intermediate_size=24, decoder_sparse_step=1, **experts)
    if arch == "qwen2_moe":
        return transformers.Qwen2MoeConfig(
            **decoder, **moe, shared_expert_intermediate_size=32, mlp_only_layers=[DENSE_QWEN2_MOE_LAYER]
        )
    return transformers.Qwen3MoeConfig(**decoder, **moe, head_dim=8)


def tiny_model(arch: str = "llama", seed: int = 0, scale: float = 1.0, n_layers: int = N_LAYERS) -> LensModel:
    """A random-init model of ``arch`` with the tiny tokenizer, checked to be tiny.

    ``scale`` multiplies the initializer range so logits are spread enough to give
    non-trivial entropies.
    """
    tok = tiny_tokenizer()
    config = tiny_config(arch, tok, n_layers)
    config.initializer_range = 0.02 * scale * 10
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params < MAX_PARAMS, f"{arch} tiny model has {n_params} parameters: a config key was ignored"
    return wrap_model(model, tok, name=f"tiny-{arch}", source="tests", family=arch)


def save_tiny_model(arch: str, folder: Path, family: str, n_layers: int = N_LAYERS) -> Path:
    """Save ``tiny_model(arch)`` as a local model folder with provenance, like a materialized one."""
    _save_plain(tiny_model(arch, n_layers=n_layers), folder)
    (folder / SOURCE_FILE).write_text(json.dumps({"source": "tests", "sha256": "", "family": family}))
    return folder


# Image classifiers: 10 classes, 32 x 32 images in 8 x 8 patches (16 patches + CLS).
VISION_ARCHS = ("vit", "deit", "beit")
N_CLASSES = 10
IMAGE_SIZE = 32
PATTERNS = ("stripes", "columns", "checker")


def tiny_vision_config(arch: str) -> transformers.PretrainedConfig:
    """Config of a tiny random image classifier; ``beit`` mean-pools its patch tokens."""
    shape = dict(
        hidden_size=HIDDEN,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=IMAGE_SIZE,
        patch_size=8,
        num_labels=N_CLASSES,
        id2label={i: f"class{i}" for i in range(N_CLASSES)},
        label2id={f"class{i}": i for i in range(N_CLASSES)},
    )
    if arch == "vit":
        return transformers.ViTConfig(**shape, architectures=["ViTForImageClassification"])
    if arch == "deit":  # DeiT maps to two classification heads: the config names the plain one
        return transformers.DeiTConfig(**shape, architectures=["DeiTForImageClassification"])
    if arch == "beit":
        return transformers.BeitConfig(**shape, use_mean_pooling=True, architectures=["BeitForImageClassification"])
    raise ValueError(f"unknown tiny vision architecture {arch!r}")


def tiny_image_processor():
    """The processor of the tiny classifiers: resize to 32 x 32, scale and normalize (PIL backend)."""
    return transformers.ViTImageProcessorPil(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def tiny_vision_model(arch: str = "vit", seed: int = 0) -> LensModel:
    """A random-init image classifier of ``arch`` with its processor, checked to be tiny."""
    config = tiny_vision_config(arch)
    config.initializer_range = 0.2  # spread logits so that entropies are not all log(classes)
    torch.manual_seed(seed)
    model = transformers.AutoModelForImageClassification.from_config(config, dtype=torch.float32)
    _spread_zero_embeddings(model, config.initializer_range)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params < MAX_PARAMS, f"{arch} tiny classifier has {n_params} parameters: a config key was ignored"
    return wrap_model(model, tiny_image_processor(), name=f"tiny-{arch}", source="tests", family=arch)


def _spread_zero_embeddings(model: torch.nn.Module, std: float) -> None:
    """Draw the token and position embeddings some classifiers start at zero (DeiT's CLS and distillation tokens).

    Left at zero, the CLS and distillation tokens enter every block equal and stay equal, so a readout of
    the wrong one could not be told from the right one.
    """
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("_token", "position_embeddings")) and not param.any():
                param.normal_(0.0, std)


def save_tiny_vision_model(arch: str, folder: Path, family: str) -> Path:
    """Save ``tiny_vision_model(arch)`` as a local model folder with provenance, like a materialized one."""
    _save_plain(tiny_vision_model(arch), folder)
    (folder / SOURCE_FILE).write_text(json.dumps({"source": "tests", "sha256": "", "family": family}))
    return folder


def pattern_image(pattern: str, seed: int, size: int = 40) -> bytes:
    """A PNG of a seeded noisy pattern (``stripes``, ``columns`` or ``checker``) at a seeded period."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:size, :size]
    period = int(rng.integers(4, 9))
    wave = {"stripes": y // period, "columns": x // period, "checker": y // period + x // period}[pattern] % 2
    colour = rng.uniform(0.3, 1.0, size=3)
    pixels = wave[..., None] * colour + rng.normal(0, 0.1, size=(size, size, 3))
    buffer = io.BytesIO()
    Image.fromarray((np.clip(pixels, 0, 1) * 255).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def write_image_folder(root: Path, per_class: int, seed: int = 0) -> Path:
    """``root/<pattern>/<pattern>_<i>.png``: ``per_class`` images of every pattern (the folder layout)."""
    for c, pattern in enumerate(PATTERNS):
        (root / pattern).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            (root / pattern / f"{pattern}_{i}.png").write_bytes(pattern_image(pattern, seed * 1000 + c * 100 + i))
    return root
