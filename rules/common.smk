# Validation, input functions and narrow params: the only Python the rules share.
import re

from snakemake.utils import validate


validate(config, "../schemas/config.schema.yaml", set_default=True)
config.setdefault("stories", {})
validate(config, "../schemas/config.schema.yaml", set_default=True)


MODELS = list(config["models"])
DATASETS = [name for name, spec in config["datasets"].items() if spec.get("enabled", True)]
MMLU = "mmlu" in DATASETS
GPU = config["compute"]["device"] == "cuda"
SKIP = config["layer_skip"]["enabled"]



def choice_pattern(names):
    """A wildcard regex matching exactly one of ``names``."""
    return "|".join(map(re.escape, names)) if names else "NONE"


def final_outputs():
    """The final targets: combined stores, tables and figures."""
    out = expand("results/profiles/{dataset}.zarr", dataset=DATASETS)
    out += expand("results/figures/mean_profiles_{dataset}.png", dataset=DATASETS)
    if MMLU:
        out.append("results/tables/mmlu_accuracy.csv")
    if SKIP:
        out += ["results/tables/layer_skip.csv"]
        out += expand("results/figures/layer_skip_{model}.png", model=MODELS)
        out += expand("results/layer_skip/{model}/protected_layers.json", model=MODELS)
    return out + analysis_outputs()


def model_params(wildcards):
    """The model's own config section (source, family, chat template)."""
    return config["models"][wildcards.model]


def dataset_params(wildcards):
    """The dataset's own config section."""
    return config["datasets"][wildcards.dataset]


def extract_params(wildcards):
    """What an extraction job needs: generation settings for this dataset and model."""
    ds = config["datasets"][wildcards.dataset]
    blank = wildcards.dataset == "blank"
    return {
        "max_new_tokens": ds["max_new_tokens"],
        "do_sample": blank,
        "temperature": ds.get("temperature", 1.0),
        "seed": ds.get("seed", config["generation"]["seed"]),
        "batch_size": config["generation"]["batch_size"],
        "chat_template": config["models"][wildcards.model]["chat_template"] and not blank,
    }


def lens_params(wildcards):
    return config["lens"]


def compute_params(wildcards):
    return {"device": config["compute"]["device"], "dtype": config["compute"]["dtype"]}


def storage_params(wildcards):
    return config["storage"]


def per_model_stores(wildcards):
    return expand("results/profiles/{model}/{dataset}.zarr", model=MODELS, dataset=wildcards.dataset)


def per_model_scores(wildcards):
    if wildcards.dataset != "mmlu":
        return []
    return expand("results/scores/{model}/mmlu.parquet", model=MODELS)


def model_labels(wildcards):
    """Family and parameter count per model, in config order."""
    return {m: {"family": s["family"], "n_params": s["n_params"]} for m, s in config["models"].items()}


def stories_input(wildcards):
    tasks = config["datasets"].get("tasks", {})
    return ["results/datasets/stories.parquet"] if tasks.get("source") == "synthetic" else []


def stories_model_dir(wildcards):
    """The materialized folder of the configured model that writes synthetic stories."""
    name = config["stories"]["model"]
    if name not in config["models"]:
        raise ValueError(
            f"stories.model {name!r} must be one of the configured models {MODELS}: it is materialized "
            "under resources/models like them"
        )
    return f"resources/models/{name}"


def score_params(wildcards):
    """Batching and chat template for MMLU letter scoring of one model."""
    return {
        "batch_size": config["generation"]["batch_size"],
        "chat_template": config["models"][wildcards.model]["chat_template"],
    }


BAND_LABELS = {"tasks": "task", "formats": "format", "mmlu": "style"}


def combined_stores(wildcards=None):
    """The combined store of every enabled dataset, by dataset name."""
    return {d: f"results/profiles/{d}.zarr" for d in DATASETS}


def knn_params(wildcards):
    return {**config["analysis"]["knn"], "alphas": config["lens"]["alphas"]}


def analysis_outputs():
    """Tables and figures of the analyses (kNN, expansion, families, paper table)."""
    out = ["results/tables/knn_auc.csv", "results/figures/knn_auc.png", "results/tables/paper_comparison.md"]
    out += expand("results/tables/expansion_{dataset}.csv", dataset=DATASETS)
    out += expand("results/figures/profile_bands_{dataset}.png", dataset=[d for d in DATASETS if d in BAND_LABELS])
    out += expand("results/figures/heatmap_{model}_{dataset}.png", model=MODELS, dataset=DATASETS[:1])
    if "blank" in DATASETS:
        out += ["results/tables/family_clustering.csv", "results/figures/dendrogram.png"]
    return out


def paper_inputs(wildcards):
    """What the paper comparison table draws on, given the enabled datasets."""
    expansion = "tasks" if "tasks" in DATASETS else DATASETS[0]
    inputs = {"knn": "results/tables/knn_auc.csv", "expansion": f"results/tables/expansion_{expansion}.csv",
              "overlap": f"results/tables/overlap_{expansion}.csv"}
    if MMLU:
        inputs["mmlu_store"] = "results/profiles/mmlu.zarr"
    if "blank" in DATASETS:
        inputs["clustering"] = "results/tables/family_clustering.csv"
    if SKIP:
        inputs["layer_skip"] = "results/tables/layer_skip.csv"
    return inputs


def band_label(wildcards):
    return BAND_LABELS[wildcards.dataset]


def chat_template_of(wildcards):
    return config["models"][wildcards.model]["chat_template"]


def family_of(wildcards):
    return config["models"][wildcards.model]["family"]
