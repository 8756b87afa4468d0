"""What every workflow job does first: log to its file, and (model jobs) claim a device and load.

Workflow scripts call these so that each stays a few lines: read inputs, call one
library function, write outputs.  Nothing here imports Snakemake; a job is anything
with Snakemake's ``log`` (and, for model jobs, ``input.model``,
``params.device``, ``params.dtype`` and ``threads``) attributes.
"""

from __future__ import annotations

import atexit
import contextlib
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


@contextlib.contextmanager
def job_model(job: Any) -> Iterator[LensModel]:
    """Claim ``job.params.device`` (a free GPU, or the CPU), use ``job.threads`` CPU threads and
    load ``job.input.model`` in ``job.params.dtype``."""
    torch.set_num_threads(max(int(job.threads), 1))
    with claim_device(job.params.device) as claimed:
        yield load_model(job.input.model, device=claimed, dtype=job.params.dtype)
