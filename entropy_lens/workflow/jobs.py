"""What every workflow job does first: log to its file, and (model jobs) claim a device and load.

Workflow scripts call these so that each stays a few lines: read inputs, call one
library function, write outputs.  Nothing here imports Snakemake; a job is anything
with Snakemake's ``log`` (and, for model jobs, ``input.model``,
``params.device``, ``params.dtype`` and ``threads``) attributes.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch

from entropy_lens.model.devices import claim_device
from entropy_lens.model.loading import LensModel, load_model
from entropy_lens.workflow.timings import peak_line

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# glibc's mallopt parameters (malloc.h) and the values a model job fixes them at: allocations below 64 MiB come
# from the heap, and the heap's free top is returned to the system only above 128 MiB.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
HEAP_MMAP_THRESHOLD = 64 << 20
HEAP_TRIM_THRESHOLD = 128 << 20


def setup_logging(job: Any) -> None:
    """Send the job's logging, warnings and stderr (tracebacks, progress bars) to ``job.log[0]``.

    Snakemake prints the log path of a failed job; with stderr redirected, the traceback
    is in that file instead of lost in the terminal of a cluster node. The log ends with the job's exact
    peak memory (:func:`entropy_lens.workflow.timings.peak_line`), which Snakemake's sampling can miss.
    """
    if not job.log:
        raise ValueError("the rule declares no log file; add `log:` so that the job's output has a home")
    stream = open(job.log[0], "a", buffering=1)  # noqa: SIM115 - lives as long as the job
    logging.basicConfig(stream=stream, level=logging.INFO, format=LOG_FORMAT, force=True)
    logging.captureWarnings(True)
    sys.stderr = stream
    os.dup2(stream.fileno(), 2)  # C extensions and child processes write to fd 2 directly
    atexit.register(lambda: logging.getLogger(__name__).info(peak_line()))  # plan_vs_run reads it


def steady_heap() -> bool:
    """Fix glibc's mmap and trim thresholds (:data:`HEAP_MMAP_THRESHOLD`, :data:`HEAP_TRIM_THRESHOLD`), so that a
    job's peak memory is the same run to run.

    Left to itself glibc raises both thresholds as a job frees large blocks, by how much depending on the order
    in which its threads free them: SmolLM2-135M's bfloat16 lens fit (two threads) peaked at 2.59-2.65 GB in 4
    of 9 runs and 1.40-1.55 GB in the rest, the difference freed ``[n, V]`` logits the heap kept but did not
    reuse. Fixed, the same job peaked at 1.41-1.51 GB in 8 of 8 runs.

    Returns:
        False where the C library has no ``mallopt`` (not glibc): the job runs under its allocator's defaults.
    """
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    fixed = [
        mallopt(param, value)
        for param, value in ((_M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD))
    ]
    return all(fixed)


@contextlib.contextmanager
def job_model(job: Any) -> Iterator[LensModel]:
    """Claim ``job.params.device`` (a free GPU, or the CPU), use ``job.threads`` CPU threads and
    load ``job.input.model`` in ``job.params.dtype``, under a :func:`steady_heap`."""
    if steady_heap():
        mmap_mib, trim_mib = HEAP_MMAP_THRESHOLD >> 20, HEAP_TRIM_THRESHOLD >> 20
        logging.getLogger(__name__).info(
            "steady heap: glibc mmap threshold %d MiB, trim threshold %d MiB", mmap_mib, trim_mib
        )
    else:
        logging.getLogger(__name__).info("no glibc mallopt: the allocator's own thresholds (peaks may vary)")
    torch.set_num_threads(max(int(job.threads), 1))
    with claim_device(job.params.device) as claimed:
        yield load_model(job.input.model, device=claimed, dtype=job.params.dtype)
