"""Model shapes: the architecture numbers a job's cost depends on, read from ``config.json`` fields.

No weights are loaded: a shipped copy of each registry model's config
(``entropy_lens/data/model_configs.json``), a materialized folder's ``config.json`` or
``AutoConfig`` gives the layers, widths, heads, experts and vocabulary (an image classifier's
classes and patches); the parameter count, total and active, follows from those and from what a
``model_type``'s blocks hold.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MODEL_CONFIGS_RESOURCE = "data/model_configs.json"


@dataclass(frozen=True)
class _Traits:
    """What a ``model_type``'s blocks hold beyond the shared matrices (for the parameter count)."""

    gated_mlp: bool = True  # gate, up, down (SwiGLU/GeGLU) rather than up, down
    qkv_bias: bool = False
    linear_bias: bool = False  # a bias on every linear layer (GPT-2)
    norms_per_layer: int = 2
    norm_bias: bool = False
    qk_norm: bool = False
    qk_norm_full: bool = False  # q and k normed over their whole width (OLMoE), not per head
    learned_positions: bool = False


_TRAITS = {
    "gpt2": _Traits(gated_mlp=False, linear_bias=True, norm_bias=True, learned_positions=True),
    "llama": _Traits(),
    "phi3": _Traits(),
    "qwen2": _Traits(qkv_bias=True),
    "qwen3": _Traits(qk_norm=True),
    "gemma2": _Traits(norms_per_layer=4),
    "gemma3_text": _Traits(norms_per_layer=4, qk_norm=True),
    "mixtral": _Traits(),
    "olmoe": _Traits(qk_norm_full=True),
    "qwen2_moe": _Traits(qkv_bias=True),
    "qwen3_moe": _Traits(qk_norm=True),
    # Image classifiers: counted exactly for ViT; DeiT's distillation token and BEiT's relative position
    # biases and layer scales are left out (a fraction of a percent).
    "vit": _Traits(gated_mlp=False, linear_bias=True, norm_bias=True, learned_positions=True),
    "deit": _Traits(gated_mlp=False, linear_bias=True, norm_bias=True, learned_positions=True),
    "beit": _Traits(gated_mlp=False, linear_bias=True, norm_bias=True, learned_positions=True),
}
# GPT-2 style names of config.json, mapped to the names the plan reads.
_ALIASES = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
    "n_inner": "intermediate_size",
}


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers that cost depends on, read from a ``config.json``.

    Attributes:
        model_type: Hugging Face ``model_type`` (picks the parameter-count traits).
        n_layers: Decoder blocks ``L``.
        hidden_size: Residual width ``d``.
        intermediate_size: MLP width ``I``.
        n_heads: Query heads ``H``.
        n_kv_heads: Key/value heads (grouped-query attention).
        head_dim: Width of one head.
        vocab_size: Vocabulary ``V`` (rows of the unembedding).
        tied_embeddings: The unembedding is the input embedding.
        max_positions: Longest sequence the model takes (prompt + generated tokens).
        eager_attention: Attention logits are soft-capped (Gemma-2), which runs eager
            attention and materializes ``B x H x S x S`` float32 scores.
        n_experts: Experts per mixture-of-experts block (0: a dense model).
        experts_per_token: Experts a token is routed to (``k``).
        expert_size: MLP width of one expert.
        shared_expert_size: MLP width of an always-on shared expert (Qwen2-MoE; 0: none).
        moe_layers: Blocks with experts (the others have a dense MLP of ``intermediate_size``).
        image_tokens: Tokens per image of an image classifier (patches + CLS; 0: a causal LM,
            whose ``vocab_size`` then counts classes).
        patch_inputs: Values in one patch (channels x patch x patch) of an image classifier.
    """

    model_type: str
    n_layers: int
    hidden_size: int
    intermediate_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    max_positions: int
    eager_attention: bool = False
    n_experts: int = 0
    experts_per_token: int = 0
    expert_size: int = 0
    shared_expert_size: int = 0
    moe_layers: int = 0
    image_tokens: int = 0
    patch_inputs: int = 0

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden_size", "intermediate_size", "n_heads", "n_kv_heads", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.vocab_size <= 0 or self.max_positions <= 0:
            raise ValueError(
                f"vocab_size and max_positions must be positive, got {self.vocab_size}, {self.max_positions}"
            )

    @property
    def traits(self) -> _Traits:
        return _TRAITS.get(self.model_type, _Traits())

    @property
    def _attention_and_norms(self) -> int:
        t, d, q, kv = self.traits, self.hidden_size, self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        attn = 2 * d * q + 2 * d * kv + (q + 2 * kv) * (t.qkv_bias or t.linear_bias) + d * t.linear_bias
        norms = t.norms_per_layer * d * (2 if t.norm_bias else 1) + 2 * self.head_dim * t.qk_norm
        return attn + norms + (q + kv) * t.qk_norm_full

    def _mlp(self, width: int) -> int:
        t = self.traits
        return (3 if t.gated_mlp else 2) * self.hidden_size * width + (width + self.hidden_size) * t.linear_bias

    @property
    def layer_params(self) -> int:
        """Parameters of one dense decoder block."""
        return self._attention_and_norms + self._mlp(self.intermediate_size)

    def moe_layer_params(self, experts: int) -> int:
        """Parameters of one mixture-of-experts block counting ``experts`` experts (all, or the ``k`` active)."""
        d = self.hidden_size
        shared = self._mlp(self.shared_expert_size) + d if self.shared_expert_size else 0  # and its 1-logit gate
        return self._attention_and_norms + self.n_experts * d + experts * self._mlp(self.expert_size) + shared

    def _blocks_and_norm(self, experts: int) -> int:
        dense = (self.n_layers - self.moe_layers) * self.layer_params
        final_norm = self.hidden_size * (2 if self.traits.norm_bias else 1)
        return dense + self.moe_layers * self.moe_layer_params(experts) + final_norm

    @property
    def non_embedding_params(self) -> int:
        """Parameters of the blocks and the final norm, every expert counted."""
        return self._blocks_and_norm(self.n_experts)

    @property
    def active_non_embedding_params(self) -> int:
        """What one token runs through (``2 P`` FLOPs per token): in MoE blocks the router and ``k`` experts."""
        return self._blocks_and_norm(self.experts_per_token)

    @property
    def n_params(self) -> int:
        """All parameters (every expert); tied input and output embeddings count once."""
        d = self.hidden_size
        if self.image_tokens:  # patch projection, CLS token and positions; a classifier head with bias
            return (
                self.non_embedding_params
                + (self.patch_inputs + 1) * d
                + d
                + self.image_tokens * d
                + (d + 1) * self.vocab_size
            )
        embed = self.vocab_size * d
        positions = self.max_positions * d * self.traits.learned_positions
        return self.non_embedding_params + embed * (1 if self.tied_embeddings else 2) + positions

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of KV cache one token takes across all layers."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * dtype_bytes

    def attention_flops(self, prompt_tokens: float, new_tokens: int) -> float:
        """Causal attention FLOPs (scores and weighted sum) of one prompt and its generation."""
        s, decode = prompt_tokens, max(new_tokens - 1, 0)
        contexts = s * (s + 1) / 2 + decode * s + decode * (decode + 1) / 2
        return 4.0 * self.n_heads * self.head_dim * self.n_layers * contexts


def shape_from_fields(fields: Mapping) -> ModelShape:
    """A :class:`ModelShape` from ``config.json`` fields (GPT-2 names accepted).

    Multimodal configs are read through their ``text_config``.  Absent
    ``num_key_value_heads`` means multi-head attention, absent ``head_dim`` means
    ``hidden_size / num_attention_heads``, absent ``intermediate_size`` means
    ``4 x hidden_size``, absent ``tie_word_embeddings`` means untied and absent
    ``max_position_embeddings`` means 2048.  ``null`` counts as absent.

    Raises:
        ValueError: naming the field that is missing.
    """
    text = fields.get("text_config") or fields
    f = {_ALIASES.get(k, k): v for k, v in text.items() if v is not None}
    f = {**f, **_image_fields(f)}
    missing = [
        k
        for k in ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
        if f.get(k) is None
    ]
    if missing:
        raise ValueError(f"model config lacks {missing}; it has {sorted(f)}")
    d, heads = int(f["hidden_size"]), int(f["num_attention_heads"])
    return ModelShape(
        model_type=str(f["model_type"]),
        n_layers=int(f["num_hidden_layers"]),
        hidden_size=d,
        intermediate_size=int(f.get("intermediate_size") or 4 * d),
        n_heads=heads,
        n_kv_heads=int(f.get("num_key_value_heads") or heads),
        head_dim=int(f.get("head_dim") or d // heads),
        vocab_size=int(f["vocab_size"]),
        tied_embeddings=bool(f.get("tie_word_embeddings", False)),
        max_positions=int(f.get("max_position_embeddings") or 2048),
        eager_attention=bool(f.get("attn_logit_softcapping")),
        **_moe_fields(f),
        image_tokens=int(f.get("image_tokens", 0)),
        patch_inputs=int(f.get("patch_inputs", 0)),
    )


def _moe_fields(f: Mapping) -> dict[str, int]:
    """Experts, their width and which blocks have them: Mixtral's ``num_local_experts``, Qwen-MoE's and
    OLMoE's ``num_experts``; Qwen-MoE's ``moe_intermediate_size``, shared expert, ``decoder_sparse_step``
    and ``mlp_only_layers`` (dense blocks)."""
    n_experts = int(f.get("num_local_experts") or f.get("num_experts") or 0)
    if not n_experts:
        return {}
    step, dense = int(f.get("decoder_sparse_step") or 1), set(f.get("mlp_only_layers") or ())
    layers = int(f["num_hidden_layers"])
    return {
        "n_experts": n_experts,
        "experts_per_token": int(f.get("num_experts_per_tok") or 1),
        "expert_size": int(f.get("moe_intermediate_size") or f.get("intermediate_size") or 4 * f["hidden_size"]),
        "shared_expert_size": int(f.get("shared_expert_intermediate_size") or 0),
        "moe_layers": sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0),
    }


def _image_fields(f: Mapping) -> dict[str, int]:
    """An image classifier's ``config.json`` (``image_size`` and ``patch_size``) in the plan's terms: classes
    (``num_labels`` or its ``id2label``) as the vocabulary (BEiT's ``vocab_size`` counts visual tokens of its
    pretraining, not what the head predicts), patches + CLS as positions and tokens."""
    if "image_size" not in f or "patch_size" not in f:
        return {}
    tokens = (int(f["image_size"]) // int(f["patch_size"])) ** 2 + 1
    channels = int(f.get("num_channels", 3))
    return {
        "vocab_size": int(f.get("num_labels") or len(f.get("id2label") or {}) or 2),
        "max_position_embeddings": tokens,
        "image_tokens": tokens,
        "patch_inputs": channels * int(f["patch_size"]) ** 2,
    }


@functools.cache
def shipped_model_configs() -> dict[str, dict]:
    """The shipped ``config.json`` fields, by model source (hub id or registry name)."""
    text = resources.files("entropy_lens").joinpath(MODEL_CONFIGS_RESOURCE).read_text(encoding="utf-8")
    return {source: entry["config"] for source, entry in json.loads(text)["models"].items()}


def model_shape(source: str, *, folder: str | os.PathLike | None = None, name: str | None = None) -> ModelShape:
    """The shape of a model: its materialized ``folder/config.json`` (what the jobs load: a GGUF may carry
    an output matrix its hub model ties), else the shipped config, else ``AutoConfig``.

    Args:
        source: The model's ``source`` (registry name, hub id, model folder or ``.gguf``).
        folder: A materialized copy of the model, if one exists.
        name: The model's name in the config, for messages.

    Raises:
        ValueError: naming the model and what to do when no config can be found offline.
    """
    if folder is not None and (Path(folder) / "config.json").is_file():
        return shape_from_fields(json.loads((Path(folder) / "config.json").read_text()))
    shipped = shipped_model_configs()
    if source in shipped:
        return shape_from_fields(shipped[source])
    try:
        return shape_from_fields(_auto_config(source))
    except (OSError, ValueError) as err:
        raise ValueError(
            f"model {name or source!r} (source {source!r}) has no shipped config and AutoConfig could not read one "
            f"({err}); add its config.json fields to entropy_lens/{MODEL_CONFIGS_RESOURCE}, materialize it, or set "
            "its source to a local model folder"
        ) from err


def _auto_config(source: str) -> dict:
    from transformers import AutoConfig

    path = Path(source).expanduser()
    if path.suffix == ".gguf":
        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    else:
        config = AutoConfig.from_pretrained(source)
    return config.to_dict()
