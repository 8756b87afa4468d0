"""Which device a job runs on: one GPU per job, claimed with a lock file.

Snakemake counts GPUs (``--resources gpu=N``) but does not say which one a job may
use.  A job claims the first GPU whose lock it can take and holds it while it runs,
so N jobs on an N-GPU node land on N different devices.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

LOCK_DIR_ENV = "ENTROPY_LENS_GPU_LOCKS"


def _lock_dir() -> Path:
    path = Path(os.environ.get(LOCK_DIR_ENV, Path(tempfile.gettempdir()) / "entropy_lens_gpu_locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def claim_device(device: str) -> Iterator[str]:
    """Yield a concrete device: ``"cpu"``, or ``"cuda:i"`` for a GPU no other job holds.

    Raises:
        ValueError: for ``"cuda"`` on a machine without CUDA, or an unknown device.
        RuntimeError: when every GPU is held by another job.
    """
    if device == "cpu":
        yield "cpu"
        return
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError("device 'cuda' was configured but no CUDA device is visible; set compute.device: cpu")
    for index in range(torch.cuda.device_count()):
        with open(_lock_dir() / f"gpu{index}.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            logger.info("claimed cuda:%d", index)
            try:
                yield f"cuda:{index}"
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
            return
    raise RuntimeError(f"all {torch.cuda.device_count()} GPUs are held by other jobs; lower --resources gpu")
