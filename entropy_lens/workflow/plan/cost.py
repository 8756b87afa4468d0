"""The cost of one job from its model shape and workload: FLOPs, peak memory and time.

Every extraction job (one per model x dataset, or per shard of ``compute.prompts_per_job``
prompts) and the per-model layer-skip jobs get FLOPs, peak memory and
an estimated time; :mod:`entropy_lens.workflow.plan.cluster` turns them into a cluster request
(``runtime`` minutes, ``mem_mb``).

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
  + FLOPs at the device's rate for the weight dtype (float32 or 16-bit; on a CPU per thread, times
  ``compute.threads``) + weights (and KV cache) streamed once per forward pass at ``gbps`` +
  lens metrics at ``metric_ns (V / 65,536) ** metric_vocab_exponent`` per logit (per thread on a CPU)
  + ``step_us`` per layer per forward pass (launches, Python);
* peak memory, the larger of loading and running, plus the runtime's own (``cpu_overhead_mb``) and the
  tokenizer's (``31 MiB + 1,062 bytes x V`` resident, fitted to SmolLM2's, Qwen2.5's and Gemma-3's
  tokenizers, measured at 108, 131 and 322 MiB, within 55 MiB):
  *loading* reads the materialized float32 weights through the page cache and, when the run's dtype
  is not float32, holds the converted copy beside them (``P (4 + dtype bytes)``; measured on this
  machine: 4.0 GB peak for the 0.63 B-parameter Qwen2.5-Coder-0.5B loaded in bfloat16); *running*
  holds the weights (*all* parameters x dtype bytes, every expert) + KV cache of the largest batch
  (``2 L n_kv h_d (S_max + T) B`` x dtype bytes) + one layer's activations (and the
  ``B H S_max^2`` float32 scores where soft-capped attention runs eagerly) + the lens
  budget + the output buffers (``N T L (4 + A)`` values, held twice while writing).
  On CUDA the cluster request is host memory: the loading peak, or the output buffers.

Generation is planned to its full ``max_new_tokens`` (rows that stop early cost less).
An image classifier's job is one forward pass per image of ``patches + 1`` tokens and one
lens row per block (no generation, no KV cache to speak of).
A linear lens's fit adds float64 work beside its workloads: the normal equations summed on the model's
device (``2 (d + 1)(2 d + 1)`` FLOPs per corpus token per block) and solved on the host (a Cholesky factor
and solve per block, ``(d + 1)^3 / 3 + 2 (d + 1)^2 d``; an eigendecomposition, about ``9 (d + 1)^3``, where
the corpus has fewer tokens than coefficients), each float64 FLOP priced as :data:`FLOAT64_COST` float32
ones at the device's float32 rate (on a GPU run the solves take host seconds at the CPU's rate instead).
The rates are those of :mod:`entropy_lens.workflow.plan.settings`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from entropy_lens.workflow.plan.settings import GIB, METRIC_VOCAB_REF, MIB, DeviceRates, PlanSettings, RunSettings
from entropy_lens.workflow.plan.shapes import ModelShape

EXTRACT = "extract_profiles"
SKIP_SELECT = "layer_skip_select"
SKIP_EVAL = "layer_skip_eval"
FIT_LENS = "fit_lens"
# An extraction under a fitted lens; its job's dataset field is "{kind}/{dataset}".
EXTRACT_LENS = "extract_lens_profiles"
# An extraction of a model's random-init twin (the same architecture, prompts and settings), priced as the model's own:
# on a CPU its near-uniform rows' wide top-p sets cost the lens more (measured 2.5-2.9x the model's on 8 prompts),
# which plan_vs_run shows beside the plan.
EXTRACT_TWIN = "extract_twin_profiles"
# score_mmlu is no model job: it reads the letters the extraction pass stored.
RULES = (EXTRACT, SKIP_SELECT, SKIP_EVAL, FIT_LENS, EXTRACT_LENS, EXTRACT_TWIN)
# Bytes per weight in a materialized model folder (safetensors written in float32) that jobs load.
DISK_BYTES = 4
# Resident memory of a loaded fast tokenizer: a base plus a share per vocabulary entry (measured RSS after
# AutoTokenizer: SmolLM2's 49 k vocabulary +108 MiB, Qwen2.5's 152 k +131 MiB, Gemma-3's 262 k +322 MiB;
# least squares: 31 MiB + 1,062 bytes per entry, which predicts 81, 185 and 297 MiB).
TOKENIZER_BASE_BYTES = 31 * MIB
TOKENIZER_BYTES_PER_ENTRY = 1_062
# Values per (prompt, token, layer) in a profile store: entropy, nucleus size, Jaccard, top-1, + one per alpha.
STORE_VALUES = 4


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
        dataset: Dataset wildcard (``""`` for per-model rules; the lens kind for ``fit_lens``).
        shard: Shard index (0 when not sharded).
        n_shards: Shards of this model x dataset.
        shape: The model's shape.
        workloads: What the job runs.
        token_source: How prompt lengths were found (see :class:`PromptStats`).
        held_bytes: Memory the job holds beside its workloads for its whole run, on the model's device and, where
            that is a GPU, on the host too (a linear lens's float64 normal equations, copied there to be solved).
        recorded_bytes: Transient memory of every block's output recorded for one batch beside the forward
            pass (the lens corpus: all positions of all blocks, then the real positions stacked).
        device_f64_flops, host_f64_flops: float64 FLOPs beside the workloads on the model's device and
            on the host CPU (a linear lens's normal equations: summed, then solved).
    """

    rule: str
    model: str
    dataset: str
    shard: int
    n_shards: int
    shape: ModelShape
    workloads: tuple[Workload, ...]
    token_source: str = "estimate"
    held_bytes: int = 0
    device_f64_flops: float = 0.0
    host_f64_flops: float = 0.0
    recorded_bytes: int = 0


# A float64 FLOP costs two float32 ones: half the vector width on a CPU, half the FP32 rate or less on GPUs.
FLOAT64_COST = 2.0


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
    host_s: float = 0.0
    vocab_size: int = METRIC_VOCAB_REF  # the model's: the lens metrics' cost per logit depends on it

    @property
    def est_s(self) -> float:
        """Estimated wall time: fixed part plus compute."""
        return self.fixed_s + self.compute_s

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.rule, self.model, self.dataset, self.shard)


@dataclass(frozen=True)
class WorkloadCost:
    """What one workload costs: FLOPs, compute seconds (rates applied) and memory, bytes.

    ``terms`` are the amounts the rates apply to (see :data:`COST_TERMS`): ``compute_s = flops_32 / gflops_32
    + flops_16 / gflops_16 + bytes / gbps + logits * metric_ns + layer_passes * step_us`` (one of the two
    FLOP terms is zero: a run has one weight dtype).
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
    flops = forward + lens
    terms = (
        flops if run.dtype_bytes == DISK_BYTES else 0.0,
        0.0 if run.dtype_bytes == DISK_BYTES else flops,
        _streamed_bytes(shape, work, run, passes),
        shape.n_layers * work.lens_rows * shape.vocab_size,
        shape.n_layers * passes,
    )
    seconds = compute_seconds(terms, rates, shape.vocab_size)
    return WorkloadCost(forward, lens, seconds, terms, *_workload_memory(shape, work, run))


# What the rates apply to: float32 and 16-bit FLOPs (at gflops_32, gflops_16), bytes streamed (at gbps),
# lens logits (metric_ns each) and layer passes (step_us each).
COST_TERMS = ("flops_32", "flops_16", "streamed_bytes", "lens_logits", "layer_passes")
# The terms a CPU job's threads share out (matmuls and lens metrics); streaming and steps do not scale.
THREADED_TERMS = (True, True, False, True, False)


def compute_seconds(terms: Sequence[float], rates: DeviceRates, vocab_size: int) -> float:
    """Seconds of a job's (or workload's) :data:`COST_TERMS` at ``rates``, for a model of ``vocab_size``."""
    flops_32, flops_16, streamed, logits, passes = terms
    return (
        flops_32 / (rates.gflops_32 * 1e9)
        + flops_16 / (rates.gflops_16 * 1e9)
        + streamed / (rates.gbps * 1e9)
        + logits * rates.metric_ns_at(vocab_size) * 1e-9
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


def loading_bytes(n_params: int, dtype_bytes: int) -> int:
    """Peak memory of loading a materialized model: in float32 the weights map the file as they are;
    in another dtype the file's float32 pages are read while the converted copy fills."""
    return n_params * (DISK_BYTES + dtype_bytes if dtype_bytes != DISK_BYTES else DISK_BYTES)


def tokenizer_bytes(shape: ModelShape) -> int:
    """Resident memory of the model's loaded tokenizer (a causal LM's; an image classifier has none)."""
    return 0 if shape.image_tokens else TOKENIZER_BASE_BYTES + TOKENIZER_BYTES_PER_ENTRY * shape.vocab_size


def plan_job(job: Job, run: RunSettings, settings: PlanSettings) -> JobPlan:
    """The plan of one job (see the module docstring for the model)."""
    rates = settings.rates(run)
    costs = [workload_cost(job.shape, w, run, rates) for w in job.workloads]
    weights = job.shape.n_params * run.dtype_bytes
    transient = max(c.kv_bytes + c.activation_bytes + c.lens_bytes for c in costs) + job.recorded_bytes
    store = sum(c.store_bytes for c in costs)
    loading = loading_bytes(job.shape.n_params, run.dtype_bytes)
    host = rates.host_overhead_mb * MIB + tokenizer_bytes(job.shape)
    if run.device == "cuda":
        device_peak = weights + transient + job.held_bytes + rates.device_overhead_mb * MIB
        host_peak = max(loading, store + job.held_bytes) + host
    else:
        device_peak = host_peak = max(loading, weights + transient + store + job.held_bytes) + host
    # The store is written once (half the buffers).
    io_s = (job.shape.n_params * DISK_BYTES + store / 2) / (settings.io_gbps * 1e9)
    # float64 work counts as float32 FLOPs (a calibrated term) where it runs on the job's device: the sums, and
    # on a CPU run the solves too; a GPU run's solves take host seconds at the CPU's rate (not calibrated there).
    device_f64 = FLOAT64_COST * (job.device_f64_flops + (job.host_f64_flops if run.device == "cpu" else 0.0))
    host_f64_s = 0.0
    if run.device != "cpu":
        host_f64_s = FLOAT64_COST * job.host_f64_flops / (settings.cpu_gflops * run.threads * 1e9)
    fixed = settings.overhead_s + io_s + host_f64_s
    terms = [sum(c.terms[i] for c in costs) for i in range(len(COST_TERMS))]
    terms[0] += device_f64
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
        lens_flops=sum(c.lens_flops for c in costs) + job.device_f64_flops + job.host_f64_flops,
        weights_bytes=int(weights),
        kv_bytes=max(c.kv_bytes for c in costs),
        lens_bytes=max(c.lens_bytes for c in costs),
        activation_bytes=max(c.activation_bytes for c in costs),
        store_bytes=int(store),
        device_peak_bytes=int(device_peak),
        host_peak_bytes=int(host_peak),
        compute_s=sum(c.compute_s for c in costs) + device_f64 / (rates.gflops_32 * 1e9),
        fixed_s=fixed,
        fits_context=all(w.max_prompt_tokens + w.new_tokens <= job.shape.max_positions for w in job.workloads),
        fits_device=run.device != "cuda" or device_peak <= settings.gpu_mem_gb * GIB,
        terms=tuple(terms),
        io_s=io_s,
        host_s=host_f64_s,
        vocab_size=job.shape.vocab_size,
    )
