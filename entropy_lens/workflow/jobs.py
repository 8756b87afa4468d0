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
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from entropy_lens.workflow.timings import peak_line

if TYPE_CHECKING:
    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.model.lens_model import LensModel
    from entropy_lens.store.storage import Layout

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(job: Any) -> None:
    """Send the job's logging, warnings and stderr (tracebacks, progress bars) to ``job.log[0]``.

    Snakemake prints the log path of a failed job; with stderr redirected, the traceback
    is in that file instead of lost in the terminal of a cluster node. The log ends with the job's exact
    peak memory (:func:`entropy_lens.workflow.timings.peak_line`), which Snakemake's sampling can miss.

    Snakemake's terminal would then say only "check log file": a job that fails on bad input (``ValueError``,
    ``TypeError``, ``OSError``: messages that name the value and the fix) also writes that message, one line, to
    the terminal's stderr (:func:`report_errors`).
    """
    if not job.log:
        raise ValueError("the rule declares no log file; add `log:` so that the job's output has a home")
    report_errors(os.fdopen(os.dup(2), "w", buffering=1), getattr(job, "rule", "") or "job")
    stream = open(job.log[0], "a", buffering=1)  # noqa: SIM115 - lives as long as the job
    logging.basicConfig(stream=stream, level=logging.INFO, format=LOG_FORMAT, force=True)
    logging.captureWarnings(True)
    sys.stderr = stream
    os.dup2(stream.fileno(), 2)  # C extensions and child processes write to fd 2 directly
    atexit.register(lambda: logging.getLogger(__name__).info(peak_line()))  # plan_vs_run reads it


# Errors whose message is written for the user (the value at fault and the fix): shown on the terminal too.
USER_ERRORS = (ValueError, TypeError, OSError)


def report_errors(terminal: TextIO, rule: str) -> None:
    """Make an uncaught user error print ``entropy-lens: rule RULE: MESSAGE`` (its first line) on ``terminal``
    after the traceback goes where stderr goes (the job's log); other errors keep the traceback alone."""
    hook = sys.excepthook

    def report(kind: type[BaseException], err: BaseException, trace: TracebackType | None) -> None:
        hook(kind, err, trace)
        if issubclass(kind, USER_ERRORS):
            first = (str(err).strip().splitlines() or [kind.__name__])[0]
            terminal.write(f"entropy-lens: rule {rule}: {first}\n")
            terminal.flush()

    sys.excepthook = report


@contextlib.contextmanager
def job_model(job: Any) -> Iterator[LensModel]:
    """Claim ``job.params.device`` (a free GPU, or the CPU), use ``job.threads`` CPU threads (warning where they
    are not ``compute.threads``: the bytes written depend on them) and load ``job.input.model`` in
    ``job.params.dtype``.

    torch is imported here, not with the module: every job calls :func:`setup_logging`, and a job without a model
    (gathering shards, a table, a figure) would pay its import, about 1.3 s of CPU of the 3.5 s this module took.
    """
    import torch

    from entropy_lens.model.devices import claim_device
    from entropy_lens.model.loading import load_model

    torch.set_num_threads(max(int(job.threads), 1))
    warn_scaled_threads(job)
    with claim_device(job.params.device) as claimed:
        yield load_model(job.input.model, device=claimed, dtype=job.params.dtype)


def lens_settings(job: Any) -> LensSettings:
    """The lens a model job reads through: what it measures from ``job.params.lens`` (``top_p``, ``alphas``,
    ``top_k``: rerun triggers) and its working memory from the run config (``job.config["lens"]["budget_mb"]``).

    The memory is read at run time and never a rule param: it sets how the vocabulary is tiled and the rows
    chunked, not what is computed, so changing it must not rerun an extraction.
    """
    from entropy_lens.lens.decoding import LensSettings

    return LensSettings.from_config({**job.params.lens, "budget_mb": job.config["lens"]["budget_mb"]})


def scaled_threads_line(configured: int, granted: int) -> str:
    """What it means that a model job runs on ``granted`` threads where ``compute.threads`` asks ``configured``."""
    return (
        f"compute.threads is {configured} but model jobs run on {granted} (Snakemake scales a rule's threads down to "
        f"--cores and --max-threads, or --set-threads set them): its float sums, and so its stores' and tables' last "
        f"bits, differ from a run on {configured} threads; run with --cores {configured} or more, or set "
        f"compute.threads: {granted}"
    )


def warn_scaled_threads(job: Any) -> None:
    """Log :func:`scaled_threads_line` when the job's threads are not the config's ``compute.threads``."""
    configured, granted = int(job.config["compute"]["threads"]), int(job.threads)
    if granted != configured:
        logging.getLogger(__name__).warning(scaled_threads_line(configured, granted))


def store_layout(job: Any) -> Layout:
    """The chunk layout a job writes its store in: the run config's ``storage`` section (``job.config``).

    Read at write time and never a rule param: the layout changes how a store is cut into files, not one
    value in it, so changing it must not rerun the extraction that computed the values. Stores written
    after the change take the new layout; ``--forcerun combine_profiles`` rewrites the combined ones.
    """
    from entropy_lens.store.storage import Layout

    return Layout.from_config(job.config["storage"])
