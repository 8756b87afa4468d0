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


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)) if MODELS else "NONE",
    dataset="|".join(map(re.escape, DATASETS)) if DATASETS else "NONE",


def final_outputs():
    """Everything `rule all` asks for: combined stores, tables and figures."""
    out = expand("results/profiles/{dataset}.zarr", dataset=DATASETS)
    out += expand("results/figures/mean_profiles_{dataset}.png", dataset=DATASETS)
    if MMLU:
        out.append("results/tables/mmlu_accuracy.csv")
    return out


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
