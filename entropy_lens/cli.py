"""The ``entropy-lens`` command line: quick looks at one model without the workflow."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from entropy_lens.answers.exit import LOGIT
from entropy_lens.core.tables import read_csv_table
from entropy_lens.model.hub import uncached_hub_models, uncached_line
from entropy_lens.store import storage
from entropy_lens.workflow import locks
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.settings import load_config

SPARK = "▁▂▃▄▅▆▇█"
# Where the workflow keeps prompt tables and materialized models (as in rules/*.smk).


def sparkline(values: Sequence[float], lo: float, hi: float) -> str:
    """One block character per value, scaled between ``lo`` and ``hi`` (NaN as space)."""
    span = max(hi - lo, 1e-12)
    chars = []
    for v in values:
        if not math.isfinite(v):
            chars.append(" ")
            continue
        chars.append(SPARK[min(int((v - lo) / span * len(SPARK)), len(SPARK) - 1)])
    return "".join(chars)


def render_profile(ds: xr.Dataset, decode) -> str:
    """Generated text, then per layer: depth, mean entropy, nucleus size, top-1 token."""
    lines = []
    for i, pid in enumerate(ds.prompt.values):
        row = ds.isel(prompt=i)
        ids = [int(t) for t in row.token_id.values if t >= 0]
        entropy = row.entropy.mean("token", skipna=True).values
        vmax = math.log(int(ds.attrs["vocab_size"]))
        lines += [f"[{pid}] {row.prompt_text.item()!s}", f"  -> {decode(ids)!r}", ""]
        lines.append(f"  mean entropy over depth (0 .. log V = {vmax:.2f} nats): {sparkline(entropy, 0.0, vmax)}")
        lines.append("  layer  depth  H [nats]  nucleus  top-1 (first token)")
        for layer in range(ds.sizes["layer"]):
            cell = row.isel(layer=layer)
            top1 = decode([int(cell.top1_id.values[0])]) if cell.top1_id.values[0] >= 0 else ""
            lines.append(
                f"  {layer:5d}  {float(cell.depth):5.2f}  {entropy[layer]:8.3f}  "
                f"{np.nanmedian(np.where(cell.nucleus_size.values >= 0, cell.nucleus_size.values, np.nan)):7.0f}  "
                f"{top1!r}"
            )
        lines.append("")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="entropy-lens", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress of loading and writing")
    sub = parser.add_subparsers(dest="command", required=True)
    prof = sub.add_parser("profile", help="generate from prompts and show per-layer entropy profiles")
    prof.add_argument("--model", required=True, help="registry name, hub id org/name, model folder or .gguf")
    prof.add_argument("--prompt", action="append", required=True, help="prompt text (repeat for several)")
    prof.add_argument("--max-new-tokens", type=int, default=16)
    prof.add_argument("--top-p", type=float, default=0.6)
    prof.add_argument("--alphas", type=float, nargs="+", default=[0.5, 1.0, 5.0])
    prof.add_argument("--batch-size", type=int, default=8)
    prof.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    prof.add_argument("--temperature", type=float, default=1.0)
    prof.add_argument("--seed", type=int, default=0)
    prof.add_argument("--chat-template", action="store_true", help="render prompts with the chat template")
    prof.add_argument("--device", default=None)
    prof.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    prof.add_argument("--cache-dir", default=None, help="where registry models are materialized")
    prof.add_argument("--out", default=None, help="write the profiles to this .zarr store")
    sub.add_parser("models", help="list the registry of embedded models")
    mat = sub.add_parser("materialize", help="save a fast-loading copy of a model into a folder")
    mat.add_argument("model")
    mat.add_argument("out")
    unlock = sub.add_parser(
        "unlock", help="remove the workflow's Snakemake lock left by a killed run, if no run holds it"
    )
    unlock.add_argument("--directory", default=".", help="the workflow's working directory")
    cost = sub.add_parser("plan", help="size every GPU job of a workflow config: FLOPs, memory, time, requests")
    cost.add_argument(
        "--configfile",
        default=["config.yaml"],
        nargs="+",
        help="workflow config (default config.yaml; config/paper.yaml); several overlay in order, as for Snakemake",
    )
    cost.add_argument("--results", default="results", help="results folder; its prompt tables refine the plan")
    cost.add_argument("--models", default="resources/models", help="materialized models (tokenizers count tokens)")
    cost.add_argument(
        "--benchmarks", default=None, help="Snakemake benchmark folder to compare with (default: RESULTS/benchmarks)"
    )
    skip = sub.add_parser("skip-map", help="what skipping each block costs, from a run's layer-skip tables")
    skip.add_argument("--results", default="results", help="results folder of a run (default: results)")
    skip.add_argument("--model", default=None, help="one model of the run (default: every model)")
    skip.add_argument("--measure", default="calibrated", help="answer measure: calibrated (default) or ll")
    check = sub.add_parser(
        "verify",
        help="read every store and table of a results folder, check that nothing its manifest lists is missing and "
        "DVC's hashes; exit 1 if any is damaged or missing, 2 if the folder is no results folder",
    )
    check.add_argument("results", nargs="?", default="results", help="results folder (default: results)")
    _view_parser(sub)
    return parser


def _view_parser(sub) -> None:
    view = sub.add_parser(
        "view", help="one generation as an HTML page: token x block heatmap, the lens's top tokens on hover"
    )
    view.add_argument("store", nargs="?", help="a per-model profile store (.zarr); or give --model and --prompt")
    view.add_argument("--prompt-id", default=None, help="the store's prompt to show (default: its first)")
    view.add_argument("--tokenizer", default=None, help="model folder or hub id decoding the store's tokens")
    view.add_argument("--model", default=None, help="generate afresh: registry name, hub id, folder or .gguf")
    view.add_argument("--prompt", default=None, help="the prompt to generate from (with --model)")
    view.add_argument("--max-new-tokens", type=int, default=16)
    view.add_argument("--top-k", type=int, default=10, help="lens tokens shown on hover (with --model)")
    view.add_argument("--top-p", type=float, default=0.6)
    view.add_argument("--chat-template", action="store_true", help="render the prompt with the chat template")
    view.add_argument("--every", type=int, default=1, help="show every n-th block (the last one always)")
    view.add_argument("--device", default=None)
    view.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    view.add_argument("--cache-dir", default=None, help="where registry models are materialized")
    view.add_argument("--out", default="view.html", help="the page to write (default: view.html)")


SKIP_MAP_PATH = "{results}/tables/skip_map.csv"


def render_skip_map(rows: pd.DataFrame) -> str:
    """One model's criticality map as text: per block its Delta H and what skipping it alone costs.

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.answers.criticality.skip_map`.
    """
    rows = rows.sort_values("layer")
    delta_h = rows["delta_h"].to_numpy(float)
    lo, hi = (np.nanmin(delta_h), np.nanmax(delta_h)) if np.isfinite(delta_h).any() else (0.0, 1.0)
    header = f"{'block':>5}  {'depth':>5}  {'ΔH nats':>9}  {'Δ accuracy, points':>22}  {'Δ log p(gold), nats':>24}"
    lines = [f"{header}  reading  marks"]
    for rec in rows.to_dict("records"):
        bar = sparkline([rec["delta_h"]], lo, hi) if math.isfinite(rec["delta_h"]) else " "
        acc = _interval_text(100 * rec["d_accuracy"], 100 * rec["d_accuracy_low"], 100 * rec["d_accuracy_high"], 1)
        logp = _interval_text(rec["d_logprob"], rec["d_logprob_low"], rec["d_logprob_high"], 3)
        marks = rec["marks"] if isinstance(rec["marks"], str) else ""
        delta = f"{rec['delta_h']:+8.3f}" if math.isfinite(rec["delta_h"]) else "     n/a"
        cells = f"{int(rec['layer']):5d}  {rec['depth']:5.2f}  {delta}{bar}  {acc:>22}  {logp:>24}"
        lines.append(f"{cells}  {rec['reading']:7s}  {marks}")
    by_reading = rows.groupby("reading")["layer"].apply(lambda v: ", ".join(str(int(x)) for x in v))
    safe, costly = by_reading.get("safe", "none"), by_reading.get("costly", "none")
    lines.append(f"safe to skip (a drop of 5 points ruled out): {safe}; costly (a drop for sure): {costly}")
    return "\n".join(lines)


CRITERIA_PATH = "{results}/tables/skip_criteria_spearman.csv"
EXIT_PATH = "{results}/tables/skip_exit.csv"
DROP_SETS_PATH = "{results}/tables/skip_drop_sets.csv"


def render_drop_sets(rows: pd.DataFrame) -> str:
    """The blocks each criterion would drop, per variant and k (one model); their retained accuracy is unscored."""
    lines = ["drop sets (the k least critical blocks by each criterion; not scored yet: no retained accuracy):"]
    for (variant, k), group in rows.groupby(["variant", "k"], sort=False):
        sets = "; ".join(f"{rec['criterion']} {rec['layers']}" for rec in group.to_dict("records"))
        lines.append(f"  {variant}, k = {int(k)}: {sets}")
    return "\n".join(lines)


DROP_SCORES_PATH = "{results}/tables/skip_drop_scores.csv"


def render_drop_scores(rows: pd.DataFrame) -> str:
    """Each criterion's drop set with the accuracy it keeps, against random sets of its size, and the recommended
    set per variant and k: the best criterion's, named only where its paired interval separates it from every other.

    Args:
        rows: One model's and measure's accuracy rows of :func:`entropy_lens.answers.drop_scores.drop_scores`.
    """
    lines = ["drop sets (the k least critical blocks by each criterion, skipped together; accuracy kept):"]
    for (variant, k), group in rows.groupby(["variant", "k"], sort=False):
        first = group.iloc[0]
        lines.append(
            f"  {variant}, k = {int(k)} ({int(first['n'])} questions; intact {100 * first['intact']:.1f}%; "
            f"{int(first['n_sets'])} random sets change {100 * first['random_median']:+.1f} points, "
            f"range [{100 * first['random_min']:+.1f}, {100 * first['random_max']:+.1f}]):"
        )
        for rec in group.sort_values("change", ascending=False).to_dict("records"):
            change = _interval_text(100 * rec["change"], 100 * rec["ci_low"], 100 * rec["ci_high"], 1)
            lines.append(
                f"    {rec['criterion']:18s} {rec['layers']:>14s}  {100 * rec['value']:5.1f}% ({change} points); "
                f"keeps more than {100 * rec['beats']:.0f}% of random sets; {rec['reading']}"
            )
        best = group[group["best"].astype(str).str.lower() == "true"]
        lines.append(
            f"    recommended: {best.iloc[0]['criterion']}'s blocks {best.iloc[0]['layers']}"
            if len(best)
            else "    recommended: none (no criterion's set separates from every other's)"
        )
    return "\n".join(lines)


def render_criteria(rows: pd.DataFrame) -> str:
    """Which criterion predicts what skipping a block costs: each one's Spearman with the cost, and the best one
    where the interval of its margin over the next best (paired replicates) lies above 0.

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.answers.criteria.criteria_spearman`.
    """
    lines = []
    for (statistic, variant), group in rows.groupby(["statistic", "variant"], sort=False):
        n_blocks, n = int(group["n_blocks"].iloc[0]), int(group["n"].iloc[0])
        lines.append(f"cost = drop of {statistic}, {variant} ({n_blocks} blocks, {n} questions):")
        if group["rho"].isna().all():
            lines.append("  too few blocks or questions to rank (a Spearman needs 3 blocks)")
            continue
        for rec in group.sort_values("rho", ascending=False).to_dict("records"):
            rho = _interval_text(rec["rho"], rec["ci_low"], rec["ci_high"], 2)
            null = f"[{rec['null_low']:+.2f}, {rec['null_high']:+.2f}]"
            lines.append(f"  {rec['criterion']:16s} rho {rho:>24}  null {null}  {rec['reading']}")
        lines.append(f"  best: {_best_criterion(group)}")
    return "\n".join(lines)


def _best_criterion(group: pd.DataFrame) -> str:
    top = group.sort_values("rho", ascending=False).iloc[0]
    if top["margin_low"] > 0:
        margin = f"[{top['margin_low']:+.2f}, {top['margin_high']:+.2f}]"
        return f"{top['criterion']} (its margin over the next best, paired: {margin})"
    return "none separates from the others (no margin over the next best excludes 0)"


def render_exit(rows: pd.DataFrame) -> str:
    """Where the answer forms: per lens, the first block whose accuracy reaches the model's own (one model, measure).

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.answers.exit.exit_curve`; a table written
            before its ``lens`` column reads as the logit lens's.
    """
    rows = rows if "lens" in rows else rows.assign(lens=LOGIT)
    own = rows[rows["lens"] == LOGIT].sort_values("position").iloc[-1]  # x_L: the model's own answer
    parts = [f"exit curve: the model's own answer {100 * own['accuracy']:.1f}%"]
    for lens, group in rows.groupby("lens", sort=False):
        reached = group.loc[group["ci_high"] >= own["accuracy"], "position"]
        where = _first_block(int(reached.min()), int(own["position"])) if len(reached) else "never"
        parts.append(
            f"read through the logit lens, the answer's accuracy first reaches it (within its interval) {where}"
            if lens == LOGIT
            else f"through the {lens} lens, {where}"
        )
    return "; ".join(parts)


def _first_block(first: int, blocks: int) -> str:
    if first == 0:
        return "already at the embeddings"
    return f"after block {first - 1} ({first} of {blocks} blocks run)"


def _interval_text(value: float, low: float, high: float, digits: int) -> str:
    return f"{value:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _skip_map(args: argparse.Namespace) -> int:
    path = Path(SKIP_MAP_PATH.format(results=args.results))
    if not path.is_file():
        raise FileNotFoundError(
            f"no criticality map at {path}; run the workflow with layer_skip enabled, or pass --results of a run"
        )
    table = read_csv_table(path)
    table = table[table["measure"] == args.measure]
    models = list(dict.fromkeys(table["model"]))
    if args.model is not None:
        if args.model not in models:
            raise ValueError(f"model {args.model!r} has no criticality map in {path}; it has {models}")
        models = [args.model]
    for model in models:
        rows = table[table["model"] == model]
        n = int(rows["n"].max()) if len(rows) else 0
        print(f"{model}: every block skipped alone, {n} MMLU questions, {args.measure} letters\n")
        print(render_skip_map(rows) + "\n")
        for template, render in ((CRITERIA_PATH, render_criteria), (EXIT_PATH, render_exit)):
            extra = Path(template.format(results=args.results))
            if extra.is_file():
                found = read_csv_table(extra).query("model == @model and measure == @args.measure")
                print(render(found) + "\n" if len(found) else "", end="")
        print(_drops_text(args.results, model, args.measure), end="")
    return 0


def _drops_text(results: str, model: str, measure: str) -> str:
    """The scored drop sets of ``model`` where the run scored them, else the sets alone (``""``: neither)."""
    scores, drops = (Path(t.format(results=results)) for t in (DROP_SCORES_PATH, DROP_SETS_PATH))
    found = read_csv_table(scores, dtype={"layers": str}) if scores.is_file() else pd.DataFrame()
    if len(found):
        found = found.query("model == @model and measure == @measure and statistic == 'accuracy'")
    if len(found):
        return render_drop_scores(found) + "\n"
    found = read_csv_table(drops, keep_default_na=False).query("model == @model") if drops.is_file() else found
    return render_drop_sets(found) + "\n" if len(found) else ""


def _profile(args: argparse.Namespace) -> int:
    if args.out is not None and not args.out.endswith(".zarr"):
        raise ValueError(f"--out must name a .zarr store, got {args.out!r}")
    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.lens.encoding import PromptSettings
    from entropy_lens.lens.text import extract_profiles
    from entropy_lens.model.generation import GenerationSettings  # torch loads only for commands that need it
    from entropy_lens.model.loading import load_model

    lm = load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)
    with tqdm(total=len(args.prompt), desc="prompts", unit="prompt", file=sys.stderr) as bar:
        ds = extract_profiles(
            lm,
            args.prompt,
            generation=GenerationSettings(args.max_new_tokens, args.sample, args.temperature, args.seed),
            lens=LensSettings(args.top_p, tuple(args.alphas)),
            prompting=PromptSettings(args.batch_size, args.chat_template),
            progress=bar.update,
        )
    print(render_profile(ds, lambda ids: lm.tokenizer.decode(ids)))
    if args.out:
        storage.write_profiles(ds, args.out)
        print(f"wrote {args.out}")
    return 0


def _models() -> int:
    from entropy_lens.model.registry import REGISTRY

    for spec in REGISTRY.values():
        print(f"{spec.name:22s} family={spec.family:6s} {spec.description}\n{'':22s} install: {spec.install}")
    return 0


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


def _plan(args: argparse.Namespace) -> int:
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


def _verify(args: argparse.Namespace) -> int:
    from entropy_lens.store.verify import verify

    report = verify(args.results, progress=lambda store: print(f"reading {store}", file=sys.stderr))
    for finding in report.findings:
        print(finding.line())
    print(report.summary())
    return 0 if report.whole else 1


def _view(args: argparse.Namespace) -> int:
    from entropy_lens.plots import view

    if (args.store is None) == (args.model is None) or (args.model is not None) != (args.prompt is not None):
        raise ValueError("view reads either a STORE, or --model with --prompt (not both)")
    if args.model is not None:
        from entropy_lens.model.loading import load_model

        lm = load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)
        gen = view.generation_from_model(
            lm, args.prompt, max_new_tokens=args.max_new_tokens, top_k=args.top_k, every=args.every,
            top_p=args.top_p, chat_template=args.chat_template,
        )  # fmt: skip
    else:
        gen = view.generation_from_path(
            args.store, args.prompt_id, args.tokenizer, every=args.every, cache_dir=args.cache_dir
        )
    print(f"wrote {view.write_view(gen, args.out)}: {len(gen.tokens)} tokens x {len(gen.blocks)} blocks")
    return 0


def _unlock(args: argparse.Namespace) -> int:
    removed = locks.release_stale_lock(args.directory)
    if removed:
        print(f"removed the stale Snakemake lock of {args.directory} ({len(removed)} files) left by a killed run")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, with the reason on stderr)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        commands = {"profile": _profile, "plan": _plan, "unlock": _unlock, "skip-map": _skip_map, "verify": _verify}
        commands["view"] = _view
        if args.command in commands:
            return commands[args.command](args)
        if args.command == "models":
            return _models()
        from entropy_lens.model.loading import materialize_model

        materialize_model(args.model, args.out)
        print(f"materialized {args.model} into {args.out}")
        return 0
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        print(f"entropy-lens: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
