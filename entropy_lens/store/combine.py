"""Concatenate per-model profile datasets along ``model`` (NaN-padding shorter models).

Models differ in depth, so the combined ``layer`` axis is as long as the deepest
model; a shallower model's extra layers hold NaN (floats) or -1 (ints), and its
``depth`` coordinate ``(layer + 1) / n_layers`` is NaN there.  Profiles of models
of different depths are compared on ``depth``, not on ``layer``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.store import schema
from entropy_lens.store.storage import store_attrs

MODEL_ATTRS = ("model_source", "model_sha256", "dtype", "device", "chat_template", "vocab_size", "threads")


def _pad_layers(ds: xr.Dataset, n_max: int) -> xr.Dataset:
    """Reindex ``layer`` to ``0..n_max-1`` with NaN/-1 fills per dtype."""
    layers = np.arange(n_max, dtype=np.int32)
    floats = {n: v for n, v in ds.data_vars.items() if v.dtype.kind == "f"}
    ints = {n: v for n, v in ds.data_vars.items() if v.dtype.kind in "iu"}
    padded = xr.merge(
        [
            xr.Dataset(floats).reindex(layer=layers, fill_value=np.nan),
            xr.Dataset(ints).reindex(layer=layers, fill_value=schema.MASKED_INT),
        ],
        compat="no_conflicts",  # today's defaults, stated: newer xarray warns that they will change
        join="outer",
        combine_attrs="override",
    )
    return padded.drop_vars(schema.DEPTH, errors="ignore")


def _with_routing(ds: xr.Dataset, top_k: int) -> xr.Dataset:
    """``ds`` with routing variables over ``top_k`` expert ranks: a dense model's are NaN / -1,
    an MoE model routing to fewer experts is padded with -1."""
    if schema.ROUTING_ENTROPY in ds:
        return ds.reindex({schema.EXPERT_RANK: np.arange(top_k, dtype=np.int32)}, fill_value=schema.MASKED_INT)
    shape = tuple(ds.sizes[d] for d in (schema.PROMPT, schema.TOKEN, schema.LAYER))
    return ds.assign_coords({schema.EXPERT_RANK: np.arange(top_k, dtype=np.int32)}).assign(
        {
            schema.ROUTING_ENTROPY: (ds[schema.ENTROPY].dims, np.full(shape, np.nan, np.float32)),
            schema.ROUTING_EXPERTS: (
                (*ds[schema.ENTROPY].dims, schema.EXPERT_RANK),
                np.full((*shape, top_k), schema.MASKED_INT, np.int32),
            ),
        }
    )


def combine_models(
    stores: Mapping[str, xr.Dataset],
    *,
    families: Mapping[str, str],
    n_params: Mapping[str, int],
    labels: Mapping[str, Sequence] | None = None,
) -> xr.Dataset:
    """Stack per-model datasets into one with a leading ``model`` dim.

    Args:
        stores: ``{model name: per-model dataset}`` over the same prompt ids, in order.
        families: Family label per model.
        n_params: Parameter count per model.
        labels: Extra per-prompt label coordinates (``{name: values}``, prompt order).

    Returns:
        A dataset valid under ``schema.validate_profiles(..., combined=True)``.

    Raises:
        ValueError: when the models were run on different prompts or alphas.
    """
    names = list(stores)
    first = stores[names[0]]
    for name in names[1:]:
        _check_same_axes(first, stores[name], names[0], name)
    n_layers = {m: int(stores[m].sizes[schema.LAYER]) for m in names}
    n_max = max(n_layers.values())
    texts = [stores[m][schema.PROMPT_TEXT].values for m in names]
    # per-model readouts (choice_logprob) stay in the per-model stores; their scores are attached instead
    body = [_profiles_only(stores[m]).drop_vars(schema.PROMPT_TEXT) for m in names]
    cross = any(schema.NUCLEUS_JACCARD_CROSS in ds for ds in body)
    partners = [_partner_ids(ds) for ds in body] if cross else []
    body = [_with_cross(ds.drop_vars(schema.PARTNER, errors="ignore")) if cross else ds for ds in body]
    top_k = max((ds.sizes.get(schema.EXPERT_RANK, 0) for ds in body), default=0)
    body = [_pad_layers(_with_routing(ds, top_k) if top_k else ds, n_max) for ds in body]
    combined = xr.concat(body, dim=schema.MODEL, combine_attrs="drop_conflicts")
    combined = combined.assign_coords(_model_coords(names, n_layers, n_max, families, n_params))
    vocab = [int(stores[m].attrs[schema.VOCAB_SIZE]) for m in names]
    combined = combined.assign_coords({schema.VOCAB_SIZE: (schema.MODEL, np.asarray(vocab, dtype=np.int64))})
    combined = combined.assign_coords({schema.PROMPT_TEXT: ((schema.MODEL, schema.PROMPT), np.stack(texts))})
    if cross:
        combined = combined.assign_coords({schema.PARTNER: ((schema.MODEL, schema.PROMPT), np.stack(partners))})
    combined = combined.assign_coords({k: (schema.PROMPT, np.asarray(v)) for k, v in (labels or {}).items()})
    for var, spec in {**schema.VARIABLES, **schema.ROUTING_VARIABLES, **schema.CROSS_VARIABLES}.items():
        if var in combined:
            combined[var].attrs = {"units": spec.units, "long_name": spec.description}
    combined.attrs = {k: v for k, v in first.attrs.items() if k not in (*MODEL_ATTRS, "model_name", "n_layers")}
    combined.attrs["models"] = ",".join(names)
    schema.validate_profiles(combined, combined=True)
    return combined


def _partner_ids(ds: xr.Dataset) -> np.ndarray:
    """``[P]`` partner id of each prompt (``""`` where none, and for a store extracted without partners)."""
    if schema.PARTNER not in ds.coords:
        return np.full(ds.sizes[schema.PROMPT], "", dtype=object)
    return np.asarray([str(p) for p in ds[schema.PARTNER].values], dtype=object)


def _with_cross(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the cross-prompt variables, NaN for a store extracted without them."""
    shape = tuple(ds.sizes[d] for d in (schema.PROMPT, schema.TOKEN, schema.LAYER))
    missing = {name: spec for name, spec in schema.CROSS_VARIABLES.items() if name not in ds}
    return ds.assign({name: (spec.dims, np.full(shape, np.nan, np.float32)) for name, spec in missing.items()})


def _profiles_only(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` without its optional per-model variables and their dims' coordinates."""
    optional = list(schema.optional_variables(ds.data_vars))
    return ds.drop_vars(optional).drop_vars(list(schema.OPTIONAL_DIMS), errors="ignore")


def _model_coords(names, n_layers, n_max, families, n_params) -> dict:
    depth = np.full((len(names), n_max), np.nan, dtype=np.float32)
    for i, m in enumerate(names):
        depth[i, : n_layers[m]] = schema.depth_of(np.arange(n_layers[m]), n_layers[m])
    return {
        schema.MODEL: np.asarray(names, dtype=object),
        schema.N_LAYERS: (schema.MODEL, np.asarray([n_layers[m] for m in names], dtype=np.int32)),
        schema.FAMILY: (schema.MODEL, np.asarray([families[m] for m in names], dtype=object)),
        "n_params": (schema.MODEL, np.asarray([int(n_params[m]) for m in names], dtype=np.int64)),
        schema.DEPTH: ((schema.MODEL, schema.LAYER), depth),
    }


def _check_same_axes(a: xr.Dataset, b: xr.Dataset, name_a: str, name_b: str) -> None:
    for dim in (schema.PROMPT, schema.ALPHA, schema.TOKEN):
        if not np.array_equal(np.asarray(a[dim].values, dtype=object), np.asarray(b[dim].values, dtype=object)):
            raise ValueError(f"models {name_a!r} and {name_b!r} were profiled on different {dim} values")


def attach_mmlu_scores(combined: xr.Dataset, scores: pd.DataFrame) -> xr.Dataset:
    """Add the correctness variables of :data:`entropy_lens.store.schema.SCORE_VARIABLES` on ``(model, prompt)``.

    Args:
        combined: A combined MMLU dataset.
        scores: DataFrame with ``model, prompt_id`` and one column per score variable
            (``correct_ll``, ``correct_calibrated``, ``correct_parsed``; 1 / 0 / -1).

    Returns:
        ``combined`` with one int8 variable per score column.
    """
    table = scores.set_index(["model", "prompt_id"])
    models = [str(m) for m in combined[schema.MODEL].values]
    prompts = [str(p) for p in combined[schema.PROMPT].values]
    index = [(m, p) for m in models for p in prompts]
    missing = [i for i in index if i not in table.index]
    if missing:
        raise ValueError(f"scores lack {len(missing)} (model, prompt) pairs, e.g. {missing[0]}")
    rows = table.loc[index]
    shape = (len(models), len(prompts))
    return combined.assign(
        {
            name: (
                schema.variable_dims(name, combined=True, variables=schema.SCORE_VARIABLES),
                rows[name].to_numpy().astype(spec.dtype).reshape(shape),
                {"units": spec.units, "long_name": spec.description},
            )
            for name, spec in schema.SCORE_VARIABLES.items()
        }
    )


def combine_dataset(
    stores: Mapping[str, xr.Dataset],
    labels: Mapping[str, Mapping[str, object]],
    scores: pd.DataFrame | None = None,
) -> xr.Dataset:
    """The combined store of one dataset: its models' stores stacked, MMLU scores attached.

    Args:
        stores: ``{model name: per-model dataset}`` in config order.
        labels: ``{model: {"family": str, "n_params": int}}``; ``n_params`` 0 means read
            the count from the model's store.
        scores: MMLU scores of every model (:func:`entropy_lens.answers.scoring.score_prompts`
            rows), or ``None`` for other datasets.
    """
    n_params = {m: int(labels[m]["n_params"]) or int(stores[m].attrs["n_params"]) for m in stores}
    combined = combine_models(stores, families={m: str(labels[m]["family"]) for m in stores}, n_params=n_params)
    return combined if scores is None else attach_mmlu_scores(combined, scores)


SHARD_ATTRS = ("shard", "prompts_per_job")
# Provenance that may differ between the shards of one job without their settings differing: a commit made while
# a paper run's shards wait in a cluster queue (docs only, say) must not throw away the GPU hours of the others.
# The gathered store records every shard's commit, in shard order, comma-separated; likewise the threads each shard
# ran on (a shard resumed under another --cores), which the float bits depend on.
SHARD_PROVENANCE = ("git_sha", "threads")


def gather_shards(shards: Sequence[xr.Dataset], prompt_ids: Sequence[str]) -> xr.Dataset:
    """One per-model store from the stores of its shards, prompts in the table's order.

    Args:
        shards: Per-model datasets of the shards of one (model, dataset) job.
        prompt_ids: The prompt table's ids, in table order; the shards must hold each
            exactly once.

    Returns:
        The store the unsharded job would have written, plus ``attrs["gathered_shards"]``
        (the shard count) as a provenance note; where the shards were extracted at different commits,
        ``attrs["git_sha"]`` lists each shard's, in shard order, comma-separated.

    Raises:
        ValueError: when the shards miss or repeat a prompt, or disagree in settings.
    """
    if not shards:
        raise ValueError("no shard to gather")
    settings = [{k: v for k, v in s.attrs.items() if k not in SHARD_ATTRS + SHARD_PROVENANCE} for s in shards]
    differ = sorted({k for s in settings[1:] for k in set(s) | set(settings[0]) if s.get(k) != settings[0].get(k)})
    if differ:
        raise ValueError(f"shards were profiled with different settings (attrs {differ} differ); extract them again")
    held = [str(p) for s in shards for p in s.indexes[schema.PROMPT]]
    wanted = [str(p) for p in prompt_ids]
    if sorted(held) != sorted(wanted):
        missing, extra = sorted(set(wanted) - set(held)), sorted(set(held) - set(wanted))
        raise ValueError(
            f"shards hold {len(held)} prompts for a table of {len(wanted)} "
            f"(missing {missing[:3]}, unexpected {extra[:3]}, repeated: {len(held) - len(set(held))})"
        )
    gathered = xr.concat(list(shards), dim=schema.PROMPT, combine_attrs="override").sel({schema.PROMPT: wanted})
    provenance = {k: _joined([s.attrs[k] for s in shards]) for k in SHARD_PROVENANCE if k in shards[0].attrs}
    gathered.attrs = {**settings[0], **provenance, "gathered_shards": len(shards)}
    schema.validate_profiles(gathered)
    return gathered


def _joined(values: Sequence[object]) -> object:
    """One value where the shards agree; else each shard's, comma-separated, in shard order."""
    return values[0] if len(set(map(str, values))) == 1 else ",".join(map(str, values))


def per_model_store(path: str | Path, model: str | None) -> Path:
    """The per-model store to view: ``path`` itself, or, where ``path`` is a run's combined store
    (``results/profiles/{dataset}.zarr``), the store of its model ``model`` beside it
    (``results/profiles/{model}/{dataset}.zarr``).

    Raises:
        ValueError: in one line, for a combined store without ``model`` (naming its models and how to choose),
            a model it does not hold, a per-model store that is not there, or ``model`` beside a per-model store.
    """
    target = Path(path)
    models = [m for m in str(store_attrs(target).get("models", "")).split(",") if m]
    if not models:
        if model is not None:
            raise ValueError(f"{target} is the store of one model already; leave out --model {model}")
        return target
    if model is None:
        raise ValueError(
            f"{target} is a combined store of {len(models)} models ({', '.join(models)}); choose one with --model "
            f"{models[0]}, or view its store {target.parent / models[0] / target.name}"
        )
    if model not in models:
        raise ValueError(f"{target} holds no model {model!r}; it holds {', '.join(models)}")
    single = target.parent / model / target.name
    if not single.is_dir():
        raise ValueError(f"{target}'s model {model!r} has no store at {single}; rebuild it: snakemake {single}")
    return single
