"""The entropy change that chooses the blocks to skip, and the blocks the study's advice protects.

``Delta H`` of layer ``l`` is ``H_l - H_{l-1}`` (nats), averaged over a model's unmasked token slots
(:func:`mean_delta_h`) or per question (:func:`question_delta_h`; with one generated token, at the answer
position).  From it: the ``k`` blocks of largest increase (expansion) or decrease (pruning) per variant
(:func:`select_layers`, :func:`selections`), how stable the top block is across calibration questions
(:func:`top_block_shares`), and the expansion phases the advice "protect expansion" keeps
(:func:`protected_layers`).  The skips themselves are :mod:`entropy_lens.skipping.conditions`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.skipping.conditions import (
    ALL_BLOCKS,
    EXPANSION,
    LOGIT,
    SELECTION_KINDS,
    VARIANTS,
    Selection,
    check_k,
    eligible_layers,
)
from entropy_lens.store import schema

if TYPE_CHECKING:
    # Annotations only: the skip tables and figures use the selections without opening a store.
    import xarray as xr

FIRST_LAYER_RULE = (
    "layer 0 has no lens predecessor, so its Delta H is undefined (NaN) and it is never an "
    "expansion/pruning candidate; random baselines exclude it too"
)
DEFAULT_MIN_INCREASE = 0.0


def _entropy_diffs(ds: xr.Dataset) -> np.ndarray:
    """``[P, T, L-1]`` float64 ``H_l - H_{l-1}`` of one model's profiles (masked slots NaN)."""
    if schema.MODEL in ds.dims:
        raise ValueError(f"dataset has a {schema.MODEL!r} dim; select one model first (ds.sel(model=name))")
    if schema.ENTROPY not in ds:
        raise ValueError(f"dataset has no {schema.ENTROPY!r} variable; pass a profile dataset")
    entropy = schema.real_layers(ds[schema.ENTROPY]).transpose(schema.PROMPT, schema.TOKEN, schema.LAYER)
    return np.diff(np.asarray(entropy.values, dtype=np.float64), axis=2)


def _masked_mean(values: np.ndarray, axis: tuple[int, ...] | int) -> np.ndarray:
    valid = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid.any(axis=axis), np.nansum(values, axis=axis) / valid.sum(axis=axis), np.nan)


def mean_delta_h(ds: xr.Dataset) -> np.ndarray:
    """Mean entropy change per layer, ``Delta H_l = H_l - H_{l-1}``, over every unmasked slot.

    Args:
        ds: A per-model profile dataset with ``entropy`` over ``(prompt, token, layer)``
            (nats), or one model selected from a combined store.

    Returns:
        ``[L]`` float64 in nats; entry 0 is NaN (see :data:`FIRST_LAYER_RULE`).

    Raises:
        ValueError: for a combined store with several models, a dataset without
            ``entropy``, or no unmasked token slot.
    """
    diffs = _entropy_diffs(ds)
    if not np.isfinite(diffs).any():
        raise ValueError("profile dataset has no unmasked token slot; cannot average Delta H")
    return np.concatenate([[math.nan], _masked_mean(diffs.reshape(-1, diffs.shape[2]), 0)])


def question_delta_h(ds: xr.Dataset) -> np.ndarray:
    """Per prompt, its Delta H per layer averaged over its unmasked token slots.

    With one generated token this is the entropy change at the answer position.

    Returns:
        ``[P, L]`` float64 in nats; column 0 NaN, and rows of prompts without an unmasked slot NaN.
    """
    diffs = _entropy_diffs(ds)
    per_prompt = _masked_mean(diffs, 1)  # [P, L-1]
    return np.concatenate([np.full((per_prompt.shape[0], 1), math.nan), per_prompt], axis=1)


def _check_delta_h(delta_h: np.ndarray) -> np.ndarray:
    values = np.asarray(delta_h, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"delta_h must be a non-empty 1-D array [L], got shape {values.shape}")
    return values


def select_layers(delta_h: np.ndarray, k: int, kind: str, variant: str = ALL_BLOCKS) -> list[int]:
    """The ``k`` eligible blocks of largest mean entropy increase or decrease.

    Blocks whose Delta H is NaN (layer 0) and blocks the variant excludes are never chosen.
    The ranking does not look at the sign: with fewer than ``k`` rising layers,
    ``"expansion"`` still returns the ``k`` largest values.  Ties go to the lower layer.

    Args:
        delta_h: ``[L]`` mean Delta H in nats (as from :func:`mean_delta_h`).
        k: How many blocks.
        kind: ``"expansion"`` (largest increases) or ``"pruning"`` (largest decreases).
        variant: One of :data:`VARIANTS`.

    Returns:
        The chosen block indices, ascending.

    Raises:
        ValueError: for an unknown ``kind`` or variant, a bad shape or a ``k`` out of range.
    """
    values = _check_delta_h(delta_h)
    if kind not in SELECTION_KINDS:
        raise ValueError(f"kind must be one of {SELECTION_KINDS}, got {kind!r}")
    pool = eligible_layers(values.size, variant)
    candidates = pool[np.isfinite(values[pool])]
    k = check_k(k, candidates.size)
    score = values[candidates] if kind == EXPANSION else -values[candidates]
    order = np.argsort(-score, kind="stable")  # stable: ties keep the lower layer first
    return sorted(int(layer) for layer in candidates[order[:k]])


def selections(
    delta_h: np.ndarray, ks: Sequence[int], variants: Sequence[str] = VARIANTS, lens: str = LOGIT
) -> list[Selection]:
    """Expansion and pruning blocks for every variant and ``k`` of Delta H read through ``lens`` (a ``k`` beyond
    the eligible blocks is left out)."""
    values = _check_delta_h(delta_h)
    out = []
    for variant in variants:
        n_candidates = int(np.isfinite(values[eligible_layers(values.size, variant)]).sum())
        for k in ks:
            if k <= n_candidates:
                picks = [tuple(select_layers(values, k, kind, variant)) for kind in SELECTION_KINDS]
                out.append(Selection(variant, int(k), *picks, lens=lens))
    return out


def top_block_shares(
    per_question: np.ndarray, variant: str, *, n_boot: int, seed: int, n_layers: int | None = None
) -> pd.DataFrame:
    """How stable the top expansion and pruning block is across calibration questions.

    Each bootstrap replicate resamples the calibration questions, averages their Delta H and
    picks the top block of each kind (:func:`select_layers`, ``k = 1``).

    Args:
        per_question: ``[Q, L]`` Delta H per calibration question (:func:`question_delta_h`).
        variant: One of :data:`VARIANTS`.
        n_boot: Replicates.
        seed: Seed of :func:`numpy.random.default_rng`.
        n_layers: Blocks of the model (default: the columns of ``per_question``).

    Returns:
        ``variant, kind, layer, share, chosen``: for every eligible block, the share of replicates
        that picked it, and whether the full sample picks it.
    """
    values = np.asarray(per_question, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1:
        raise ValueError(f"per_question must be a [Q, L] array with Q >= 1, got shape {values.shape}")
    n_boot = check_positive_int(n_boot, "n_boot")
    values = values[np.isfinite(values[:, 1:]).all(axis=1)]
    if values.shape[0] == 0:
        raise ValueError("no calibration question has a Delta H at every layer; profile more questions")
    counts = np.random.default_rng(seed).multinomial(
        values.shape[0], np.full(values.shape[0], 1 / values.shape[0]), n_boot
    )
    means = counts @ np.nan_to_num(values) / values.shape[0]  # [B, L]; column 0 is no candidate
    means[:, 0] = np.nan
    pool = eligible_layers(n_layers or values.shape[1], variant)
    full = values.mean(axis=0)
    rows = []
    for kind in SELECTION_KINDS:
        picks = np.array([select_layers(row, 1, kind, variant)[0] for row in means])
        chosen = select_layers(np.concatenate([[math.nan], full[1:]]), 1, kind, variant)[0]
        rows += [
            {
                "variant": variant,
                "kind": kind,
                "layer": int(layer),
                "share": float((picks == layer).mean()),
                "chosen": bool(layer == chosen),
            }
            for layer in pool
        ]
    return pd.DataFrame(rows, columns=["variant", "kind", "layer", "share", "chosen"])


def _phases(values: np.ndarray, rising: np.ndarray) -> list[dict[str, Any]]:
    """Maximal runs of consecutive rising layers, with their total increase."""
    phases: list[dict[str, Any]] = []
    for layer in np.flatnonzero(rising):
        if phases and phases[-1]["end"] == layer - 1:
            phases[-1]["end"] = int(layer)
            phases[-1]["total_increase"] += float(values[layer])
        else:
            phases.append({"start": int(layer), "end": int(layer), "total_increase": float(values[layer])})
    return phases


def protected_layers(
    delta_h: np.ndarray,
    *,
    min_increase: float = DEFAULT_MIN_INCREASE,
    protect_undefined: bool = True,
) -> dict[str, Any]:
    """Early-exit / pruning guidance from the profile alone: which layers it says to keep.

    Expansion phases are maximal runs of consecutive layers whose mean Delta H exceeds
    ``min_increase`` nats; their layers are protected.  Layers with undefined Delta H
    (layer 0) are protected too unless ``protect_undefined`` is false, since the profile
    cannot vouch for removing them.  The rest are listed as pruning candidates, largest
    entropy decrease first.  This is what the study's advice would say; the measured
    criticality map (``skip_map``) says what skipping each block costs.

    Args:
        delta_h: ``[L]`` mean Delta H in nats (as from :func:`mean_delta_h`).
        min_increase: Threshold in nats above which a layer counts as expanding (>= 0).
        protect_undefined: Protect layers whose Delta H is NaN.

    Returns:
        A JSON-safe dict: ``n_layers``, ``rule``, ``first_layer_rule``, ``min_increase``,
        ``protect`` (ascending layers), ``phases`` (``start``, ``end``, ``total_increase``),
        ``largest_expansion_layer`` (or ``None``), ``pruning_candidates`` and
        ``delta_h`` (floats, ``None`` for NaN).

    Raises:
        ValueError: for a bad shape or a negative / non-finite threshold.
    """
    values = _check_delta_h(delta_h)
    if not (math.isfinite(min_increase) and min_increase >= 0):
        raise ValueError(f"min_increase must be a finite number >= 0 nats, got {min_increase!r}")
    finite = np.isfinite(values)
    rising = finite & (values > min_increase)
    protect = rising | (~finite if protect_undefined else np.zeros_like(finite))
    free = np.flatnonzero(finite & ~protect)
    return {
        "n_layers": int(values.size),
        "rule": f"protect layers whose mean Delta H exceeds {min_increase} nats (expansion phases)",
        "first_layer_rule": FIRST_LAYER_RULE,
        "min_increase": float(min_increase),
        "protect": [int(v) for v in np.flatnonzero(protect)],
        "phases": _phases(values, rising),
        "largest_expansion_layer": int(np.nanargmax(values)) if rising.any() else None,
        "pruning_candidates": [int(v) for v in free[np.argsort(values[free], kind="stable")]],
        "delta_h": [float(v) if math.isfinite(v) else None for v in values],
    }
