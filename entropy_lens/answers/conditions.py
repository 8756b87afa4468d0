"""Skip conditions: which layers to skip, chosen from a mean entropy-change profile.

The causal test of the study skips the ``k`` blocks where the logit-lens entropy rises
most (expansion), where it falls most (pruning), or ``k`` random blocks.  A
:class:`Condition` is one such choice; its ``name`` (``intact``, ``expansion_k2``,
``random_k2_r0``) is for people and file names only and is never parsed back.

Layer 0 rule: Delta H of layer ``l`` is ``H_l - H_{l-1}`` (nats) and layer 0 has no
lens predecessor, so :func:`mean_delta_h` leaves it NaN and layers whose Delta H is NaN
are never expansion/pruning candidates; random baselines draw from the same candidate
pool (layer 0 excluded by default) so the comparison is like for like.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from entropy_lens.core.checks import check_layers, check_positive_int
from entropy_lens.store import schema

INTACT = "intact"
EXPANSION = "expansion"
PRUNING = "pruning"
RANDOM = "random"
KINDS = (INTACT, EXPANSION, PRUNING, RANDOM)
SELECTION_KINDS = (EXPANSION, PRUNING)
FIRST_LAYER_RULE = (
    "layer 0 has no lens predecessor, so its Delta H is undefined (NaN) and it is never an "
    "expansion/pruning candidate; random baselines exclude it too"
)
DEFAULT_EXCLUDE = (0,)
DEFAULT_MIN_INCREASE = 0.0


@dataclass(frozen=True)
class Condition:
    """One skip condition: what kind, how many layers, which, and which random replicate.

    Attributes:
        kind: One of :data:`KINDS`.
        k: Number of skipped layers (0 for ``intact``).
        layers: The skipped block indices, ascending.
        replicate: Index of a random set (0 for the other kinds).
    """

    kind: str
    k: int
    layers: tuple[int, ...] = ()
    replicate: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"condition kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "layers", tuple(sorted(int(v) for v in self.layers)))
        if len(self.layers) != self.k or (self.kind == INTACT) != (self.k == 0):
            raise ValueError(f"a {self.kind!r} condition needs k={self.k} layers, got {list(self.layers)}")

    @property
    def name(self) -> str:
        """``intact``, ``expansion_k{k}``, ``pruning_k{k}`` or ``random_k{k}_r{replicate}``."""
        if self.kind == INTACT:
            return INTACT
        suffix = f"_r{self.replicate}" if self.kind == RANDOM else ""
        return f"{self.kind}_k{self.k}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the name is included for readers and is ignored on load)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "k": self.k,
            "layers": list(self.layers),
            "replicate": self.replicate,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Condition:
        """Inverse of :meth:`to_dict`."""
        return cls(record["kind"], int(record["k"]), tuple(record["layers"]), int(record.get("replicate", 0)))


def mean_delta_h(ds: xr.Dataset) -> np.ndarray:
    """Mean entropy change per layer, ``Delta H_l = H_l - H_{l-1}``, of one model's profiles.

    The difference is taken per (prompt, token) and averaged over the unmasked slots
    (masked slots are NaN at every layer and are ignored).

    Args:
        ds: A per-model profile dataset with ``entropy`` over ``(prompt, token, layer)``
            (nats), or one model selected from a combined store (its NaN-padded layers
            beyond the ``n_layers`` coordinate are dropped).

    Returns:
        ``[L]`` float64 in nats; entry 0 is NaN (see :data:`FIRST_LAYER_RULE`).

    Raises:
        ValueError: for a combined store with several models, a dataset without
            ``entropy``, or no unmasked token slot.
    """
    if schema.MODEL in ds.dims:
        raise ValueError(f"dataset has a {schema.MODEL!r} dim; select one model first (ds.sel(model=name))")
    if schema.ENTROPY not in ds:
        raise ValueError(f"dataset has no {schema.ENTROPY!r} variable; pass a profile dataset")
    entropy = schema.real_layers(ds[schema.ENTROPY])
    diffs = entropy.diff(schema.LAYER).transpose(..., schema.LAYER)
    values = np.asarray(diffs.values, dtype=np.float64).reshape(-1, diffs.sizes[schema.LAYER])
    valid = ~np.isnan(values)
    if not valid.any():
        raise ValueError("profile dataset has no unmasked token slot; cannot average Delta H")
    with np.errstate(invalid="ignore"):
        mean = np.nansum(values, axis=0) / valid.sum(axis=0)  # [L-1], NaN where a layer has no data
    return np.concatenate([[math.nan], mean])


def _check_delta_h(delta_h: np.ndarray) -> np.ndarray:
    values = np.asarray(delta_h, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"delta_h must be a non-empty 1-D array [L], got shape {values.shape}")
    return values


def _check_k(k: int, n_candidates: int) -> int:
    check_positive_int(k, "k")
    if k > n_candidates:
        raise ValueError(f"k={k} exceeds the {n_candidates} candidate layers; lower k")
    return int(k)


def select_layers(delta_h: np.ndarray, k: int, kind: str) -> list[int]:
    """The ``k`` layers of largest mean entropy increase or decrease.

    Layers whose Delta H is NaN (layer 0 by :data:`FIRST_LAYER_RULE`) are never chosen.
    The ranking does not look at the sign: with fewer than ``k`` rising layers,
    ``"expansion"`` still returns the ``k`` largest values.  Ties go to the lower layer.

    Args:
        delta_h: ``[L]`` mean Delta H in nats (as from :func:`mean_delta_h`).
        k: How many layers (``1 <= k <=`` number of finite entries).
        kind: ``"expansion"`` (largest increases) or ``"pruning"`` (largest decreases).

    Returns:
        The chosen layer indices, ascending.

    Raises:
        ValueError: for an unknown ``kind``, a bad shape or a ``k`` out of range.
    """
    values = _check_delta_h(delta_h)
    if kind not in SELECTION_KINDS:
        raise ValueError(f"kind must be one of {SELECTION_KINDS}, got {kind!r}")
    candidates = np.flatnonzero(np.isfinite(values))
    k = _check_k(k, candidates.size)
    score = values[candidates] if kind == EXPANSION else -values[candidates]
    order = np.argsort(-score, kind="stable")  # stable: ties keep the lower layer first
    return sorted(int(layer) for layer in candidates[order[:k]])


def random_layer_sets(
    n_layers: int, k: int, n_sets: int, seed: int, *, exclude: Iterable[int] = DEFAULT_EXCLUDE
) -> list[list[int]]:
    """``n_sets`` random sets of ``k`` distinct layers, reproducible under ``seed``.

    Sets are drawn independently (two sets may coincide when the pool is small) from
    ``0..n_layers-1`` minus ``exclude``.

    Args:
        n_layers: Number of blocks ``L``.
        k: Layers per set.
        n_sets: Number of sets ``R`` (>= 1).
        seed: Seed of :func:`numpy.random.default_rng`.
        exclude: Layers never drawn; default layer 0, matching :data:`FIRST_LAYER_RULE`.

    Returns:
        ``R`` ascending lists of layer indices.

    Raises:
        ValueError: for bad counts or excluded indices out of range.
    """
    check_positive_int(n_layers, "n_layers")
    check_positive_int(n_sets, "n_sets")
    excluded = set(check_layers(sorted(set(exclude)), n_layers))
    pool = np.array([layer for layer in range(n_layers) if layer not in excluded])
    k = _check_k(k, pool.size)
    rng = np.random.default_rng(seed)
    return [sorted(int(v) for v in rng.choice(pool, size=k, replace=False)) for _ in range(n_sets)]


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
    """Early-exit / pruning guidance: which layers the entropy profile says to keep.

    Expansion phases are maximal runs of consecutive layers whose mean Delta H exceeds
    ``min_increase`` nats; their layers are protected.  Layers with undefined Delta H
    (layer 0) are protected too unless ``protect_undefined`` is false, since the profile
    cannot vouch for removing them.  The rest are listed as pruning candidates, largest
    entropy decrease first.

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


def skip_conditions(delta_h: np.ndarray, ks: Sequence[int], n_random: int, seed: int) -> list[Condition]:
    """The experiment's conditions: intact, then per ``k`` expansion, pruning and random sets.

    Random set ``i`` for ``k`` is drawn with seed ``(seed, k)`` so adding a ``k`` leaves
    the others unchanged.

    Args:
        delta_h: ``[L]`` mean Delta H (layer 0 NaN, see :data:`FIRST_LAYER_RULE`).
        ks: Numbers of layers to skip.
        n_random: Random sets per ``k``.
        seed: Base seed of the random sets.
    """
    n_layers = len(delta_h)
    conditions = [Condition(INTACT, 0)]
    for k in ks:
        conditions.append(Condition(EXPANSION, k, tuple(select_layers(delta_h, k, EXPANSION))))
        conditions.append(Condition(PRUNING, k, tuple(select_layers(delta_h, k, PRUNING))))
        sets = random_layer_sets(n_layers, k, n_random, int(np.random.SeedSequence([seed, k]).generate_state(1)[0]))
        conditions += [Condition(RANDOM, k, tuple(layers), i) for i, layers in enumerate(sets)]
    return conditions
