"""Planted data for the expansion nulls: random logits per layer through the lens's own functions.

A planted *null* draws the logits of every (prompt, token, layer) independently (standard normal
over a small vocabulary), each layer scaled by its own random inverse temperature so that entropy
and nucleus size vary from layer to layer: consecutive layers share no candidates beyond chance,
while everything mechanical (how entropy and nucleus size move together within one distribution)
is kept.  A planted *signal* makes layer ``l + 1``'s logits layer ``l``'s plus a little noise, so
shortlists persist through the layers.  Entropy, top-p sets and their overlaps come from
:func:`entropy_lens.lens.metrics.row_metrics` and :func:`entropy_lens.lens.nucleus.jaccard`, the
partner from :func:`entropy_lens.model.batching.batch_partners` (all prompts in one batch).
:func:`planted_store` wraps them as a store for :func:`~entropy_lens.analysis.expansion.spearman.expansion_spearman`
and :func:`~entropy_lens.analysis.expansion.overlap.nucleus_overlap`; the rates call the functions those tables
take their null columns from (:func:`~entropy_lens.analysis.expansion.nulls.spearman_null`,
:func:`~entropy_lens.analysis.expansion.nulls.overlap_null_rows`) on the same arrays, without the
tables' other intervals.

:func:`spearman_planted_rate` and :func:`overlap_planted_rate` give how often "beyond its null"
would be shown over many draws (the verdicts' decision handed in as ``shown``,
:func:`entropy_lens.core.planted.planted_rate`): at most 5% on planted nulls is the contract.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from entropy_lens.analysis.expansion import nulls
from entropy_lens.analysis.expansion.nulls import CONTAINMENT
from entropy_lens.core.intervals import DEFAULT_N_BOOT
from entropy_lens.core.planted import Excess, Shown, planted_rate
from entropy_lens.store import schema

PLANTED_TOKENS = 4
PLANTED_LAYERS = 6
PLANTED_VOCAB = 64
PLANTED_TOP_P = 0.6
# Log inverse temperatures of the layers are drawn uniformly from this range: entropies from near
# log V (flat) to well under one nat (peaked).
LOG_SCALE = (-0.5, 1.5)
# Planted signal: layer l+1 = layer l + this much fresh standard-normal noise.
SIGNAL_NOISE = 0.3
MODEL = "planted"


def planted_logits(rng: np.random.Generator, n_prompts: int, *, signal: bool) -> np.ndarray:
    """``[P, T, L, V]`` float32 logits: independent per layer (null) or persisting (signal), scaled per layer."""
    shape = (n_prompts, PLANTED_TOKENS, PLANTED_LAYERS, PLANTED_VOCAB)
    z = rng.standard_normal(shape)
    if signal:
        z[:, :, 1:] *= SIGNAL_NOISE
        z = np.cumsum(z, axis=2)
    scale = np.exp(rng.uniform(*LOG_SCALE, size=PLANTED_LAYERS))  # one inverse temperature per layer
    return (z * scale[None, None, :, None]).astype(np.float32)


def planted_arrays(logits: np.ndarray, top_p: float = PLANTED_TOP_P) -> dict[str, np.ndarray]:
    """The store's variables of ``[P, T, L, V]`` logits (``[P, T, L]`` each) and ``partner`` (``[P]`` indices).

    The lens's own functions run on tensors: torch is imported here, so that the claims, which name these rates
    as their planted nulls, import without it.
    """
    import torch

    from entropy_lens.lens import metrics, nucleus
    from entropy_lens.model.batching import batch_partners

    p, t, n_layers, vocab = logits.shape
    rm = metrics.row_metrics(torch.from_numpy(logits.reshape(-1, vocab)), top_p=top_p, alphas=(1.0,))
    masks = rm.nucleus_mask.reshape(p, t, n_layers, vocab)
    partner = batch_partners(np.arange(p))
    lower = masks[:, :, :-1].reshape(-1, vocab)
    adjacent = np.full((p, t, n_layers), np.nan, dtype=np.float32)
    cross = np.full((p, t, n_layers), np.nan, dtype=np.float32)
    adjacent[..., :-1] = nucleus.jaccard(lower, masks[:, :, 1:].reshape(-1, vocab)).reshape(p, t, -1)
    cross[..., :-1] = nucleus.jaccard(lower, masks[torch.from_numpy(partner)][:, :, 1:].reshape(-1, vocab)).reshape(
        p, t, -1
    )
    return {
        schema.ENTROPY: rm.entropy.reshape(p, t, n_layers).numpy(),
        schema.NUCLEUS_SIZE: rm.nucleus_size.reshape(p, t, n_layers).numpy().astype(np.int32),
        schema.NUCLEUS_JACCARD: adjacent,
        schema.NUCLEUS_JACCARD_CROSS: cross,
        schema.PARTNER: partner,
    }


def planted_store(logits: np.ndarray, top_p: float = PLANTED_TOP_P) -> xr.Dataset:
    """A one-model combined store of ``[P, T, L, V]`` logits: entropy, sizes, overlaps, partners."""
    arrays = planted_arrays(logits, top_p)
    p, t, n_layers, _ = logits.shape
    partner = arrays.pop(schema.PARTNER)
    dims = (schema.MODEL, schema.PROMPT, schema.TOKEN, schema.LAYER)
    ids = np.asarray([f"p{i:04d}" for i in range(p)], dtype=object)
    coords = {
        schema.MODEL: np.asarray([MODEL], dtype=object),
        schema.PROMPT: ids,
        schema.TOKEN: np.arange(t, dtype=np.int32),
        schema.LAYER: np.arange(n_layers, dtype=np.int32),
        schema.N_LAYERS: (schema.MODEL, np.asarray([n_layers], dtype=np.int32)),
        schema.FAMILY: (schema.MODEL, np.asarray(["planted"], dtype=object)),
        schema.DEPTH: ((schema.MODEL, schema.LAYER), schema.depth_of(np.arange(n_layers), n_layers)[None, :]),
        schema.PARTNER: ((schema.MODEL, schema.PROMPT), ids[partner][None, :]),
    }
    return xr.Dataset({name: (dims, values[None]) for name, values in arrays.items()}, coords=coords)


def spearman_planted_rate(
    n_prompts: int,
    draws: int = 100,
    seed: int = 0,
    *,
    shown: Shown,
    signal: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
) -> float:
    """Share of planted draws where the ``Delta H`` vs ``Delta N`` Spearman is shown beyond its null.

    Args:
        n_prompts: Prompts per draw (the bootstrap's unit).
        draws: Planted stores.
        seed: Seed of the logits.
        shown: ``(beyond, beyond_low, beyond_high) -> bool``: the decision on the excess over the null.
        signal: Plant persisting shortlists instead of independent layers.
        n_boot: Bootstrap replicates of each interval.

    Returns:
        The share of draws ``shown`` calls beyond the null.
    """

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        a = planted_arrays(planted_logits(rng, n_prompts, signal=signal))
        row = nulls.spearman_null(
            a[schema.ENTROPY], a[schema.NUCLEUS_SIZE], a[schema.PARTNER], nulls.RECORDED, n_boot=n_boot, seed=draw
        )
        return _excess(row)

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def overlap_planted_rate(
    n_prompts: int,
    draws: int = 100,
    seed: int = 0,
    *,
    shown: Shown,
    statistic: str = CONTAINMENT,
    signal: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
) -> float:
    """Share of planted draws where an overlap statistic (``containment`` by default) is shown beyond its null.

    Args:
        n_prompts: Prompts per draw (the bootstrap's unit).
        draws: Planted stores.
        seed: Seed of the logits.
        shown: ``(beyond, beyond_low, beyond_high) -> bool``: the decision on the excess over the null.
        statistic: ``jaccard``, ``containment`` or ``containment_size_changes``.
        signal: Plant persisting shortlists instead of independent layers.
        n_boot: Bootstrap replicates of each interval.

    Returns:
        The share of draws ``shown`` calls beyond the null.
    """
    names = (nulls.JACCARD, nulls.CONTAINMENT, nulls.CONTAINMENT_SIZE_CHANGES)
    if statistic not in names:
        raise ValueError(f"statistic must be one of {list(names)}, got {statistic!r}")

    def simulate(rng: np.random.Generator, draw: int) -> Excess:
        a = planted_arrays(planted_logits(rng, n_prompts, signal=signal))
        arrays = (a[schema.NUCLEUS_JACCARD], a[schema.NUCLEUS_JACCARD_CROSS], a[schema.NUCLEUS_SIZE], a[schema.PARTNER])
        return _excess(nulls.overlap_null_rows(*arrays, nulls.RECORDED, n_boot=n_boot, seed=draw)[statistic])

    return planted_rate(simulate, shown, draws=draws, seed=seed)


def _excess(row: Mapping[str, object]) -> Excess:
    """A null row's excess over its null with its interval."""
    return float(row["beyond"]), float(row["beyond_low"]), float(row["beyond_high"])
