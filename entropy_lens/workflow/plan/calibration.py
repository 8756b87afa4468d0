"""Predicted against measured: plan times beside Snakemake benchmarks, and rates fitted to them."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from entropy_lens.workflow.plan.cluster import Plan
from entropy_lens.workflow.plan.cost import COST_TERMS, EXTRACT, SKIP_EVAL, SKIP_SELECT, JobPlan, compute_seconds
from entropy_lens.workflow.plan.settings import MIB, PlanSettings
from entropy_lens.workflow.timings import read_benchmark


def _benchmark_paths(plan: Plan, patterns: Mapping[str, str]) -> Iterator[tuple[JobPlan, Path]]:
    for job in plan.jobs:
        if job.rule in patterns:
            yield job, Path(patterns[job.rule].format(model=job.model, dataset=job.dataset, shard=job.shard))


def benchmark_patterns(root: str | os.PathLike, *, sharded: bool) -> dict[str, str]:
    """Where each model rule's jobs write their Snakemake benchmark under ``root`` (``results/benchmarks``),
    as :func:`compare_benchmarks` reads them: one file per job, per shard in a sharded run."""
    extract = "{model}/{dataset}/shard{shard}" if sharded else "{model}/{dataset}"
    return {
        EXTRACT: f"{root}/extract_profiles/{extract}.tsv",
        SKIP_SELECT: f"{root}/layer_skip_select/{{model}}.tsv",
        SKIP_EVAL: f"{root}/layer_skip_eval/{{model}}.tsv",
    }


def plan_vs_run(plan: Plan, patterns: Mapping[str, str]) -> pd.DataFrame:
    """Every planned model job beside what it measured: predicted and measured seconds and peak memory
    and their ratios (predicted / measured); a job without a benchmark file keeps NaN there, so a job
    the run skipped shows as a row with no measurement, never as no row."""
    keys = ["rule", "model", "dataset", "shard"]
    measured = compare_benchmarks(plan, patterns)[[*keys, "measured_s", "ratio", "measured_rss_mb", "mem_ratio"]]
    jobs = pd.DataFrame(
        [
            {"rule": j.rule, "model": j.model, "dataset": j.dataset, "shard": j.shard, "predicted_s": j.est_s}
            | {"predicted_mb": j.host_peak_bytes / MIB}
            for j in plan.jobs
        ],
        columns=[*keys, "predicted_s", "predicted_mb"],
    )
    table = jobs.merge(measured, on=keys, how="left")
    return table[[*keys, "predicted_s", "measured_s", "ratio", "predicted_mb", "measured_rss_mb", "mem_ratio"]]


def compare_benchmarks(plan: Plan, patterns: Mapping[str, str]) -> pd.DataFrame:
    """Predicted against measured time and memory, for the jobs whose benchmark file exists.

    Args:
        plan: The plan.
        patterns: Benchmark path per rule, formatted with ``model``, ``dataset`` and
            ``shard``, e.g. ``{"extract_profiles": "benchmarks/extract_profiles/{model}/{dataset}.tsv"}``.

    Returns:
        Columns ``rule, model, dataset, shard, predicted_s, compute_s, fixed_s,
        measured_s, ratio`` (predicted / measured), ``predicted_mb, measured_rss_mb,
        mem_ratio``; one row per job with a benchmark file.
    """
    rows = []
    for job, path in _benchmark_paths(plan, patterns):
        if not path.is_file():
            continue
        benchmark = read_benchmark(path)
        measured = {"measured_s": benchmark["s"], "measured_rss_mb": benchmark["max_rss"]}
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
                "mem_ratio": job.host_peak_bytes / MIB / measured["measured_rss_mb"],
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
        "mem_ratio",
    ]
    return pd.DataFrame(rows, columns=columns)


def calibrate(plan: Plan, comparison: pd.DataFrame) -> PlanSettings:
    """The plan's settings with the per-job overhead and the device's rates fitted to measurements.

    Each measured job gives ``measured_s - io_s = overhead_s + flops / gflops + bytes / gbps
    + logits * metric_ns + layer_passes * step_us`` (:data:`COST_TERMS`); the five unknowns
    are fitted by non-negative least squares on relative error, so every job weighs alike.
    A term the jobs cannot tell apart (fitted to 0) costs nothing afterwards.

    Raises:
        ValueError: with fewer measured jobs than unknowns.
    """
    rows = _measured_jobs(plan, comparison)
    if len(rows) < len(COST_TERMS) + 1:
        raise ValueError(f"{len(rows)} measured jobs cannot fit {len(COST_TERMS) + 1} cost terms; benchmark more jobs")
    spent = np.array([measured - job.io_s for job, measured in rows])
    design = np.array([[1.0, *job.terms] for job, _ in rows]) / np.maximum(spent, 1e-3)[:, None]
    scale = design.max(axis=0)  # columns of FLOPs and of layer passes differ by ~10 orders of magnitude
    coef = optimize.nnls(design / np.where(scale > 0, scale, 1.0), np.ones(len(rows)))[0]
    coef = coef / np.where(scale > 0, scale, 1.0)
    prefix = plan.run.device
    return dataclasses.replace(
        plan.settings,
        overhead_s=float(coef[0]),
        **{
            f"{prefix}_gflops": float(1e-9 / coef[1]) if coef[1] > 0 else FREE_RATE,
            f"{prefix}_gbps": float(1e-9 / coef[2]) if coef[2] > 0 else FREE_RATE,
            f"{prefix}_metric_ns": float(coef[3] * 1e9),
            f"{prefix}_step_us": float(coef[4] * 1e6),
        },
    )


# The rate of a term that measurements fit to zero cost.
FREE_RATE = 1e12


def _measured_jobs(plan: Plan, comparison: pd.DataFrame) -> list[tuple[JobPlan, float]]:
    measured = comparison.set_index(["rule", "model", "dataset", "shard"])["measured_s"]
    return [(job, float(measured[job.key])) for job in plan.jobs if job.key in measured.index]


def predicted_s(job: JobPlan, settings: PlanSettings, device: str) -> float:
    """The job's estimated seconds under other ``settings`` (same work, other rates)."""
    return settings.overhead_s + job.io_s + compute_seconds(job.terms, settings.rates(device))


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
        ratios[job.key] = predicted_s(job, settings, plan.run.device) / measured
    return pd.Series(ratios, name="loo_ratio")
