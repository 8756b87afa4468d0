"""How fast this host multiplies matrices in each weight dtype: the probe the cost plan scales its CPU rates by.

CPUs differ most in their matmul rates: on one host with AMX a 512 x 1536 x 8960 bfloat16 matmul ran about
eight times faster than on another whose CPU multiplies bfloat16 in software. The plan's CPU rates are
calibrated from whole runs on one host (``scripts/calibrate_plan.py``), which records that host's probe beside
them; on another host the plan scales each matmul rate by the ratio of the two probes
(:meth:`entropy_lens.workflow.plan.settings.PlanSettings.for_host`). The probe takes about a second (longer
where bfloat16 runs in software) and is kept per host in a small JSON file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

# One MLP projection of a 1.5B model on a batch of 512 tokens: large enough to reach the sustained rate,
# small enough to take a fraction of a second where bfloat16 runs in software.
PROBE_SHAPE = (512, 1536, 4096)
PROBE_REPEATS = 5
CACHE_ENV = "ENTROPY_LENS_CACHE"
# The CPU flags that decide a matmul's speed (the vector width and the bfloat16 units).
RATE_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "asimd", "sve", "bf16")


@dataclass(frozen=True)
class HostRates:
    """One host's probed matmul rates on one thread, GFLOP/s.

    Attributes:
        host: The CPU's model name and the flags that decide its matmul speed.
        float32: float32 weights.
        bfloat16: bfloat16 weights (the plan's 16-bit rate).
    """

    host: str
    float32: float
    bfloat16: float

    def __post_init__(self) -> None:
        for name in ("float32", "bfloat16"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"host rate {name} must be > 0 GFLOP/s, got {value!r}")


def host_name() -> str:
    """The CPU's model name and its matmul flags, e.g. ``"Intel(R) Xeon(R) Processor [avx2 avx512f amx_bf16]"``."""
    model, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
            elif key.strip() in ("flags", "Features"):
                flags = set(value.split())
    return f"{model} [{' '.join(f for f in RATE_FLAGS if f in flags)}]"


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _rate(dtype: torch.dtype, shape: tuple[int, int, int], repeats: int) -> float:
    m, k, n = shape
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(dtype)
    b = torch.randn(k, n, generator=generator).to(dtype)
    torch.matmul(a, b)  # warm-up: kernel selection and first-touch pages
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * m * k * n / best / 1e9


def measure_host_rates(shape: tuple[int, int, int] = PROBE_SHAPE, repeats: int = PROBE_REPEATS) -> HostRates:
    """This host's float32 and bfloat16 matmul rates on one thread (the best of ``repeats`` after a warm-up,
    so a busy moment on the other cores costs as little as it can)."""
    if repeats < 1 or min(shape) < 1:
        raise ValueError(f"probe needs repeats >= 1 and a positive shape, got repeats={repeats}, shape={shape}")
    with _one_thread(), torch.inference_mode():
        float32 = _rate(torch.float32, shape, repeats)
        bfloat16 = _rate(torch.bfloat16, shape, repeats)
    return HostRates(host_name(), float32, bfloat16)


def default_cache() -> Path:
    """Where probes are kept: ``$ENTROPY_LENS_CACHE/host_rates`` or ``~/.cache/entropy_lens/host_rates``."""
    root = os.environ.get(CACHE_ENV)
    return (Path(root) if root else Path.home() / ".cache" / "entropy_lens") / "host_rates"


def host_rates(cache: str | os.PathLike | None = None) -> HostRates:
    """This host's rates, probed once and then read from ``cache`` (one JSON file per host name).

    A cache file that cannot be read is probed again and replaced (written whole, then renamed).
    """
    folder = Path(cache) if cache is not None else default_cache()
    name = host_name()
    path = folder / f"{hashlib.sha256(name.encode()).hexdigest()[:16]}.json"
    with contextlib.suppress(OSError, ValueError, TypeError):
        cached = HostRates(**json.loads(path.read_text(encoding="utf-8")))
        if cached.host == name:
            return cached
    rates = measure_host_rates()
    logger.info("probed %s: %.0f GFLOP/s float32, %.0f bfloat16 per thread", name, rates.float32, rates.bfloat16)
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(json.dumps(asdict(rates)), encoding="utf-8")
        partial.replace(path)
    return rates
