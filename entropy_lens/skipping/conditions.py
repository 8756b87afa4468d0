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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from entropy_lens.core.checks import check_positive_int

if TYPE_CHECKING:
    # Annotations only: the skip tables and figures use the conditions without opening a store.
    pass

INTACT = "intact"
SINGLE = "single"
EXPANSION = "expansion"
PRUNING = "pruning"
RANDOM = "random"
# A multi-block drop set a pruning criterion chose (entropy_lens.skipping.pruning); its random baseline is RANDOM.
DROP = "drop"
KINDS = (INTACT, SINGLE, EXPANSION, PRUNING, RANDOM, DROP)
SELECTION_KINDS = (EXPANSION, PRUNING)
ALL_BLOCKS = "all_blocks"
NO_FINAL = "no_final"
VARIANTS = (ALL_BLOCKS, NO_FINAL)
VARIANT_TEXT = {ALL_BLOCKS: "all blocks eligible", NO_FINAL: "final block excluded"}
VARIANT_SHORT = {ALL_BLOCKS: "all blocks", NO_FINAL: "no final"}
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


def check_k(k: int, n_candidates: int) -> int:
    check_positive_int(k, "k")
    if k > n_candidates:
        raise ValueError(f"k={k} exceeds the {n_candidates} candidate layers; lower k")
    return int(k)


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
    k = check_k(k, pool.size)
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
