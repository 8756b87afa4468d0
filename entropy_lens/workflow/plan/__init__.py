"""A cost plan of the workflow's GPU jobs from model shapes alone (no weights loaded).

Every extraction job (one per model x dataset, or per shard of ``compute.prompts_per_job``
prompts) and the per-model layer-skip jobs get FLOPs, peak memory, an
estimated time and a cluster request (``runtime`` minutes, ``mem_mb``).

Modules, each importing only those above it:
    shapes       ModelShape: layers, widths, heads, vocabulary and parameters from ``config.json`` fields.
    settings     PlanSettings (rates, overheads, safety, floors), RunSettings (device, dtype, lens budget).
    prompts      prompt lengths (PromptStats): from a table and the tokenizer, its characters, or the config;
                 per model and table of a config (PromptLengths).
    cost         the cost model: one job's workloads -> FLOPs, memory and time (JobPlan).
    cluster      a JobPlan -> ClusterRequest; the Plan of every job, its rules' resources and tables.
    model_jobs   the per-model jobs: fitting a lens, the layer-skip experiment, their forward passes.
    config       config.yaml -> jobs (which models on which datasets, prompt lengths) -> Plan.
    calibration  predicted against measured benchmarks; rates fitted to them, leave-one-out check.

The names below are the plan's API (what ``rules/common.smk``, the CLI and the tests use),
so callers need not know which module holds what.
"""

from entropy_lens.workflow.plan.calibration import (
    benchmark_patterns,
    calibrate,
    compare_benchmarks,
    fit_rates,
    leave_one_out,
    measured_peak_mb,
    plan_vs_run,
    predicted_s,
    run_records,
)
from entropy_lens.workflow.plan.cluster import ClusterRequest, Plan, cluster_request, plan_jobs
from entropy_lens.workflow.plan.config import (
    dataset_models,
    jobs_from_config,
    lens_fit_models,
    lens_profile_pairs,
    plan_from_config,
    plan_inputs,
    run_from_config,
    run_models,
    settings_from_config,
    skip_models,
    twin_models,
    twin_pairs,
)
from entropy_lens.workflow.plan.cost import (
    DISK_BYTES,
    EXTRACT,
    EXTRACT_LENS,
    EXTRACT_TWIN,
    FIT_LENS,
    RULES,
    SKIP_EVAL,
    SKIP_SELECT,
    Job,
    JobPlan,
    Workload,
    loading_bytes,
    plan_job,
    tokenizer_bytes,
    workload_cost,
)
from entropy_lens.workflow.plan.prompts import (
    MMLU_QUESTIONS,
    PromptStats,
    estimated_stats,
    stats_from_table,
    token_counter,
)
from entropy_lens.workflow.plan.settings import PlanSettings, RunSettings
from entropy_lens.workflow.plan.shapes import ModelShape, model_shape, shape_from_fields, shipped_model_configs

__all__ = [
    "DISK_BYTES",
    "EXTRACT",
    "EXTRACT_LENS",
    "EXTRACT_TWIN",
    "FIT_LENS",
    "MMLU_QUESTIONS",
    "RULES",
    "SKIP_EVAL",
    "SKIP_SELECT",
    "ClusterRequest",
    "Job",
    "JobPlan",
    "ModelShape",
    "Plan",
    "PlanSettings",
    "PromptStats",
    "RunSettings",
    "Workload",
    "benchmark_patterns",
    "calibrate",
    "cluster_request",
    "compare_benchmarks",
    "dataset_models",
    "estimated_stats",
    "fit_rates",
    "jobs_from_config",
    "leave_one_out",
    "lens_fit_models",
    "lens_profile_pairs",
    "loading_bytes",
    "measured_peak_mb",
    "model_shape",
    "plan_from_config",
    "plan_inputs",
    "plan_job",
    "plan_jobs",
    "plan_vs_run",
    "predicted_s",
    "run_from_config",
    "run_models",
    "run_records",
    "settings_from_config",
    "shape_from_fields",
    "shipped_model_configs",
    "skip_models",
    "stats_from_table",
    "token_counter",
    "tokenizer_bytes",
    "twin_models",
    "twin_pairs",
    "workload_cost",
]
