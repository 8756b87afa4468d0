#!/usr/bin/env python
"""Fit the cost plan's rates to one or more finished runs on this machine, and show the fit per job.

    python scripts/calibrate_plan.py --run . config.yaml --run runs/study config.yaml config/study.yaml

Each ``--run`` names a run's working directory and the config files it ran with (``make run``: ``.`` and
``config.yaml``; ``make study``: ``runs/study`` and ``config.yaml config/study.yaml``). The plan of each run
is made as its ``plan_vs_run`` rule makes it (its prompt tables and model folders), its jobs are matched with
their Snakemake benchmark files, and one least-squares fit over all of them gives the per-job overhead and
the device's rates: float32 and 16-bit matmuls per thread, streaming, lens metrics, per-layer steps
(:func:`entropy_lens.workflow.plan.calibrate`). Printed: the ``plan:`` line to put in ``config.yaml``, then
every job's predicted / measured seconds and peak memory under the fitted settings, the range per rule, and
the interpreter overhead each job's memory implies (``cpu_overhead_mb`` is the plan's). On a CPU the ``plan:``
line records this host's matmul probe (``cpu_probe_gflops``, ``cpu_probe_bf16_gflops``), so a plan made on
another host scales the fitted matmul rates by the two hosts' probes.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import pandas as pd

from entropy_lens.model.probe import host_rates
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.plan.settings import MIB
from entropy_lens.workflow.settings import load_config


def run_plan(
    directory: Path, configfiles: list[str], settings: dict | None = None
) -> tuple[planning.Plan, pd.DataFrame]:
    """The plan of a finished run (its ``plan:`` section updated with ``settings``) and its jobs' benchmarks,
    as its plan_vs_run rule pairs them."""
    config = load_config(*configfiles)
    config["plan"] = {**config.get("plan", {}), **(settings or {})}
    tables, model_dirs = planning.plan_inputs(config, directory / "results", directory / "resources" / "models")
    plan = planning.plan_from_config(config, tables=tables, model_dirs=model_dirs)
    patterns, logs = planning.run_records(config, directory / "results" / "benchmarks", directory / "logs")
    return plan, planning.compare_benchmarks(plan, patterns, logs)


def _yaml_number(value: float) -> str:
    """``value`` as YAML reads it back: ``.inf`` for a rate the fit found no cost for."""
    return ".inf" if math.isinf(value) else f"{value:.4g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs="+", action="append", required=True, metavar=("DIR", "CONFIG"))
    args = parser.parse_args()
    runs = [run_plan(Path(directory), configs) for directory, *configs in args.run]
    (first, table), others = runs[0], runs[1:]
    fitted = planning.calibrate(first, table, others)
    fields = ("overhead_s", *fitted.rate_fields(first.run.device), fitted.vocab_exponent_field(first.run.device))
    if first.run.device == "cpu":  # the rates hold for this host: record its probe, so other hosts scale them
        host = host_rates()
        fitted = dataclasses.replace(fitted, cpu_probe_gflops=host.float32, cpu_probe_bf16_gflops=host.bfloat16)
        fields += ("cpu_probe_gflops", "cpu_probe_bf16_gflops")
    print("plan: {" + ", ".join(f"{name}: {_yaml_number(getattr(fitted, name))}" for name in fields) + "}")
    rows = []
    for directory, *configs in args.run:
        again, compared = run_plan(Path(directory), configs, dataclasses.asdict(fitted))
        compared = compared.assign(run=directory)
        peaks = {job.key: job.host_peak_bytes / MIB - fitted.cpu_overhead_mb for job in again.jobs}
        keys = zip(compared["rule"], compared["model"], compared["dataset"], compared["shard"], strict=True)
        compared["implied_overhead_mb"] = planning.measured_peak_mb(compared) - [peaks[key] for key in keys]
        rows.append(compared)
    jobs = pd.concat(rows, ignore_index=True)
    columns = ["run", "rule", "model", "dataset", "predicted_s", "measured_s", "ratio", "predicted_mb"]
    columns += ["measured_rss_mb", "peak_rss_mb", "mem_ratio", "implied_overhead_mb"]
    print(jobs[columns].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    per_rule = jobs.groupby(["run", "rule"])[["ratio", "mem_ratio"]].agg(["min", "max"])
    print(per_rule.to_string(float_format=lambda v: f"{v:.2f}"))
    implied = jobs["implied_overhead_mb"]
    print(f"implied interpreter overhead: {implied.min():.0f}-{implied.max():.0f} MB (median {implied.median():.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
