"""What the plan assumes about the machine and the run: each device's rates, the plan's settings
(rates, overheads, safety and floors, the config's ``plan:`` section) and where and how the jobs run
(device, dtype, lens budget).

Default rates are stated on :class:`PlanSettings`;
:func:`entropy_lens.workflow.plan.calibration.calibrate` rescales them from measured
Snakemake benchmarks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

GIB = 2**30
MIB = 2**20
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Mirrors entropy_lens.model.loading.default_dtype (bf16 on GPUs, float32 on CPUs) without importing torch.
AUTO_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}


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
