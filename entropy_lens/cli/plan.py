"""``entropy-lens plan``: every job of a workflow config sized (FLOPs, memory, time, cluster requests), and set
against a run's benchmarks where there are some."""

from __future__ import annotations

import argparse
from pathlib import Path

from entropy_lens.model.hub import uncached_hub_models, uncached_line
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.settings import load_config


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"


_COLUMNS = (
    ("job", 21),
    ("model", 21),
    ("dataset", 14),
    ("shard", 5),
    ("prompts", 7),
    ("tok/p", 6),
    ("from", 5),
    ("gen", 4),
    ("fwd TF", 8),
    ("lens TF", 8),
    ("wts G", 6),
    ("KV G", 6),
    ("lens G", 6),
    ("peak G", 7),
    ("est", 7),
    ("req min", 7),
    ("req MB", 7),
    ("flags", 0),
)
_FROM = {"tokenizer": "tok", "characters": "chars", "estimate": "est"}


def _plan_row(job: planning.JobPlan, request: planning.ClusterRequest, gpu_mem_gb: float) -> str:
    flags = ([] if job.fits_context else ["prompt+gen > context"]) + (
        [] if job.fits_device else [f"> {gpu_mem_gb:g} GiB"]
    )
    cells = (
        job.rule,
        job.model,
        job.dataset or "-",
        f"{job.shard + 1}/{job.n_shards}",
        job.prompts,
        f"{job.mean_prompt_tokens:.0f}",
        _FROM.get(job.token_source, job.token_source),
        job.new_tokens,
        f"{job.forward_flops / 1e12:.1f}",
        f"{job.lens_flops / 1e12:.1f}",
        f"{job.weights_bytes / 2**30:.2f}",
        f"{job.kv_bytes / 2**30:.2f}",
        f"{job.lens_bytes / 2**30:.2f}",
        f"{job.device_peak_bytes / 2**30:.2f}",
        _duration(job.est_s),
        request.runtime,
        request.mem_mb,
        "; ".join(flags),
    )
    return " ".join(
        f"{c!s:>{w}}" if i > 1 else f"{c!s:<{w}}" for i, (c, (_, w)) in enumerate(zip(cells, _COLUMNS, strict=True))
    )


def _flops(value: float) -> str:
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value / 1e9:.1f} GFLOP"


def _total_line(label: str, row) -> str:
    return (
        f"{label}: {int(row['jobs'])} jobs, est {_duration(row['est_s'])}"
        f", requested {_duration(row['runtime_min'] * 60)}, forward {_flops(row['forward_flops'])}"
        f", lens {_flops(row['lens_flops'])}"
        f", largest request {int(row['mem_mb'])} MB, largest peak {row['device_peak_bytes'] / 2**30:.1f} GiB"
    )


def render_plan(plan: planning.Plan) -> str:
    """The plan as a text table, one row per job, totals per model and for the run."""
    s, run = plan.settings, plan.run
    rates = s.rates(run)
    gflops = rates.gflops_32 if run.dtype_bytes == planning.DISK_BYTES else rates.gflops_16
    threads = f", {run.threads} threads per job" if run.device == "cpu" else ""
    lines = [
        f"device {run.device}, {run.dtype_bytes} bytes per weight{threads}; {gflops:g} GFLOP/s, {rates.gbps:g} GB/s, "
        f"{rates.metric_ns:g} ns per lens logit (x (V / 65,536) ** {rates.metric_vocab_exponent:g}), "
        f"{s.overhead_s:g} s + I/O at {s.io_gbps:g} GB/s per job; "
        f"requests = estimate x {s.safety:g}, peak memory x {s.mem_margin:g} "
        f"(floors {s.min_runtime_min} min, {s.min_mem_mb} MB)"
        + (
            f"; CPU matmul rates scaled to this host's probe ({s.cpu_probe_gflops:.0f} GFLOP/s float32, "
            f"{s.cpu_probe_bf16_gflops:.0f} bfloat16 per thread)"
            if run.device == "cpu" and s.has_probe
            else ""
        ),
        " ".join(f"{h:>{w}}" if i > 1 else f"{h:<{w}}" for i, (h, w) in enumerate(_COLUMNS)),
    ]
    totals = plan.totals()
    for model in dict.fromkeys(j.model for j in plan.jobs):
        jobs = [j for j in plan.jobs if j.model == model]
        lines += [_plan_row(j, planning.cluster_request(j, s), s.gpu_mem_gb) for j in jobs]
        lines.append("  total " + _total_line(model, totals.loc[model]))
    lines.append("TOTAL " + _total_line("all models", totals.loc["all"]))
    over = sum(not j.fits_context for j in plan.jobs)
    if over:
        lines.append(
            f"warning: {over} jobs may hold prompts longer than the model's context (estimated longest prompt)"
        )
    lines.append(
        "TF = 1e12 FLOPs; G = GiB on the device; tok/p from: tok(enizer), chars (table text), est(imate, no table yet)"
    )
    return "\n".join(lines)


def plan_command(args: argparse.Namespace) -> int:
    config = load_config(*args.configfile)
    tables, model_dirs = planning.plan_inputs(config, args.results, args.models)
    plan = planning.plan_from_config(config, tables=tables, model_dirs=model_dirs)
    print(render_plan(plan))
    uncached = uncached_hub_models({name: spec["source"] for name, spec in config["models"].items()}, model_dirs)
    if uncached:
        print(uncached_line(uncached))
    benchmarks = Path(args.benchmarks or Path(args.results) / "benchmarks")
    if benchmarks.is_dir():
        patterns, logs = planning.run_records(config, benchmarks, Path(args.results).parent / "logs")
        print(_render_comparison(plan, planning.compare_benchmarks(plan, patterns, logs)))
    elif args.benchmarks:
        raise FileNotFoundError(f"benchmark folder {str(benchmarks)!r} does not exist")
    return 0


def _render_comparison(plan: planning.Plan, comparison) -> str:
    if comparison.empty:
        return "no benchmark files found"
    lines = ["predicted vs measured:", comparison.to_string(index=False, float_format=lambda v: f"{v:.2f}")]
    ratios = comparison["ratio"].dropna()
    spread = f"{ratios.min():.2f}-{ratios.max():.2f}"
    lines.append(f"predicted/measured time: median {ratios.median():.2f}, {spread} over {len(ratios)} jobs")
    try:
        fitted = planning.calibrate(plan, comparison)
        loo = planning.leave_one_out(plan, comparison)
    except ValueError as err:
        return "\n".join([*lines, f"no calibration: {err}"])
    fields = fitted.rate_fields(plan.run.device)
    lines += [
        "calibrated on these jobs (plan: section of the config): "
        + ", ".join(f"{name} {getattr(fitted, name):.4g}" for name in ("overhead_s", *fields)),
        f"leave-one-job-out predicted/measured: median {loo.median():.2f}, {loo.min():.2f}-{loo.max():.2f}; "
        f"{int(((loo <= 1.5) & (loo >= 1 / 1.5)).sum())} of {len(loo)} jobs within 1.5x",
    ]
    return "\n".join(lines)
