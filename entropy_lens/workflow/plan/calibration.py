"""Predicted against measured: plan times beside Snakemake benchmarks, and rates fitted to them."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from entropy_lens.workflow.plan.cluster import Plan
from entropy_lens.workflow.plan.cost import (
    COST_TERMS,
    EXTRACT,
    EXTRACT_LENS,
    EXTRACT_TWIN,
    FIT_LENS,
    SKIP_EVAL,
    SKIP_SELECT,
    THREADED_TERMS,
    JobPlan,
    compute_seconds,
)
from entropy_lens.workflow.plan.settings import MIB, PlanSettings, RunSettings, vocab_factor
from entropy_lens.workflow.timings import read_benchmark, read_peak


def _benchmark_paths(plan: Plan, patterns: Mapping[str, str]) -> Iterator[tuple[JobPlan, Path]]:
    for job in plan.jobs:
        if job.rule in patterns:
            yield job, Path(patterns[job.rule].format(**_fields(job)))


def benchmark_patterns(root: str | os.PathLike, *, sharded: bool, suffix: str = "tsv") -> dict[str, str]:
    """Where each model rule's jobs write their Snakemake benchmark under ``root`` (``results/benchmarks``),
    as :func:`compare_benchmarks` reads them: one file per job, per shard in a sharded run. The rules lay out
    their logs alike: ``benchmark_patterns("logs", sharded=..., suffix="log")`` gives each job's log."""
    extract = "{model}/{dataset}/shard{shard}" if sharded else "{model}/{dataset}"
    return {
        EXTRACT: f"{root}/extract_profiles/{extract}.{suffix}",
        SKIP_SELECT: f"{root}/layer_skip_select/{{model}}.{suffix}",
        SKIP_EVAL: f"{root}/layer_skip_eval/{{model}}.{suffix}",
        FIT_LENS: f"{root}/fit_lens/{{model}}_{{dataset}}.{suffix}",
        EXTRACT_LENS: f"{root}/extract_lens_profiles/{{model}}/{{dataset}}.{suffix}",  # dataset: "{kind}/{dataset}"
        EXTRACT_TWIN: f"{root}/extract_twin_profiles/{{model}}/{{dataset}}.{suffix}",
    }


def run_records(
    config: Mapping, benchmarks: str | os.PathLike, logs: str | os.PathLike
) -> tuple[dict[str, str], dict[str, str]]:
    """Where a run of ``config`` left each model job's benchmark file (under ``benchmarks``) and log (under
    ``logs``): the ``patterns`` and ``logs`` :func:`compare_benchmarks` and :func:`plan_vs_run` read."""
    sharded = bool(config["compute"]["prompts_per_job"])
    return benchmark_patterns(benchmarks, sharded=sharded), benchmark_patterns(logs, sharded=sharded, suffix="log")


def measured_peak_mb(comparison: pd.DataFrame) -> pd.Series:
    """Each job's peak memory as the plan is judged on it: the exact peak its log ends with, or Snakemake's
    sampled one where the log has none (a job killed before its end)."""
    exact = comparison["peak_rss_mb"]
    return exact.where(exact > 0, comparison["measured_rss_mb"])


def plan_vs_run(plan: Plan, patterns: Mapping[str, str], logs: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Every planned model job beside what it measured: predicted and measured seconds and peak memory
    and their ratios (predicted / measured); a job without a benchmark file keeps NaN there, so a job
    the run skipped shows as a row with no measurement, never as no row. ``logs`` (patterns as
    :func:`benchmark_patterns` with ``suffix="log"``) adds each job's exact peak, which the memory ratio
    then reads (see :func:`compare_benchmarks`)."""
    keys = ["rule", "model", "dataset", "shard"]
    columns = ["measured_s", "ratio", "measured_rss_mb", "peak_rss_mb", "mem_ratio"]
    measured = compare_benchmarks(plan, patterns, logs)[[*keys, *columns]]
    jobs = pd.DataFrame(
        [
            {"rule": j.rule, "model": j.model, "dataset": j.dataset, "shard": j.shard, "predicted_s": j.est_s}
            | {"predicted_mb": j.host_peak_bytes / MIB}
            for j in plan.jobs
        ],
        columns=[*keys, "predicted_s", "predicted_mb"],
    )
    table = jobs.merge(measured, on=keys, how="left")
    return table[[*keys, "predicted_s", "measured_s", "ratio", "predicted_mb", *columns[2:]]]


def compare_benchmarks(plan: Plan, patterns: Mapping[str, str], logs: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Predicted against measured time and memory, for the jobs whose benchmark file exists.

    Args:
        plan: The plan.
        patterns: Benchmark path per rule, formatted with ``model``, ``dataset`` and
            ``shard``, e.g. ``{"extract_profiles": "benchmarks/extract_profiles/{model}/{dataset}.tsv"}``.
        logs: Log path per rule, formatted alike: each job's log ends with its exact peak
            (:func:`entropy_lens.workflow.timings.read_peak`).

    Returns:
        Columns ``rule, model, dataset, shard, predicted_s, compute_s, fixed_s,
        measured_s, ratio`` (predicted / measured), ``predicted_mb, measured_rss_mb`` (Snakemake's
        sampled peak), ``peak_rss_mb`` (the exact peak from the log, VmHWM; NaN without one), ``mem_ratio``
        (predicted over the exact peak, or over the sampled one where the log has none); one row per job
        with a benchmark file.
    """
    rows = []
    for job, path in _benchmark_paths(plan, patterns):
        if not path.is_file():
            continue
        benchmark = read_benchmark(path)
        peak = read_peak(logs[job.rule].format(**_fields(job))) if logs and job.rule in logs else math.nan
        measured = {"measured_s": benchmark["s"], "measured_rss_mb": benchmark["max_rss"], "peak_rss_mb": peak}
        rows.append(
            {
                "rule": job.rule,
                "model": job.model,
                "dataset": job.dataset,
                "shard": job.shard,
                "predicted_s": job.est_s,
                "compute_s": job.compute_s,
                "fixed_s": job.fixed_s,
                **measured,
                "ratio": job.est_s / measured["measured_s"] if measured["measured_s"] > 0 else math.nan,
                "predicted_mb": job.host_peak_bytes / MIB,
            }
        )
    columns = [
        "rule",
        "model",
        "dataset",
        "shard",
        "predicted_s",
        "compute_s",
        "fixed_s",
        "measured_s",
        "ratio",
        "predicted_mb",
        "measured_rss_mb",
        "peak_rss_mb",
        "mem_ratio",
    ]
    table = pd.DataFrame(rows, columns=columns)
    return table.assign(mem_ratio=table["predicted_mb"] / measured_peak_mb(table))


def _fields(job: JobPlan) -> dict[str, object]:
    return {"model": job.model, "dataset": job.dataset, "shard": job.shard}


def calibrate(plan: Plan, comparison: pd.DataFrame, others: Sequence[tuple[Plan, pd.DataFrame]] = ()) -> PlanSettings:
    """The plan's settings with the per-job overhead and the device's rates fitted to measurements.

    Each measured job gives ``measured_s - io_s - host_s = overhead_s + flops_32 / gflops_32 + flops_16 / gflops_16
    + bytes / gbps + logits * metric_ns * (V / 65,536) ** exponent + layer_passes * step_us`` (:data:`COST_TERMS`);
    on a CPU the matmul and metric terms are divided by the job's threads, so the fitted rates are per thread.
    The linear unknowns are fitted by non-negative least squares on relative error, so every job weighs alike;
    where the jobs' models have more than one vocabulary, the metrics' vocabulary exponent is the one in
    ``[0, 1]`` whose fit leaves the least residual (a grid of 0.05, then refined). ``others`` adds the jobs
    of other runs on the same device (e.g. the default run in float32 on one thread and the study in bfloat16
    on two): one fit then knows both dtypes. A term no measured job has (no bfloat16 job, say) keeps its
    setting; a term the jobs cannot tell apart (fitted to 0) costs nothing afterwards.

    Raises:
        ValueError: with fewer measured jobs than unknowns, or runs on different devices.
    """
    runs = [(plan, comparison), *others]
    devices = {p.run.device for p, _ in runs}
    if len(devices) != 1:
        raise ValueError(f"calibrate runs of one device at a time, got {sorted(devices)}")
    rows = [(p.run, job, measured - job.io_s - job.host_s) for p, c in runs for job, measured in _measured_jobs(p, c)]
    return fit_rates(rows, plan.settings, plan.run.device)


# A row of a fit: the run's settings, the job (or workload) planned under them, the seconds its cost terms
# (and, where fitted, the per-job overhead) took.
FitRow = tuple[RunSettings, JobPlan, float]


def fit_rates(rows: Sequence[FitRow], settings: PlanSettings, device: str, *, overhead: bool = True) -> PlanSettings:
    """``settings`` with ``device``'s rates (and ``overhead_s`` unless ``overhead`` is false) fitted to ``rows``.

    :func:`calibrate` on measured jobs; also timed workloads that leave the per-job overhead out
    (``benchmarks/gpu_check.py --fit``: one extraction each, after a warm-up). Non-negative least squares on
    relative error; the metrics' vocabulary exponent as :func:`calibrate` says.

    Raises:
        ValueError: with fewer rows than unknowns.
    """
    exponent_field = settings.vocab_exponent_field(device)
    exponent = getattr(settings, exponent_field)
    design = _design(rows, exponent)
    present = [*([0] if overhead else []), *(i + 1 for i in range(len(COST_TERMS)) if rows and design[:, i + 1].any())]
    if len(rows) < len(present) + 1:
        raise ValueError(f"{len(rows)} measured jobs cannot fit {len(present)} cost terms; benchmark more jobs")
    spent = np.array([seconds for _, _, seconds in rows])
    values: dict[str, float] = {}
    metric = COST_TERMS.index("lens_logits") + 1
    if metric in present and len({job.vocab_size for _, job, _ in rows}) > 1:
        exponent = _best_exponent(lambda e: _nnls(_design(rows, e), present, spent)[1])
        values[exponent_field] = exponent
    fitted = _nnls(_design(rows, exponent), present, spent)[0]
    if overhead:
        values["overhead_s"] = float(fitted[0])
    kinds = ("rate", "rate", "rate", "ns", "us")
    for i, (name, kind) in enumerate(zip(settings.rate_fields(device), kinds, strict=True)):
        if i + 1 in fitted:
            values[name] = _setting(fitted[i + 1], kind)
    return dataclasses.replace(settings, **values)


# The metrics' vocabulary exponent is searched on [0, EXPONENT_MAX], first on a grid of EXPONENT_STEP.
EXPONENT_MAX = 1.0
EXPONENT_STEP = 0.05


def _best_exponent(residual: Callable[[float], float]) -> float:
    """The exponent in ``[0, EXPONENT_MAX]`` of least ``residual``: the best of a grid, refined between its
    neighbours (bounded Brent)."""
    grid = np.linspace(0.0, EXPONENT_MAX, round(EXPONENT_MAX / EXPONENT_STEP) + 1)
    best = float(grid[int(np.argmin([residual(float(e)) for e in grid]))])
    lo, hi = max(best - EXPONENT_STEP, 0.0), min(best + EXPONENT_STEP, EXPONENT_MAX)
    refined = optimize.minimize_scalar(residual, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(refined.x) if refined.fun <= residual(best) else best


def _design(rows: Sequence[tuple[RunSettings, JobPlan, float]], exponent: float) -> np.ndarray:
    """One row per measured job: 1 (the overhead), then its cost terms as the per-thread rates apply to them."""
    return np.array([[1.0, *_scaled_terms(job, run, exponent)] for run, job, _ in rows]) if rows else np.zeros((0, 6))


def _nnls(design: np.ndarray, present: list[int], spent: np.ndarray) -> tuple[dict[int, float], float]:
    """Seconds per unit of each present column fitted to ``spent`` on relative error, and the residual norm."""
    design = design[:, present] / np.maximum(spent, 1e-3)[:, None]
    scale = design.max(axis=0)  # columns of FLOPs and of layer passes differ by ~10 orders of magnitude
    scale = np.where(scale > 0, scale, 1.0)
    coef, residual = optimize.nnls(design / scale, np.ones(len(spent)))
    return dict(zip(present, coef / scale, strict=True)), float(residual)


def _setting(coefficient: float, kind: str) -> float:
    """A fitted seconds-per-unit coefficient as the setting states it (GFLOP/s or GB/s, ns, us)."""
    if kind == "rate":
        return float(1e-9 / coefficient) if coefficient > 0 else FREE_RATE
    return float(coefficient * (1e9 if kind == "ns" else 1e6))


def _scaled_terms(job: JobPlan, run: RunSettings, exponent: float) -> list[float]:
    """The job's cost terms as the per-thread rates apply to them: threaded terms divided by the CPU threads,
    the lens logits weighted by the vocabulary's ``(V / 65,536) ** exponent``."""
    threads = run.threads if run.device == "cpu" else 1
    terms = [term / threads if threaded else term for term, threaded in zip(job.terms, THREADED_TERMS, strict=True)]
    terms[COST_TERMS.index("lens_logits")] *= vocab_factor(job.vocab_size, exponent)
    return terms


# The rate of a term that measurements fit to zero cost: no limit (YAML ``.inf``), so the term adds nothing.
FREE_RATE = math.inf


def _measured_jobs(plan: Plan, comparison: pd.DataFrame) -> list[tuple[JobPlan, float]]:
    measured = comparison.set_index(["rule", "model", "dataset", "shard"])["measured_s"]
    return [(job, float(measured[job.key])) for job in plan.jobs if job.key in measured.index]


def predicted_s(job: JobPlan, settings: PlanSettings, run: RunSettings) -> float:
    """The job's estimated seconds under other ``settings`` (same work, other rates)."""
    return settings.overhead_s + job.io_s + job.host_s + compute_seconds(job.terms, settings.rates(run), job.vocab_size)


def leave_one_out(plan: Plan, comparison: pd.DataFrame) -> pd.Series:
    """Predicted / measured time of each measured job under rates fitted on the other jobs.

    An honest check of :func:`calibrate`: no job's own measurement enters its prediction.

    Returns:
        Ratios indexed by ``(rule, model, dataset, shard)``.
    """
    rows = _measured_jobs(plan, comparison)
    keys = list(zip(comparison["rule"], comparison["model"], comparison["dataset"], comparison["shard"], strict=True))
    ratios = {}
    for job, measured in rows:
        others = comparison[[key != job.key for key in keys]]
        settings = calibrate(plan, others)
        ratios[job.key] = predicted_s(job, settings, plan.run) / measured
    return pd.Series(ratios, name="loo_ratio")
