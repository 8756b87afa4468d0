"""Which device a job runs on: one GPU per job, claimed with a lock file.

Snakemake counts GPUs (``--resources gpu=N``) but does not say which one a job may
use.  A job claims the first GPU whose lock it can take and holds it while it runs,
so N jobs on an N-GPU node land on N different devices.

Small models on a large GPU can share it: ``ENTROPY_LENS_JOBS_PER_GPU=S`` gives every GPU ``S``
slots (one lock each), and ``--resources gpu=N*S`` lets Snakemake run that many model jobs at once.
It is a scheduling choice, not a result's input, so it is an environment variable and changes no
job's params (nothing reruns).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

LOCK_DIR_ENV = "ENTROPY_LENS_GPU_LOCKS"
SLOTS_ENV = "ENTROPY_LENS_JOBS_PER_GPU"


def _lock_dir() -> Path:
    path = Path(os.environ.get(LOCK_DIR_ENV, Path(tempfile.gettempdir()) / "entropy_lens_gpu_locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def jobs_per_gpu() -> int:
    """How many jobs may share one GPU (:data:`SLOTS_ENV`, default 1)."""
    raw = os.environ.get(SLOTS_ENV, "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{SLOTS_ENV}={raw!r} is not a positive whole number; unset it or set e.g. {SLOTS_ENV}=4")
    return int(raw)


@contextlib.contextmanager
def claim_device(device: str) -> Iterator[str]:
    """Yield a concrete device: ``"cpu"``, or ``"cuda:i"`` for a GPU slot no other job holds.

    Raises:
        ValueError: for ``"cuda"`` on a machine without CUDA, an unknown device, or a bad :data:`SLOTS_ENV`.
        RuntimeError: when every slot of every GPU is held by another job.
    """
    if device == "cpu":
        yield "cpu"
        return
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError("device 'cuda' was configured but no CUDA device is visible; set compute.device: cpu")
    slots = jobs_per_gpu()
    # Slot-major: N jobs on an N-GPU node still land on N different devices before any GPU takes two.
    for slot, index in itertools.product(range(slots), range(torch.cuda.device_count())):
        name = f"gpu{index}.lock" if slot == 0 else f"gpu{index}.slot{slot}.lock"
        with open(_lock_dir() / name, "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            logger.info("claimed cuda:%d (slot %d of %d)", index, slot + 1, slots)
            try:
                yield f"cuda:{index}"
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
            return
    raise RuntimeError(
        f"all {torch.cuda.device_count()} GPUs x {slots} slots are held by other jobs; lower --resources gpu"
        f" or raise {SLOTS_ENV}"
    )
