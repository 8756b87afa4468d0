"""Where a run's time went: Snakemake ``benchmark:`` files summarized per rule, and each job's exact peak memory.

Every rule writes ``results/benchmarks/<rule>/<wildcards>.tsv`` (or
``results/benchmarks/<rule>.tsv``): one row with the job's wall seconds (``s``), peak
resident memory (``max_rss``, MB) and CPU seconds (``cpu_time``). Snakemake samples that memory (once a
second, then every 30 s), so a short peak, such as loading a model in another dtype than its file, can fall
between samples; every job also ends its log with its exact peak (:data:`PEAK_LINE`, the kernel's high-water
mark of the job's own memory, ``VmHWM``), read back by :func:`read_peak`. (``getrusage``'s ``ru_maxrss`` would
not do: a process started by ``exec`` straight from a fork keeps the parent's resident size at the fork, here
Snakemake's.)
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pandas as pd

TIMING_COLUMNS = ("rule", "jobs", "seconds", "share", "max_seconds", "slowest_job", "max_rss_mb", "cpu_seconds")
# The last line of every job's log: its exact peak resident memory.
PEAK_LINE = "peak resident memory: {mb:.1f} MB (VmHWM)"
_PEAK = re.compile(r"peak resident memory: ([0-9.]+) MB \(VmHWM\)")
_HWM = re.compile(r"^VmHWM:\s+(\d+) kB", re.MULTILINE)


def peak_mb() -> float:
    """This process's own peak resident memory so far, MB: ``VmHWM`` of ``/proc/self/status`` (the high-water mark
    of this program's memory, from its ``exec`` on), or NaN where the system has no such file."""
    try:
        found = _HWM.search(Path("/proc/self/status").read_text(encoding="utf-8"))
    except OSError:
        return math.nan
    return int(found.group(1)) / 1024 if found else math.nan


def peak_line() -> str:
    """This process's peak resident memory so far, as :data:`PEAK_LINE`."""
    return PEAK_LINE.format(mb=peak_mb())


def read_peak(log: str | os.PathLike) -> float:
    """The exact peak (MB) a job's log ends with, or NaN where the log is missing or has none (a job that
    did not end, or ran before jobs logged it)."""
    path = Path(log)
    if not path.is_file():
        return math.nan
    found = _PEAK.findall(path.read_text(encoding="utf-8", errors="replace"))
    return float(found[-1]) if found else math.nan


def read_benchmarks(folder: str | os.PathLike) -> pd.DataFrame:
    """One row per benchmark file under ``folder``: ``rule, job, s, max_rss, cpu_time``.

    ``rule`` is the first path part below ``folder`` (the file stem for a rule without
    wildcards) and ``job`` the rest of the path without ``.tsv``.
    """
    root = Path(folder)
    files = sorted(root.rglob("*.tsv"))
    if not files:
        raise ValueError(f"no benchmark files under {str(root)!r}; rules write them with `benchmark:`")
    rows = []
    for path in files:
        parts = path.relative_to(root).with_suffix("").parts
        rows.append({"rule": parts[0], "job": "/".join(parts[1:]) or parts[0], **read_benchmark(path)})
    return pd.DataFrame(rows)


def read_benchmark(path: str | os.PathLike) -> dict[str, float]:
    """Wall seconds ``s``, peak ``max_rss`` (MB) and ``cpu_time`` of one Snakemake ``benchmark:`` TSV.

    A benchmark repeated with ``repeat()`` keeps its last run; a missing or unparsable
    memory or CPU figure is NaN.
    """
    table = pd.read_csv(path, sep="\t")
    if "s" not in table.columns or table.empty:
        raise ValueError(f"{path} is not a Snakemake benchmark file (columns {list(table.columns)})")
    last = table.iloc[-1]
    return {
        "s": float(last["s"]),
        "max_rss": float(pd.to_numeric(last.get("max_rss", math.nan), errors="coerce")),
        "cpu_time": float(pd.to_numeric(last.get("cpu_time", math.nan), errors="coerce")),
    }


def timing_table(folder: str | os.PathLike) -> pd.DataFrame:
    """Seconds, share of the total and peak memory per rule, slowest rule first.

    Returns:
        Columns :data:`TIMING_COLUMNS`; ``seconds`` sums the rule's jobs (jobs may have
        run side by side, so the sum can exceed the wall time of the run), and a last
        row ``total`` sums every job.
    """
    jobs = read_benchmarks(folder)
    slowest = jobs.loc[jobs.groupby("rule")["s"].idxmax(), ["rule", "job"]].set_index("rule")["job"]
    table = jobs.groupby("rule").agg(
        jobs=("job", "size"),
        seconds=("s", "sum"),
        max_seconds=("s", "max"),
        max_rss_mb=("max_rss", "max"),
        cpu_seconds=("cpu_time", "sum"),
    )
    table = table.assign(slowest_job=slowest, share=table["seconds"] / table["seconds"].sum())
    table = table.sort_values("seconds", ascending=False).reset_index()
    total = {
        "rule": "total",
        "jobs": int(table["jobs"].sum()),
        "seconds": table["seconds"].sum(),
        "share": 1.0,
        "max_seconds": table["max_seconds"].max(),
        "slowest_job": "",
        "max_rss_mb": table["max_rss_mb"].max(),
        "cpu_seconds": table["cpu_seconds"].sum(),
    }
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)[list(TIMING_COLUMNS)]
