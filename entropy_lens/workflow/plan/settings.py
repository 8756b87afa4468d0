"""What the plan assumes about the machine and the run: each device's rates, the plan's settings
(rates, overheads, margins and floors, the config's ``plan:`` section) and where and how the jobs run
(device, dtype, threads, lens budget).

Default rates are stated on :class:`PlanSettings`;
:func:`entropy_lens.workflow.plan.calibration.calibrate` rescales them from measured
Snakemake benchmarks, and :func:`scaled_to_host` carries CPU matmul rates from the calibrating host to
this one by their matmul probes (:mod:`entropy_lens.model.probe`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

GIB = 2**30
MIB = 2**20
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Mirrors entropy_lens.model.loading.default_dtype (bf16 on GPUs, float32 on CPUs) without importing torch.
AUTO_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
# The vocabulary the lens metrics' cost per logit is stated at: a vocabulary of V costs (V / this) ** exponent
# times as much per logit (PlanSettings.cpu_metric_vocab_exponent).
METRIC_VOCAB_REF = 65_536


def vocab_factor(vocab_size: int, exponent: float) -> float:
    """How much more a lens logit costs in a vocabulary of ``vocab_size`` than at :data:`METRIC_VOCAB_REF`."""
    return (vocab_size / METRIC_VOCAB_REF) ** exponent


@dataclass(frozen=True)
class DeviceRates:
    """What one device sustains for one run (see :meth:`PlanSettings.rates`): matmul rates in float32 and
    in 16-bit with the run's threads, and the rest."""

    gflops_32: float
    gflops_16: float
    gbps: float
    metric_ns: float
    step_us: float
    host_overhead_mb: float
    device_overhead_mb: float
    metric_vocab_exponent: float = 0.0

    def metric_ns_at(self, vocab_size: int) -> float:
        """Lens metrics, ns per logit, for a vocabulary of ``vocab_size``."""
        return self.metric_ns * vocab_factor(vocab_size, self.metric_vocab_exponent)


@dataclass(frozen=True)
class PlanSettings:
    """Rates, overheads, margins and floors of the plan (the config's ``plan:`` section).

    CPU rates are per thread: a job with ``compute.threads`` threads runs its matmuls and lens
    metrics that many times faster (streaming and per-step latency do not scale). Matmul rates are
    stated per weight dtype: float32, and bfloat16/float16 (``*_bf16_gflops``; on CPUs with AVX512-BF16
    a 2048 x 1536 x 8960 matmul ran 315 GFLOP/s in bfloat16 against 112 in float32 on two threads,
    ``docs/guide.md``). CUDA defaults are a third of an A100's dense peak (312 TFLOP/s bf16, 19.5
    TFLOP/s float32) and three quarters of its HBM bandwidth (2,039 GB/s), per NVIDIA's datasheet; the
    metric and per-step costs there are estimates. :func:`calibrate` replaces guesses with measurements
    (the config's ``plan:`` section holds this machine's).

    Attributes:
        cpu_gflops, cpu_bf16_gflops: Sustained matmul rate per thread, float32 and 16-bit weights, GFLOP/s.
        cuda_gflops, cuda_fp32_gflops: Sustained matmul rate, 16-bit and float32 weights, GFLOP/s.
        cpu_gbps, cuda_gbps: Rate weights (and KV cache) stream through a forward pass, GB/s.
        cpu_metric_ns, cuda_metric_ns: Lens metrics (softmax, entropies, nucleus), ns per logit (one CPU thread)
            at a vocabulary of :data:`METRIC_VOCAB_REF` (65,536).
        cpu_metric_vocab_exponent, cuda_metric_vocab_exponent: How the metrics' cost per logit grows with the
            vocabulary ``V``: times ``(V / 65,536) ** exponent``. A wider vocabulary keeps more top-p candidates
            per row to rank (up to ``V / 8``) and its rows outgrow the caches. Measured on this machine's CPU
            (non-matmul lens seconds per logit, one thread, float32), SmolLM2's 49 k, Qwen2.5's 152 k and
            Gemma-3's 262 k vocabularies cost 7.9, 13.3 and 16.9 ns on blank prompts (exponent 0.46) and 4.8,
            9.8 and 8.3 ns on the formats prompts; :func:`calibrate` fits it with the rates. 0 (the default):
            the same cost per logit at every vocabulary.
        cpu_step_us, cuda_step_us: Fixed latency per layer per forward pass, microseconds.
        overhead_s: Per job: process start, imports, loading code, seconds.
        io_gbps: Reading the (float32, materialized) weights and writing the store, GB/s.
        cpu_overhead_mb: Resident memory of a CPU job before its model and tokenizer: Python, torch,
            transformers, the store libraries and the job's script (331 MB measured after the extraction
            job's imports).
        cuda_host_overhead_mb: Host memory of the runtime with CUDA libraries loaded.
        cuda_context_mb: GPU memory of the CUDA context and library workspaces.
        safety: Runtime requests are the estimated time times this factor.
        mem_margin: Memory requests are the predicted peak times this margin. 1.5: the lowest predicted /
            measured peak seen on this machine's runs was 0.71 (float32 CPU jobs, whose running phase holds
            more than the plan counts), so a request is 1.07x of the largest peak measured.
        min_runtime_min: Floor of the runtime request, minutes.
        min_mem_mb: Floor of the memory request, MB.
        gpu_mem_gb: GPU memory a job may use; rows above it are flagged.
        chars_per_token: Characters per token when no tokenizer is at hand (4.0 measured on MMLU
            prompts with the registry models' tokenizers).
        chat_template_tokens: Tokens a chat template adds when no tokenizer is at hand (29-30
            measured for the registry models' templates).
        cpu_probe_gflops, cpu_probe_bf16_gflops: The matmul probe (:mod:`entropy_lens.model.probe`, one
            thread) of the host the CPU rates were calibrated on, float32 and bfloat16; 0: not recorded.
            Where recorded, a CPU plan scales its matmul rates to the planning host (:meth:`for_host`).
    """

    cpu_gflops: float = 25.0
    cpu_bf16_gflops: float = 70.0
    cpu_gbps: float = 2.0
    cpu_metric_ns: float = 160.0
    cpu_step_us: float = 100.0
    cuda_gflops: float = 100_000.0
    cuda_fp32_gflops: float = 6_500.0
    cuda_gbps: float = 1_500.0
    cuda_metric_ns: float = 0.1
    cuda_step_us: float = 100.0
    cpu_metric_vocab_exponent: float = 0.0
    cuda_metric_vocab_exponent: float = 0.0
    overhead_s: float = 30.0
    io_gbps: float = 0.5
    cpu_overhead_mb: float = 330.0
    cuda_host_overhead_mb: float = 3072.0
    cuda_context_mb: float = 1024.0
    safety: float = 1.5
    mem_margin: float = 1.5
    min_runtime_min: int = 10
    min_mem_mb: int = 2000
    gpu_mem_gb: float = 80.0
    chars_per_token: float = 4.0
    chat_template_tokens: int = 30
    cpu_probe_gflops: float = 0.0
    cpu_probe_bf16_gflops: float = 0.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"plan setting {field.name} must be a non-negative number, got {value!r}")
        rates = ("cpu_gflops", "cpu_bf16_gflops", "cpu_gbps", "cuda_gflops", "cuda_fp32_gflops", "cuda_gbps")
        zero = [name for name in (*rates, "io_gbps", "chars_per_token") if getattr(self, name) == 0]
        if zero or self.safety < 1 or self.mem_margin < 1:
            raise ValueError(
                f"plan rates must be > 0 and safety and mem_margin >= 1; got "
                f"{zero or {'safety': self.safety, 'mem_margin': self.mem_margin}}"
            )

    @property
    def has_probe(self) -> bool:
        """Whether the calibrating host's probe is recorded (both dtypes), so the CPU rates can be scaled."""
        return self.cpu_probe_gflops > 0 and self.cpu_probe_bf16_gflops > 0

    def for_host(self, float32: float, bfloat16: float) -> PlanSettings:
        """These settings with the CPU matmul rates scaled from the calibrating host to one whose probe ran
        ``float32`` and ``bfloat16`` GFLOP/s per thread (the probe recorded is then that host's).

        Raises:
            ValueError: when no probe is recorded, or for a rate that is not > 0.
        """
        if not self.has_probe:
            raise ValueError("no calibrating host's probe is recorded (plan.cpu_probe_gflops, cpu_probe_bf16_gflops)")
        if not (float32 > 0 and bfloat16 > 0):
            raise ValueError(f"host probe rates must be > 0 GFLOP/s, got float32={float32!r}, bfloat16={bfloat16!r}")
        return dataclasses.replace(
            self,
            cpu_gflops=self.cpu_gflops * float32 / self.cpu_probe_gflops,
            cpu_bf16_gflops=self.cpu_bf16_gflops * bfloat16 / self.cpu_probe_bf16_gflops,
            cpu_probe_gflops=float32,
            cpu_probe_bf16_gflops=bfloat16,
        )

    def rates(self, run: RunSettings) -> DeviceRates:
        """The rates of ``run``'s device, with its threads on a CPU."""
        if run.device == "cpu":
            t = run.threads
            return DeviceRates(
                self.cpu_gflops * t,
                self.cpu_bf16_gflops * t,
                self.cpu_gbps,
                self.cpu_metric_ns / t,
                self.cpu_step_us,
                self.cpu_overhead_mb,
                0.0,
                self.cpu_metric_vocab_exponent,
            )
        return DeviceRates(
            self.cuda_fp32_gflops,
            self.cuda_gflops,
            self.cuda_gbps,
            self.cuda_metric_ns,
            self.cuda_step_us,
            self.cuda_host_overhead_mb,
            self.cuda_context_mb,
            self.cuda_metric_vocab_exponent,
        )

    def rate_fields(self, device: str) -> tuple[str, ...]:
        """The settings a calibration on ``device`` fits, in :data:`~entropy_lens.workflow.plan.cost.COST_TERMS`
        order (float32 and 16-bit matmuls, streaming, metrics, steps)."""
        if device not in AUTO_DTYPE:
            raise ValueError(f"device must be one of {sorted(AUTO_DTYPE)}, got {device!r}")
        if device == "cpu":
            return ("cpu_gflops", "cpu_bf16_gflops", "cpu_gbps", "cpu_metric_ns", "cpu_step_us")
        return ("cuda_fp32_gflops", "cuda_gflops", "cuda_gbps", "cuda_metric_ns", "cuda_step_us")

    def vocab_exponent_field(self, device: str) -> str:
        """The setting of ``device``'s metric vocabulary exponent (fitted beside :meth:`rate_fields`)."""
        self.rate_fields(device)  # checks the device
        return f"{device}_metric_vocab_exponent"


@dataclass(frozen=True)
class RunSettings:
    """Where and how the jobs run (from the config's ``compute`` and ``lens`` sections).

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        dtype: ``"auto"``, ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        lens_budget_mb: Working memory of the lens for one generation step.
        threads: CPU threads per model job (``compute.threads``; a CUDA job's rates ignore it).
    """

    device: str
    dtype: str = "auto"
    lens_budget_mb: int = 512
    threads: int = 1

    def __post_init__(self) -> None:
        if self.device not in AUTO_DTYPE:
            raise ValueError(f"device must be one of {sorted(AUTO_DTYPE)}, got {self.device!r}")
        if self.dtype != "auto" and self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be 'auto' or one of {sorted(DTYPE_BYTES)}, got {self.dtype!r}")
        if not isinstance(self.threads, int) or isinstance(self.threads, bool) or self.threads < 1:
            raise ValueError(f"threads must be a positive integer, got {self.threads!r}")

    @property
    def dtype_bytes(self) -> int:
        """Bytes per weight (and activation) in the dtype the model runs in."""
        return DTYPE_BYTES[AUTO_DTYPE[self.device] if self.dtype == "auto" else self.dtype]


def scaled_to_host(settings: PlanSettings, run: RunSettings) -> PlanSettings:
    """``settings`` with its CPU matmul rates scaled to this host's probe, where the calibrating host's probe
    is recorded and the jobs run on this host's CPU; otherwise ``settings`` as they are.

    A CPU job planned here runs here (a SLURM run on CPU nodes plans on the submitting host: set
    ``plan.cpu_probe_gflops: 0`` there, or calibrate on the nodes).
    """
    if run.device != "cpu" or not settings.has_probe:
        return settings
    from entropy_lens.model.probe import host_rates  # torch is imported only where a CPU plan is scaled

    host = host_rates()
    return settings.for_host(host.float32, host.bfloat16)


def config_value(section: Mapping, *keys: str):
    """``section[k1][k2]...``, or a ValueError naming the dotted key."""
    value = section
    for depth, key in enumerate(keys):
        if not isinstance(value, Mapping) or key not in value:
            raise ValueError(
                f"config lacks {'.'.join(keys[: depth + 1])}; load it with workflow.settings.load_config, "
                "which fills the defaults"
            )
        value = value[key]
    return value
