"""The cost of one job from its model shape and workload: FLOPs, peak memory, time and cluster request.

Every extraction job (one per model x dataset, or per shard of ``compute.prompts_per_job``
prompts) and the per-model layer-skip jobs get FLOPs, peak memory,
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
Default rates are stated on :class:`PlanSettings`;
:func:`entropy_lens.workflow.plan.calibration.calibrate` rescales them from measured
Snakemake benchmarks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from entropy_lens.workflow.plan.shapes import ModelShape

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
# Values per (prompt, token, layer) in a profile store: entropy, nucleus size, Jaccard, top-1, + one per alpha.
STORE_VALUES = 4


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
    return WorkloadCost(forward, lens, compute_seconds(terms, rates), terms, *_workload_memory(shape, work, run))


# What the rates apply to: FLOPs (at gflops), bytes streamed (at gbps), lens logits (metric_ns each)
# and layer passes (step_us each).
COST_TERMS = ("flops", "streamed_bytes", "lens_logits", "layer_passes")


def compute_seconds(terms: Sequence[float], rates: DeviceRates) -> float:
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
