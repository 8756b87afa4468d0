"""Hub datasets on this machine: whether the datasets cache holds a split, and reading one with no network when
it does, failing in one line when it does not.

The prompt builders read three hub datasets (TinyStories, ``cais/mmlu``, Imagenette) through the ``datasets``
library, which keeps what it prepared under ``HF_DATASETS_CACHE`` (``<org>___<name>/<config>/<version>/<hash>``,
with the splits it holds in ``dataset_info.json``). With the hub unreachable and ``HF_HUB_OFFLINE`` unset it
first retries for half a minute; :func:`load_hub_split` reads a cached split offline instead, refuses a missing
one at once offline, and online asks the hub once (:func:`entropy_lens.model.hub.probe_hub`) before downloading.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from entropy_lens.model.hub import hub_offline, probe_hub

DEFAULT_CONFIG = "default"
INFO_FILE = "dataset_info.json"


def datasets_cache_dir() -> Path:
    """The cache ``datasets`` prepares splits in (``HF_DATASETS_CACHE``, ``HF_HOME/datasets`` or the default)."""
    import datasets.config

    return Path(datasets.config.HF_DATASETS_CACHE)


def _config_folder(repo_id: str, config: str | None) -> Path:
    from datasets.naming import camelcase_to_snakecase

    namespace, name = repo_id.split("/", 1)
    return datasets_cache_dir() / f"{namespace}___{camelcase_to_snakecase(name)}" / (config or DEFAULT_CONFIG)


def cached_splits(repo_id: str, config: str | None) -> set[str]:
    """The splits of ``repo_id`` (configuration ``config``) the datasets cache holds prepared (no network)."""
    splits: set[str] = set()
    for info in _config_folder(repo_id, config).glob(f"*/*/{INFO_FILE}"):
        try:
            splits |= set(json.loads(info.read_text(encoding="utf-8")).get("splits") or {})
        except (OSError, ValueError):
            continue  # a half-written preparation holds nothing to read
    return splits


def missing_splits(repo_id: str, config: str | None, splits: Sequence[str]) -> list[str]:
    """Which of ``splits`` the datasets cache lacks (empty when every one is there)."""
    held = cached_splits(repo_id, config)
    return [split for split in splits if split not in held]


def cache_bytes(repo_id: str, config: str | None) -> int:
    """Bytes the datasets cache holds for ``repo_id``'s configuration ``config``."""
    return sum(path.stat().st_size for path in _config_folder(repo_id, config).rglob("*") if path.is_file())


def missing_dataset_error(repo_id: str, config: str | None, split: str) -> ValueError:
    """One line: the split, the cache searched, ``HF_HUB_OFFLINE`` and the way out."""
    return ValueError(
        f"hub dataset {repo_id} ({config or DEFAULT_CONFIG}, split {split}) is not in the datasets cache "
        f"{str(datasets_cache_dir())!r} and HF_HUB_OFFLINE=1; fetch it where the hub is reachable (entropy-lens "
        "fetch --configfile ...) into a shared HF_HOME, or point HF_DATASETS_CACHE at a cache that holds it"
    )


@contextmanager
def offline() -> Iterator[None]:
    """Within the block, ``datasets`` and the hub client make no request (as with ``HF_HUB_OFFLINE=1``)."""
    import datasets.config
    from huggingface_hub import constants

    before = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = before


def load_hub_split(repo_id: str, config: str | None, split: str):
    """The ``datasets.Dataset`` of one split of a hub dataset: read offline when the cache holds it; else, offline,
    a one-line error at once, and online, after one request without retries found the hub, downloaded.

    Raises:
        ValueError: naming the split and the cache when it is missing offline or the hub cannot be reached.
    """
    from datasets import load_dataset

    if not missing_splits(repo_id, config, [split]):
        with offline():
            return load_dataset(repo_id, config, split=split)
    if hub_offline():
        raise missing_dataset_error(repo_id, config, split)
    probe_hub(repo_id, repo_type="dataset")
    return load_dataset(repo_id, config, split=split)
