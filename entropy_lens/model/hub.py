"""Hub models on this machine: whether a hub id is in the Hugging Face cache, and what to say when it is not.

A paper run names its models by hub id (``org/name``). On a node without network, or with
``HF_HUB_OFFLINE=1``, transformers looks only in the cache (``HF_HUB_CACHE``, by default
``~/.cache/huggingface/hub``); when the model is not there its error never names the id or the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CONFIG_FILE = "config.json"


def hub_cache_dir() -> Path:
    """The hub cache transformers reads (``HF_HUB_CACHE``, ``HF_HOME/hub`` or the default)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids reaching the hub."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def is_hub_cached(hub_id: str) -> bool:
    """Whether the cache holds a snapshot of ``hub_id`` with its ``config.json`` (no network)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(hub_id, CONFIG_FILE, cache_dir=hub_cache_dir()), str)


def _is_gated(err: BaseException) -> bool:
    while err is not None:
        if type(err).__name__ == "GatedRepoError" or "gated repo" in str(err).lower():
            return True
        err = err.__cause__ or err.__context__
    return False


def missing_model_error(hub_id: str, err: BaseException) -> ValueError:
    """The error for a hub model that could not be loaded: one line naming the id, the cache searched,
    ``HF_HUB_OFFLINE`` and the way out (a gated model: where to ask for access)."""
    offline = "HF_HUB_OFFLINE=1" if hub_offline() else "HF_HUB_OFFLINE unset"
    if _is_gated(err):
        return ValueError(
            f"model {hub_id!r} is gated on the Hugging Face hub and this account has no access ({offline}): "
            f"accept its licence at https://huggingface.co/{hub_id} and log in (hf auth login), or download it "
            f"where you have access into the cache {str(hub_cache_dir())!r}"
        )
    cached = "is in" if is_hub_cached(hub_id) else "is not in"
    return ValueError(
        f"model {hub_id!r} could not be loaded: it {cached} the Hugging Face cache {str(hub_cache_dir())!r} and the "
        f"hub was not reachable ({offline}); download it where the hub is reachable (hf download {hub_id}), point "
        f"HF_HUB_CACHE at a cache that holds it, or set the model's source to a local folder "
        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    )


def uncached_hub_models(sources: Mapping[str, str], folders: Mapping[str, Path]) -> list[str]:
    """Names of the models whose source is a hub id that is neither materialized (``folders[name]``
    holding a ``config.json``) nor in the hub cache: what a run downloads, or fails on offline."""
    from entropy_lens.model.registry import HUB_SOURCE, source_kind

    return [
        name
        for name, source in sources.items()
        if source_kind(source) == HUB_SOURCE
        and not (name in folders and (Path(folders[name]) / CONFIG_FILE).is_file())
        and not is_hub_cached(source)
    ]


def uncached_line(names: list[str]) -> str:
    """One line naming the models :func:`uncached_hub_models` found, the cache searched and the offline mode."""
    offline = "HF_HUB_OFFLINE=1: their jobs will fail" if hub_offline() else "their jobs download them first"
    return (
        f"not on this machine: {len(names)} hub models ({', '.join(names)}) are neither materialized nor in the "
        f"Hugging Face cache {str(hub_cache_dir())!r} ({offline})"
    )
