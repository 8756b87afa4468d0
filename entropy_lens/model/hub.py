"""Hub models on this machine: whether a hub id is whole in the Hugging Face cache, what to say when it is not,
and asking the hub once, without retries, before a download.

A paper run names its models by hub id (``org/name``). On a node without network, or with
``HF_HUB_OFFLINE=1``, transformers looks only in the cache (``HF_HUB_CACHE``, by default
``~/.cache/huggingface/hub``); when the model is not there its error never names the id or the cache, and
with the hub unreachable but ``HF_HUB_OFFLINE`` unset it first retries every request for half a minute.
:func:`entropy_lens.model.loading.load_model` therefore reads a whole cached snapshot with no network at all,
refuses at once, in one line, a model that is missing offline, and asks the hub once (:func:`probe_hub`) before
it downloads one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

CONFIG_FILE = "config.json"
WEIGHT_INDEX = "model.safetensors.index.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
# A causal LM needs one of these to tokenize; an image classifier needs its preprocessor instead.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
PREPROCESSOR_FILE = "preprocessor_config.json"
# Seconds the one request of probe_hub may take.
PROBE_TIMEOUT_S = 10.0
# The licences a gated family's hub page asks to accept, by hub id prefix.
GATED_PREFIXES = {
    "meta-llama/": "Meta's Llama community licence",
    "google/gemma": "Google's Gemma terms of use",
}


def hub_cache_dir() -> Path:
    """The hub cache transformers reads (``HF_HUB_CACHE``, ``HF_HOME/hub`` or the default)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids reaching the hub."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def gated_licence(hub_id: str) -> str:
    """The licence a gated model's hub page asks to accept ("" for a model of no known gated family)."""
    return next((licence for prefix, licence in GATED_PREFIXES.items() if hub_id.startswith(prefix)), "")


def cached_snapshot(hub_id: str) -> Path | None:
    """The folder of the cached snapshot of ``hub_id`` that holds its ``config.json`` (no network), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(hub_id, CONFIG_FILE, cache_dir=hub_cache_dir())
    return Path(found).parent if isinstance(found, str) else None


def is_hub_cached(hub_id: str) -> bool:
    """Whether the cache holds a snapshot of ``hub_id`` with its ``config.json`` (no network)."""
    return cached_snapshot(hub_id) is not None


def missing_model_files(hub_id: str) -> list[str]:
    """What the cache lacks of a loadable snapshot of ``hub_id`` (empty when it is whole; no network): its
    ``config.json``, its weights (every shard its index names), and its tokenizer (a causal LM) or image
    preprocessor (an image classifier)."""
    snapshot = cached_snapshot(hub_id)
    if snapshot is None:
        return [CONFIG_FILE]
    missing = _missing_weights(snapshot)
    config = json.loads((snapshot / CONFIG_FILE).read_text(encoding="utf-8"))
    if any(str(arch).endswith("ForImageClassification") for arch in config.get("architectures") or []):
        missing += [] if (snapshot / PREPROCESSOR_FILE).is_file() else [PREPROCESSOR_FILE]
    elif not any((snapshot / name).is_file() for name in TOKENIZER_FILES):
        missing.append(f"a tokenizer ({' or '.join(TOKENIZER_FILES)})")
    return missing


def _missing_weights(snapshot: Path) -> list[str]:
    index = snapshot / WEIGHT_INDEX
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()))
        return [shard for shard in shards if not (snapshot / shard).is_file()]
    if any(path.suffix in WEIGHT_SUFFIXES and path.is_file() for path in snapshot.iterdir()):
        return []
    return ["the weights (model.safetensors)"]


def snapshot_bytes(hub_id: str) -> int:
    """Bytes of the cached snapshot of ``hub_id`` (its files' targets), 0 when none is cached."""
    snapshot = cached_snapshot(hub_id)
    return sum(path.stat().st_size for path in snapshot.rglob("*") if path.is_file()) if snapshot else 0


def probe_hub(hub_id: str, repo_type: str = "model") -> None:
    """Ask the hub about ``hub_id`` once, with no retry: a download that follows can reach it.

    Raises:
        ValueError: in one line (:func:`missing_model_error`), when the hub cannot be reached or does not know
            ``hub_id`` (a model; a dataset says so likewise).
    """
    from huggingface_hub import HfApi

    api = HfApi()
    info = api.model_info if repo_type == "model" else api.dataset_info
    try:
        info(hub_id, timeout=PROBE_TIMEOUT_S)
    except Exception as err:  # the client's connection, HTTP and lookup errors share no base class worth naming
        raise missing_model_error(hub_id, err) if repo_type == "model" else _unreachable(hub_id, err) from err


def _unreachable(hub_id: str, err: BaseException) -> ValueError:
    return ValueError(
        f"hub dataset {hub_id!r} could not be reached ({_cause(err)}); fetch it where the hub is reachable "
        f"(entropy-lens fetch --configfile ...) into a shared HF_HOME, and run with HF_HUB_OFFLINE=1"
    )


def _cause(err: BaseException) -> str:
    first = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {first}"


def is_gated_error(err: BaseException | None) -> bool:
    """Whether ``err`` (or an error it was raised from) says the repository is gated and this account has no access."""
    while err is not None:
        if type(err).__name__ == "GatedRepoError" or "gated repo" in str(err).lower():
            return True
        err = err.__cause__ or err.__context__
    return False


def missing_model_error(hub_id: str, err: BaseException | None = None) -> ValueError:
    """The error for a hub model that could not be loaded: one line naming the id, the cache searched,
    ``HF_HUB_OFFLINE`` and the way out (a gated model: where to ask for access)."""
    offline = "HF_HUB_OFFLINE=1" if hub_offline() else "HF_HUB_OFFLINE unset"
    if is_gated_error(err):
        return ValueError(
            f"model {hub_id!r} is gated on the Hugging Face hub and this account has no access ({offline}): "
            f"accept its licence at https://huggingface.co/{hub_id} and log in (hf auth login), or download it "
            f"where you have access into the cache {str(hub_cache_dir())!r}"
        )
    missing = missing_model_files(hub_id)
    held = "is not in" if missing == [CONFIG_FILE] else f"lacks {', '.join(missing)} in" if missing else "is in"
    reached = "was not asked (HF_HUB_OFFLINE=1)" if err is None else f"was not reachable ({offline})"
    return ValueError(
        f"model {hub_id!r} could not be loaded: it {held} the Hugging Face cache {str(hub_cache_dir())!r} and the "
        f"hub {reached}; fetch it where the hub is reachable (entropy-lens fetch --configfile ..., or hf download "
        f"{hub_id}), point HF_HUB_CACHE at a cache that holds it, or set the model's source to a local folder"
        + (f" ({_cause(err)})" if err is not None else "")
    )


def uncached_hub_models(sources: Mapping[str, str], folders: Mapping[str, Path]) -> list[str]:
    """Names of the models whose source is a hub id that is neither materialized (``folders[name]``
    holding a ``config.json``) nor whole in the hub cache: what a run downloads, or fails on offline."""
    from entropy_lens.model.registry import HUB_SOURCE, source_kind

    return [
        name
        for name, source in sources.items()
        if source_kind(source) == HUB_SOURCE
        and not (name in folders and (Path(folders[name]) / CONFIG_FILE).is_file())
        and missing_model_files(source)
    ]


def uncached_line(names: list[str]) -> str:
    """One line naming the models :func:`uncached_hub_models` found, the cache searched and the offline mode."""
    offline = "HF_HUB_OFFLINE=1: their jobs will fail" if hub_offline() else "their jobs download them first"
    return (
        f"not on this machine: {len(names)} hub models ({', '.join(names)}) are neither materialized nor in the "
        f"Hugging Face cache {str(hub_cache_dir())!r} ({offline})"
    )
