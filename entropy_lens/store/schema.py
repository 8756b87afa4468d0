"""The data contract of profile datasets and stores: names, dtypes, units, attrs.

Every profile dataset produced by :func:`entropy_lens.extract_profiles`, written by
:mod:`entropy_lens.store.storage` or combined across models follows this schema.
``docs/store_contract.md`` is generated from this module (:mod:`entropy_lens.store.contract`).

Dims
    ``prompt``  one row per prompt; coordinate ``prompt`` holds the stable prompt id (str).
    ``token``   generated-token slot 0..T-1; coordinate ``token`` (int32).
    ``layer``   transformer block 0..L-1 (residual stream *after* the block);
                coordinate ``layer`` (int32) plus ``depth = (layer + 1) / L`` (float32).
    ``alpha``   Rényi order; coordinate ``alpha`` (float64, ``inf`` allowed).
    ``model``   only in combined stores; coordinate ``model`` (str) plus per-model
                ``n_layers``, ``family``, ``n_params`` and ``vocab_size`` (the size of the
                distribution the lens reads: entropy is at most ``log vocab_size``);
                ``depth`` then lives on ``(model, layer)``.
    ``expert_rank``  only in stores of mixture-of-experts models: 0..K-1, the rank of an
                expert in a token's top-k routing set (K: the model's largest top-k).

Variables (masked token slots hold NaN for floats and -1 for ints)
    ``entropy``          (prompt, token, layer) float32, nats.
    ``renyi``            (prompt, token, layer, alpha) float32, nats.
    ``nucleus_size``     (prompt, token, layer) int32, tokens in the top-p set.
    ``nucleus_jaccard``  (prompt, token, layer) float32, overlap of the top-p sets of
                         layer l and l+1 (NaN at the last layer).
    ``top1_id``          (prompt, token, layer) int32, most probable token id.
    ``token_id``         (prompt, token) int32, the generated token (-1 where masked).

Optional variables (present only where the job reads them)
    ``choice_logprob``   (prompt, choice) float32, nats: log-probability of each answer
                         choice's token under the model's own next-token distribution at
                         the first generated position (MMLU stores; coordinate ``choice``
                         holds the labels ``A``..``D``).  Per-model stores only: combined
                         stores carry the scores it yields instead.
    ``top_ids``          (prompt, token, layer, top_rank) int32, the lens's most probable
                         tokens at each cell by decreasing probability (-1 masked); only when
                         extraction was asked to keep them (``lens.top_k`` > 0; coordinate
                         ``top_rank`` 0..K-1).  Per-model stores only, like ``choice_logprob``.
    ``top_probs``        (prompt, token, layer, top_rank) float32, their lens probabilities
                         (NaN masked).

Cross-prompt variables (:data:`CROSS_VARIABLES`; present in stores extracted with the
cross-prompt null of the adjacent overlap, text models only; a combined store keeps them, NaN /
``""`` for a model whose store lacks them)
    ``nucleus_jaccard_cross``  (prompt, token, layer) float32, overlap of the top-p set of
                         layer l with that of layer l+1 of the prompt's partner at the same
                         token slot (NaN at the last layer, where either slot is masked, and
                         for a prompt without partner).
    ``partner``          coordinate on (prompt), str: the id of the prompt's partner, the next
                         prompt of its extraction batch, cyclically
                         (:func:`entropy_lens.model.batching.batch_partners`); ``""`` in a batch
                         of one.  Combined stores: on (model, prompt), batches differ by model.

Routing variables (:data:`ROUTING_VARIABLES`; present when a profiled model has
mixture-of-experts blocks, see :mod:`entropy_lens.model.routing`; a combined store fills
them for dense models)
    ``routing_entropy``  (prompt, token, layer) float32, nats: Shannon entropy of the router
                         distribution over experts (softmax of the router logits) at the
                         position that predicts the token; at most ``log E``; NaN on dense
                         layers and masked slots.
    ``routing_experts``  (prompt, token, layer, expert_rank) int32, the token's top-k expert
                         ids by decreasing router probability; -1 on dense layers, masked
                         slots and ranks beyond a layer's top-k.

Image classifiers (:mod:`entropy_lens.model.vision`) follow the same contract: ``prompt`` is an
image, ``token`` has length 1 (no generation: the one slot is the classification), the
"vocabulary" is the classes (``vocab_size`` = number of classes), ``top1_id`` the most
probable class at each block and ``token_id`` the model's own predicted class; attrs add
``modality = "image"`` and ``readout`` (``cls`` or ``mean``).

Per-model stores written since threads were recorded carry ``threads``: the CPU threads torch ran the
model on. A matmul's float sums are ordered by its threads, so the same inputs give the same bytes at the
same thread count only (a gathered store lists each shard's where they differ; a combined store drops it).
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from entropy_lens.core.version import __version__

if TYPE_CHECKING:
    # Annotations only: the answer tables read these names without opening a store, and xarray costs them ~0.5 s.
    import xarray as xr

PROMPT = "prompt"
TOKEN = "token"
LAYER = "layer"
ALPHA = "alpha"
MODEL = "model"
CHOICE = "choice"
EXPERT_RANK = "expert_rank"
TOP_RANK = "top_rank"

ENTROPY = "entropy"
RENYI = "renyi"
NUCLEUS_SIZE = "nucleus_size"
NUCLEUS_JACCARD = "nucleus_jaccard"
NUCLEUS_JACCARD_CROSS = "nucleus_jaccard_cross"
PARTNER = "partner"
TOP1_ID = "top1_id"
TOKEN_ID = "token_id"
CHOICE_LOGPROB = "choice_logprob"
TOP_IDS = "top_ids"
TOP_PROBS = "top_probs"

PROMPT_TEXT = "prompt_text"
DEPTH = "depth"
N_LAYERS = "n_layers"
FAMILY = "family"
VOCAB_SIZE = "vocab_size"

MASKED_INT = -1
# 2: per-model stores carry ``n_params``.
SCHEMA_VERSION = "2"


@dataclass(frozen=True)
class VariableSpec:
    """What one data variable must look like."""

    dims: tuple[str, ...]
    dtype: str
    units: str
    description: str


VARIABLES: dict[str, VariableSpec] = {
    ENTROPY: VariableSpec((PROMPT, TOKEN, LAYER), "float32", "nat", "Shannon entropy of the logit-lens distribution"),
    RENYI: VariableSpec((PROMPT, TOKEN, LAYER, ALPHA), "float32", "nat", "Renyi entropy of order alpha"),
    NUCLEUS_SIZE: VariableSpec((PROMPT, TOKEN, LAYER), "int32", "tokens", "size of the smallest top-p token set"),
    NUCLEUS_JACCARD: VariableSpec(
        (PROMPT, TOKEN, LAYER), "float32", "1", "Jaccard overlap of top-p sets of layers l, l+1"
    ),
    TOP1_ID: VariableSpec((PROMPT, TOKEN, LAYER), "int32", "token id", "most probable token"),
    TOKEN_ID: VariableSpec((PROMPT, TOKEN), "int32", "token id", "generated token (-1 masked)"),
}

# Variables a per-model store may carry; validated when present.
OPTIONAL_VARIABLES: dict[str, VariableSpec] = {
    CHOICE_LOGPROB: VariableSpec(
        (PROMPT, CHOICE),
        "float32",
        "nat",
        "log-probability of each answer choice's token as the model's own next token after the prompt",
    ),
    TOP_IDS: VariableSpec(
        (PROMPT, TOKEN, LAYER, TOP_RANK), "int32", "token id", "the lens's top-k tokens by decreasing probability"
    ),
    TOP_PROBS: VariableSpec((PROMPT, TOKEN, LAYER, TOP_RANK), "float32", "1", "lens probability of each top-k token"),
}
# The coordinates of the optional variables' own dims (dropped with them from combined stores).
OPTIONAL_DIMS = (CHOICE, TOP_RANK)


def optional_variables(names: Any) -> dict[str, VariableSpec]:
    """The :data:`OPTIONAL_VARIABLES` among ``names`` (a dataset's variables, or a mapping's keys)."""
    return {name: spec for name, spec in OPTIONAL_VARIABLES.items() if name in names}


# The cross-prompt null of the adjacent-layer overlap, with the ``partner`` coordinate (module docstring).
CROSS_VARIABLES: dict[str, VariableSpec] = {
    NUCLEUS_JACCARD_CROSS: VariableSpec(
        (PROMPT, TOKEN, LAYER),
        "float32",
        "1",
        "Jaccard overlap of the top-p set of layer l with that of layer l+1 of the partner prompt",
    ),
}

# Mixture-of-experts routing, beside the lens metrics (see the module docstring).
ROUTING_ENTROPY = "routing_entropy"
ROUTING_EXPERTS = "routing_experts"
ROUTING_VARIABLES: dict[str, VariableSpec] = {
    ROUTING_ENTROPY: VariableSpec(
        (PROMPT, TOKEN, LAYER), "float32", "nat", "entropy of the router distribution over experts (NaN: dense)"
    ),
    ROUTING_EXPERTS: VariableSpec(
        (PROMPT, TOKEN, LAYER, EXPERT_RANK), "int32", "expert id", "top-k experts by router probability (-1: none)"
    ),
}

# MMLU correctness per (model, prompt), only in combined MMLU stores: 1 correct, 0 wrong,
# -1 where no answer could be read (a completion with no letter in it).
CORRECT_LL = "correct_ll"
CORRECT_CALIBRATED = "correct_calibrated"
CORRECT_PARSED = "correct_parsed"
SCORE_VARIABLES: dict[str, VariableSpec] = {
    CORRECT_LL: VariableSpec(
        (PROMPT,), "int8", "1", "1 if the answer letter has the highest log-likelihood after the prompt, else 0"
    ),
    CORRECT_CALIBRATED: VariableSpec(
        (PROMPT,),
        "int8",
        "1",
        "1 if the answer letter has the highest log-likelihood minus its mean over content-free prompts, else 0",
    ),
    CORRECT_PARSED: VariableSpec(
        (PROMPT,), "int8", "1", "1/0 for the letter parsed from the completion alone, -1 when none was found"
    ),
}

REQUIRED_ATTRS = (
    "schema_version",
    "entropy_lens_version",
    "model_name",
    "model_source",
    "model_sha256",
    "n_layers",
    "n_params",
    "vocab_size",
    "dtype",
    "device",
    "top_p",
    "max_new_tokens",
    "do_sample",
    "temperature",
    "seed",
    "chat_template",
    "versions",
)
COMBINED_ATTRS = ("schema_version", "entropy_lens_version", "versions")


def variable_dims(name: str, *, combined: bool, variables: dict[str, VariableSpec] | None = None) -> tuple[str, ...]:
    """Dims of variable ``name`` (of ``variables``, default :data:`VARIABLES`) in a per-model
    (``combined=False``) or combined dataset."""
    dims = (VARIABLES if variables is None else variables)[name].dims
    return (MODEL, *dims) if combined else dims


def validate_profiles(ds: xr.Dataset, *, combined: bool = False) -> None:
    """Check ``ds`` against the schema; raise ``ValueError`` listing every problem.

    Args:
        ds: A per-model profile dataset, or a combined one (``combined=True``).
        combined: Whether ``ds`` carries a leading ``model`` dim.
    """
    problems = [*_variable_problems(ds, combined), *_coord_problems(ds, combined)]
    wanted = COMBINED_ATTRS if combined else REQUIRED_ATTRS
    problems += [f"attr {a!r} is missing" for a in wanted if a not in ds.attrs]
    version = ds.attrs.get("schema_version", SCHEMA_VERSION)
    if str(version) != SCHEMA_VERSION:
        problems.append(
            f"written with schema version {version!r}, this code reads {SCHEMA_VERSION!r}; extract it again "
            "(snakemake --forcerun extract_profiles)"
        )
    problems += _json_problems(ds.attrs)
    if problems:
        raise ValueError("profile dataset does not follow the schema: " + "; ".join(problems))


def _variable_problems(ds: xr.Dataset, combined: bool) -> list[str]:
    problems = [f"variable {name!r} is missing" for name in VARIABLES if name not in ds.data_vars]
    routing = [name for name in ROUTING_VARIABLES if name in ds.data_vars]
    if routing and len(routing) != len(ROUTING_VARIABLES):
        problems.append(f"routing variables come together: has {routing}, expected {list(ROUTING_VARIABLES)}")
    optional = {} if combined else optional_variables(ds.data_vars)
    cross = {name: spec for name, spec in CROSS_VARIABLES.items() if name in ds.data_vars}
    if cross and PARTNER not in ds.coords:
        problems.append(f"variables {list(cross)} need the coordinate {PARTNER!r} (each prompt's partner id)")
    specs = {**VARIABLES, **{name: ROUTING_VARIABLES[name] for name in routing}, **optional, **cross}
    for name, spec in specs.items():
        if name not in ds.data_vars:
            continue
        var = ds[name]
        dims = (MODEL, *spec.dims) if combined else spec.dims
        if var.dims != dims:
            problems.append(f"variable {name!r} has dims {var.dims}, expected {dims}")
        if str(var.dtype) != spec.dtype:
            problems.append(f"variable {name!r} has dtype {var.dtype}, expected {spec.dtype}")
        if var.attrs.get("units") != spec.units:
            problems.append(f"variable {name!r} lacks units={spec.units!r}")
    return problems


def _coord_problems(ds: xr.Dataset, combined: bool) -> list[str]:
    problems = [f"dim {d!r} has no coordinate" for d in ds.dims if d not in ds.coords]
    needed = [PROMPT_TEXT, DEPTH] + ([N_LAYERS, FAMILY] if combined else [])
    problems += [f"coordinate {c!r} is missing" for c in needed if c not in ds.coords]
    if PROMPT in ds.coords and not ds.indexes[PROMPT].is_unique:
        problems.append("prompt ids are not unique")
    return problems


def _json_problems(attrs: dict[str, Any]) -> list[str]:
    try:
        json.dumps(attrs, allow_nan=False)
    except (TypeError, ValueError) as err:
        return [f"attrs are not JSON-safe ({err})"]
    return []


def real_layers(data: xr.DataArray | xr.Dataset, model: str | None = None) -> xr.DataArray | xr.Dataset:
    """One model's slice on its real layers: the layers of a combined store beyond the model's
    ``n_layers`` are NaN / -1 padding and are dropped.

    Args:
        data: A combined store (or one of its variables, or a ``(model, layer)`` profile
            table carrying ``n_layers``), or an already selected single-model slice.
        model: The model to select; ``None`` when ``data`` holds one model already.

    Raises:
        ValueError: naming the model when it is not in ``data``.
    """
    if model is not None:
        if model not in data.indexes[MODEL]:
            raise ValueError(f"model {model!r} is not in the store; models: {list(data.indexes[MODEL])}")
        data = data.sel({MODEL: model})
    if LAYER in data.dims and N_LAYERS in data.coords and data[N_LAYERS].ndim == 0:
        data = data.isel({LAYER: slice(0, int(data[N_LAYERS]))})
    return data


def depth_of(layers: np.ndarray, n_layers: int) -> np.ndarray:
    """Normalized depth ``(layer + 1) / n_layers`` as float32 (1.0 at the last block)."""
    return ((np.asarray(layers) + 1) / n_layers).astype(np.float32)


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide the numbers (JSON-safe)."""
    names = ("torch", "transformers", "numpy", "xarray", "zarr", "gguf")
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def git_sha() -> str:
    """The git commit of the installed source tree, or ``"unknown"`` outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def provenance(**settings: Any) -> dict[str, Any]:
    """The attrs every store carries: schema and package versions plus ``settings``.

    Values must be JSON scalars (str, int, float, bool); non-finite floats are written
    as strings so that Zarr's JSON attributes accept them.
    """
    attrs: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "entropy_lens_version": __version__,
        "git_sha": git_sha(),
        "versions": json.dumps(package_versions(), sort_keys=True),
    }
    for key, value in settings.items():
        attrs[key] = _json_scalar(key, value)
    return attrs


def _json_scalar(key: str, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return json.dumps([_json_scalar(key, v) for v in value])
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"attr {key!r} has non-JSON value {value!r} of type {type(value).__name__}")
