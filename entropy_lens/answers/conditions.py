"""Skip conditions: which blocks to skip, chosen from the entropy change at the answer position.

The causal test of the study skips the ``k`` blocks where the logit-lens entropy rises most
(expansion), where it falls most (pruning), or ``k`` random blocks, and reads what MMLU
accuracy loses.  Here it is run in three parts, all fixed before anything is scored:

* **the sweep**: every block skipped on its own (:func:`sweep_conditions`), the per-layer
  criticality map; at ``k = 1`` the expansion and pruning blocks are two of its columns and
  the random baseline is the mean over every eligible block (a census, no draw);
* **selections** (:class:`Selection`): per *variant* and ``k``, the expansion and pruning
  blocks of the mean Delta H over calibration questions, read at the answer position (the
  position the accuracy is read at).  Two variants (:data:`VARIANTS`): every block eligible
  (the study's choice), and the final block excluded: the final block's Delta H is the
  model flattening its own output distribution, and skipping it is an early exit one block
  sooner, so no later block ever sees an off-distribution residual;
* **random populations** for ``k >= 2`` (:func:`random_population`): at least ``n_sets``
  random sets per variant's pool, drawn once from the pool of every eligible block, so that
  the sets avoiding the final block are a uniform sample of the smaller pool too.

A :class:`Condition` is one skip; its ``name`` is for people and file names only and is never
parsed back (analyses find conditions by their ``layers``).

Layer 0 rule: Delta H of layer ``l`` is ``H_l - H_{l-1}`` (nats) and layer 0 has no lens
predecessor, so its Delta H is NaN and it is never an expansion/pruning candidate; random
sets and the ``k = 1`` census draw from the same eligible blocks, so comparisons are like for
like.  The sweep still skips block 0, for the map.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from entropy_lens.core.checks import check_positive_int
from entropy_lens.store import schema

if TYPE_CHECKING:
    # Annotations only: the skip tables and figures use the conditions without opening a store.
    import xarray as xr

INTACT = "intact"
SINGLE = "single"
EXPANSION = "expansion"
PRUNING = "pruning"
RANDOM = "random"
# A multi-block drop set a pruning criterion chose (entropy_lens.answers.pruning); its random baseline is RANDOM.
DROP = "drop"
KINDS = (INTACT, SINGLE, EXPANSION, PRUNING, RANDOM, DROP)
SELECTION_KINDS = (EXPANSION, PRUNING)
ALL_BLOCKS = "all_blocks"
NO_FINAL = "no_final"
VARIANTS = (ALL_BLOCKS, NO_FINAL)
VARIANT_TEXT = {ALL_BLOCKS: "all blocks eligible", NO_FINAL: "final block excluded"}
VARIANT_SHORT = {ALL_BLOCKS: "all blocks", NO_FINAL: "no final"}
FIRST_LAYER_RULE = (
    "layer 0 has no lens predecessor, so its Delta H is undefined (NaN) and it is never an "
    "expansion/pruning candidate; random baselines exclude it too"
)
DEFAULT_MIN_INCREASE = 0.0
# The columns of score rows under skip conditions: one row per condition, measure and question;
# ``layers`` is :func:`layer_text` of the skipped blocks, ``gold_logprob`` the gold letter's
# log-probability among the four letters (nats) under the measure's scores.
CORRECT_COLUMNS = ("condition", "kind", "k", "replicate", "layers", "question", "measure", "correct", "gold_logprob")
# Draws of random sets stop after this many times the sets asked for, however few avoid the final block.
MAX_DRAW_FACTOR = 100


@dataclass(frozen=True)
class Condition:
    """One skip condition: what kind, how many blocks, which, and which random replicate.

    Attributes:
        kind: One of :data:`KINDS`.
        k: Number of skipped blocks (0 for ``intact``, 1 for ``single``).
        layers: The skipped block indices, ascending.
        replicate: Index of a random set or of a drop set among those of its ``k`` (0 for the other kinds).
        tag: The variant an expansion/pruning set belongs to when the variants chose differently.
    """

    kind: str
    k: int
    layers: tuple[int, ...] = ()
    replicate: int = 0
    tag: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"condition kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "layers", tuple(sorted(int(v) for v in self.layers)))
        if (
            len(self.layers) != self.k
            or (self.kind == INTACT) != (self.k == 0)
            or (self.kind == SINGLE and self.k != 1)
        ):
            raise ValueError(f"a {self.kind!r} condition needs k={self.k} layers, got {list(self.layers)}")

    @property
    def name(self) -> str:
        """``intact``, ``skip_{l}``, ``expansion_k{k}[_{tag}]``, ``pruning_k{k}[_{tag}]``, ``random_k{k}_r{i}``
        or ``drop_k{k}_s{i}``."""
        if self.kind == INTACT:
            return INTACT
        if self.kind == SINGLE:
            return f"skip_{self.layers[0]}"
        if self.kind == RANDOM:
            return f"random_k{self.k}_r{self.replicate}"
        if self.kind == DROP:
            return f"drop_k{self.k}_s{self.replicate}"
        return f"{self.kind}_k{self.k}" + (f"_{self.tag}" if self.tag else "")

    @property
    def layer_text(self) -> str:
        """The skipped blocks as ``"8,27"`` (how score tables name them)."""
        return layer_text(self.layers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the name is included for readers and is ignored on load)."""
        record = {"name": self.name, "kind": self.kind, "k": self.k, "layers": list(self.layers)}
        return record | {"replicate": self.replicate, "tag": self.tag}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Condition:
        """Inverse of :meth:`to_dict`."""
        return cls(
            record["kind"],
            int(record["k"]),
            tuple(record["layers"]),
            int(record.get("replicate", 0)),
            str(record.get("tag", "")),
        )


def layer_text(layers: Iterable[int]) -> str:
    """Block indices as the comma-joined text score tables carry (``(8, 27)`` -> ``"8,27"``)."""
    return ",".join(str(int(v)) for v in sorted(layers))


@dataclass(frozen=True)
class Selection:
    """The expansion and pruning blocks of one variant and ``k``.

    Attributes:
        variant: One of :data:`VARIANTS`.
        k: Blocks per set.
        expansion: The ``k`` eligible blocks of largest mean Delta H, ascending.
        pruning: The ``k`` eligible blocks of smallest mean Delta H, ascending.
    """

    variant: str
    k: int
    expansion: tuple[int, ...]
    pruning: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "k": self.k, "expansion": list(self.expansion), "pruning": list(self.pruning)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Selection:
        return cls(record["variant"], int(record["k"]), tuple(record["expansion"]), tuple(record["pruning"]))

    def layers(self, kind: str) -> tuple[int, ...]:
        """The blocks of ``kind`` (:data:`SELECTION_KINDS`)."""
        if kind not in SELECTION_KINDS:
            raise ValueError(f"kind must be one of {SELECTION_KINDS}, got {kind!r}")
        return self.expansion if kind == EXPANSION else self.pruning


def _check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return variant


def eligible_layers(n_layers: int, variant: str = ALL_BLOCKS) -> np.ndarray:
    """Blocks a selection or a random baseline may skip: ``1..L-1``, or ``1..L-2`` without the final block.

    Raises:
        ValueError: for an unknown variant or a model too shallow to leave any block eligible.
    """
    check_positive_int(n_layers, "n_layers")
    last = n_layers - 1 if _check_variant(variant) == ALL_BLOCKS else n_layers - 2
    if last < 1:
        raise ValueError(f"a model of {n_layers} blocks has no eligible block under variant {variant!r}")
    return np.arange(1, last + 1)


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


def _check_k(k: int, n_candidates: int) -> int:
    check_positive_int(k, "k")
    if k > n_candidates:
        raise ValueError(f"k={k} exceeds the {n_candidates} candidate layers; lower k")
    return int(k)


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
    k = _check_k(k, candidates.size)
    score = values[candidates] if kind == EXPANSION else -values[candidates]
    order = np.argsort(-score, kind="stable")  # stable: ties keep the lower layer first
    return sorted(int(layer) for layer in candidates[order[:k]])


def selections(delta_h: np.ndarray, ks: Sequence[int], variants: Sequence[str] = VARIANTS) -> list[Selection]:
    """Expansion and pruning blocks for every variant and ``k`` (a ``k`` beyond the eligible blocks is left out)."""
    values = _check_delta_h(delta_h)
    out = []
    for variant in variants:
        n_candidates = int(np.isfinite(values[eligible_layers(values.size, variant)]).sum())
        for k in ks:
            if k <= n_candidates:
                picks = [tuple(select_layers(values, k, kind, variant)) for kind in SELECTION_KINDS]
                out.append(Selection(variant, int(k), *picks))
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


def random_population(n_layers: int, k: int, n_sets: int, seed: int) -> list[tuple[int, ...]]:
    """Random sets of ``k`` distinct eligible blocks: at least ``n_sets`` per variant's pool.

    Sets are drawn independently (with replacement between sets) from every eligible block
    (``1..L-1``) until ``n_sets`` of them avoid the final block, so the whole draw is a
    uniform sample of the :data:`ALL_BLOCKS` pool and the sets avoiding the final block a
    uniform sample of the :data:`NO_FINAL` pool.  When the smaller pool holds fewer than
    ``k`` blocks, exactly ``n_sets`` sets are drawn.

    Returns:
        Ascending tuples of block indices, reproducible under ``seed``.

    Raises:
        ValueError: for bad counts or ``k`` beyond the eligible blocks.
    """
    n_sets = check_positive_int(n_sets, "n_sets")
    pool = eligible_layers(n_layers, ALL_BLOCKS)
    k = _check_k(k, pool.size)
    final = n_layers - 1
    reachable = pool.size - 1 >= k
    rng = np.random.default_rng(seed)
    sets: list[tuple[int, ...]] = []
    while len(sets) < MAX_DRAW_FACTOR * n_sets:
        sets.append(tuple(sorted(int(v) for v in rng.choice(pool, size=k, replace=False))))
        avoiding = sum(final not in s for s in sets)
        if len(sets) >= n_sets and (not reachable or avoiding >= n_sets):
            break
    return sets


def in_variant(layers: Iterable[int], n_layers: int, variant: str) -> bool:
    """Whether every block of ``layers`` is eligible under ``variant``."""
    return set(int(v) for v in layers) <= set(eligible_layers(n_layers, variant).tolist())


def sweep_conditions(n_layers: int) -> list[Condition]:
    """``intact`` and every block skipped on its own, ``0..L-1`` (the criticality map)."""
    check_positive_int(n_layers, "n_layers")
    return [Condition(INTACT, 0), *(Condition(SINGLE, 1, (layer,)) for layer in range(n_layers))]


def set_conditions(chosen: Sequence[Selection], n_layers: int, n_random: int, seed: int) -> list[Condition]:
    """``intact``, then per ``k >= 2``: the expansion and pruning sets of every variant and the random population.

    A set two variants chose alike is scored once (untagged); sets that differ carry their
    variant as ``tag``.  Random sets for ``k`` are drawn with seed ``(seed, k)`` so adding a
    ``k`` leaves the others unchanged.
    """
    conditions = [Condition(INTACT, 0)]
    for k in sorted({s.k for s in chosen if s.k >= 2}):
        of_k = [s for s in chosen if s.k == k]
        for kind in SELECTION_KINDS:
            sets = {s.variant: s.layers(kind) for s in of_k}
            alike = len(set(sets.values())) == 1
            seen: set[tuple[int, ...]] = set()
            for variant, layers in sets.items():
                if layers not in seen:
                    seen.add(layers)
                    conditions.append(Condition(kind, k, layers, tag="" if alike else variant))
        state = int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
        drawn = random_population(n_layers, k, n_random, state)
        conditions += [Condition(RANDOM, k, layers, i) for i, layers in enumerate(drawn)]
    return conditions


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
