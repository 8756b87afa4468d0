"""Synthetic combined profile stores with the schema's layout, for analysis tests.

Entropy profiles are given per model as ``[P, T, L_m]`` arrays (NaN marks masked token
slots); every other variable is derived deterministically so that the result passes
``schema.validate_profiles(ds, combined=True)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from entropy_lens.store import schema, storage

ALPHAS = (0.5, 2.0)
VOCAB = 50
JACCARD = 0.5


def renyi_from_entropy(entropy: np.ndarray, alpha: float) -> np.ndarray:
    """A deterministic stand-in for Rényi entropy: Shannon scaled by ``2 / (1 + alpha)``."""
    return entropy * (2.0 / (1.0 + alpha))


def _pad(values: np.ndarray, width: int, fill: float | int) -> np.ndarray:
    out = np.full((*values.shape[:-1], width), fill, dtype=values.dtype)
    out[..., : values.shape[-1]] = values
    return out


def _model_vars(entropy: np.ndarray, nucleus: np.ndarray | None, jaccard: np.ndarray | None, width: int) -> dict:
    masked = ~np.isfinite(entropy)
    n_layers = entropy.shape[2]
    if nucleus is None:
        nucleus = np.rint(np.exp(np.nan_to_num(entropy))).astype(np.int32)
    nucleus = np.where(masked, schema.MASKED_INT, nucleus).astype(np.int32)
    if jaccard is None:
        jaccard = np.full(entropy.shape, JACCARD)
        jaccard[:, :, n_layers - 1] = np.nan
    jaccard = np.where(masked, np.nan, jaccard)
    p, t, _ = entropy.shape
    top1 = (np.arange(t)[None, :, None] * 7 + np.arange(n_layers)[None, None, :] + np.zeros((p, 1, 1), int)) % VOCAB
    token_masked = masked.all(axis=2)
    token_id = np.where(token_masked, schema.MASKED_INT, (np.arange(t)[None, :] * 3) % VOCAB + np.zeros((p, 1), int))
    return {
        schema.ENTROPY: _pad(entropy.astype(np.float32), width, np.nan),
        schema.RENYI: np.stack(
            [_pad(renyi_from_entropy(entropy, a).astype(np.float32), width, np.nan) for a in ALPHAS], axis=-1
        ),
        schema.NUCLEUS_SIZE: _pad(nucleus, width, schema.MASKED_INT),
        schema.NUCLEUS_JACCARD: _pad(jaccard.astype(np.float32), width, np.nan),
        schema.TOP1_ID: _pad(np.where(masked, schema.MASKED_INT, top1).astype(np.int32), width, schema.MASKED_INT),
        schema.TOKEN_ID: token_id.astype(np.int32),
    }


DEFAULT_VOCAB = 1000


def combined_dataset(
    profiles: Mapping[str, np.ndarray],
    *,
    families: Mapping[str, str] | None = None,
    n_params: Mapping[str, int] | None = None,
    prompt_labels: Mapping[str, Sequence[Any]] | None = None,
    nucleus: Mapping[str, np.ndarray] | None = None,
    jaccard: Mapping[str, np.ndarray] | None = None,
    extra: Mapping[str, np.ndarray] | None = None,
    vocab_sizes: Mapping[str, int] | None = None,
) -> xr.Dataset:
    """Build a schema-valid combined store.

    Args:
        profiles: Model name -> ``[P, T, L_m]`` entropy in nats (NaN = masked slot).
            All models share ``P`` and ``T``; ``L_m`` may differ (NaN-padded on ``layer``).
        families: Model -> family (default ``"fam"``).
        n_params: Model -> parameter count (default ``1e8 * L_m``).
        prompt_labels: Coordinate name -> ``[P]`` labels on ``prompt``.
        nucleus: Model -> ``[P, T, L_m]`` nucleus sizes (default ``round(exp(H))``).
        jaccard: Model -> ``[P, T, L_m]`` adjacent-layer overlaps (default 0.5, NaN last layer).
        extra: Variable name -> ``[M, P]`` int8 array on ``(model, prompt)`` (e.g. ``correct_ll``).
        vocab_sizes: Model -> vocabulary size (default 1000).
    """
    names = list(profiles)
    shapes = {profiles[m].shape[:2] for m in names}
    if len(shapes) != 1:
        raise ValueError(f"all models need the same (prompt, token) shape, got {shapes}")
    (p, t) = shapes.pop()
    layers = [profiles[m].shape[2] for m in names]
    width = max(layers)
    per_model = [_model_vars(profiles[m], (nucleus or {}).get(m), (jaccard or {}).get(m), width) for m in names]
    data_vars = {
        name: (
            schema.variable_dims(name, combined=True),
            np.stack([v[name] for v in per_model]),
            {"units": spec.units, "long_name": spec.description},
        )
        for name, spec in schema.VARIABLES.items()
    }
    for name, values in (extra or {}).items():
        data_vars[name] = ((schema.MODEL, schema.PROMPT), np.asarray(values, dtype=np.int8))
    depth = np.full((len(names), width), np.nan, dtype=np.float32)
    for i, n in enumerate(layers):
        depth[i, :n] = schema.depth_of(np.arange(n), n)
    prompt_ids = np.asarray([f"p{i:04d}" for i in range(p)])
    coords = {
        schema.MODEL: np.asarray(names),
        schema.N_LAYERS: (schema.MODEL, np.asarray(layers, dtype=np.int32)),
        schema.FAMILY: (schema.MODEL, np.asarray([(families or {}).get(m, "fam") for m in names])),
        "n_params": (
            schema.MODEL,
            np.asarray(
                [(n_params or {}).get(m, int(1e8) * n) for m, n in zip(names, layers, strict=True)], dtype=np.int64
            ),
        ),
        schema.VOCAB_SIZE: (
            schema.MODEL,
            np.asarray([(vocab_sizes or {}).get(m, DEFAULT_VOCAB) for m in names], dtype=np.int64),
        ),
        schema.PROMPT: prompt_ids,
        schema.PROMPT_TEXT: ((schema.MODEL, schema.PROMPT), np.asarray([[f"text {i}" for i in range(p)]] * len(names))),
        schema.TOKEN: np.arange(t, dtype=np.int32),
        schema.LAYER: np.arange(width, dtype=np.int32),
        schema.DEPTH: ((schema.MODEL, schema.LAYER), depth),
        schema.ALPHA: np.asarray(ALPHAS, dtype=np.float64),
    }
    for name, values in (prompt_labels or {}).items():
        coords[name] = (schema.PROMPT, np.asarray(values))
    attrs = {"schema_version": schema.SCHEMA_VERSION, "entropy_lens_version": "test", "versions": "{}"}
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    schema.validate_profiles(ds, combined=True)
    return ds


def lazy(ds: xr.Dataset, folder: Path) -> xr.Dataset:
    """Write ``ds`` with :mod:`entropy_lens.store.storage` under ``folder`` and reopen it lazily.

    This is the real store path: dask-backed variables and strings read back as Zarr
    returns them (numpy ``StringDType``), not as fixed-width unicode.
    """
    path = Path(folder) / "store.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Zarr v3 spec warnings about string dtypes are irrelevant here
        storage.write_profiles(ds, path, combined=True)
        return storage.open_profiles(path, combined=True)


def linear_profiles(n_prompts: int, n_tokens: int, n_layers: int, *, slope: float, offset: float) -> np.ndarray:
    """``[P, T, L]`` profiles ``offset + slope * depth``, identical for every prompt and token."""
    depth = schema.depth_of(np.arange(n_layers), n_layers).astype(np.float64)
    return np.broadcast_to(offset + slope * depth, (n_prompts, n_tokens, n_layers)).copy()


TASKS = ("continue", "count", "gist")
N_STORIES = 20


def task_store(effect: float, seed: int, *, jaccard: float = 0.5, equal_nuclei: bool = True) -> xr.Dataset:
    """A tasks store of one model ``m1``: 20 stories x 3 tasks x 2 phrasings, 3 tokens, 7 layers; the task shifts
    the profile by ``effect``; every adjacent-layer Jaccard is ``jaccard``; with ``equal_nuclei`` every nucleus
    holds 5 tokens (so containment is ``2 J / (1 + J)``), else ``round(exp(H))`` (so the nucleus change tracks
    the entropy change)."""
    rng = np.random.default_rng(seed)
    task = np.tile(np.repeat(TASKS, 2), N_STORIES)
    story = np.repeat([f"s{i}" for i in range(N_STORIES)], 6)
    profiles = rng.normal(size=(task.size, 3, 7)) + 3.0
    profiles += effect * np.searchsorted(TASKS, task)[:, None, None]
    nucleus = np.full(profiles.shape, 5, dtype=np.int32)
    overlap = np.full(profiles.shape, jaccard)
    overlap[..., -1] = np.nan
    return combined_dataset(
        {"m1": profiles},
        prompt_labels={"task": task, "story_id": story, "scrambled": np.zeros(task.size, bool)},
        nucleus={"m1": nucleus} if equal_nuclei else None,
        jaccard={"m1": overlap},
    )
