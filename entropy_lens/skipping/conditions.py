"""Skip conditions: which blocks to skip, chosen from the entropy change at the answer position.

The causal test of the study skips the ``k`` blocks where the lens entropy rises most (expansion), where
it falls most (pruning), or ``k`` random blocks, and reads what MMLU loses.  Here it runs in parts, all
fixed before anything is scored:

* **the sweep**: every block skipped on its own (:func:`sweep_conditions`), the per-layer criticality map,
  on a subset of the evaluation questions;
* **selections** (:class:`Selection`): per *lens* (the logit lens, and a fitted linear lens where one is
  fitted), *variant* and ``k``, the expansion and pruning blocks of the mean Delta H over calibration
  questions, read at the answer position (the position the accuracy is read at).  Two variants
  (:data:`VARIANTS`): every block eligible (the study's choice), and the final block excluded: the final
  block's Delta H is the model flattening its own output distribution, and skipping it is an early exit
  one block sooner, so no later block ever sees an off-distribution residual;
* **the paired design**: on every evaluation question, the intact model, each selected block or set
  (:func:`selected_conditions`) and, per variant and ``k``, **one random set of ``k`` eligible blocks drawn
  for that question** (:func:`random_draws`, a :class:`Draws`): the comparisons are paired per question
  against a random set, at a few conditions per question rather than one per block.

A :class:`Condition` is one skip of fixed blocks; a :class:`Draws` one skip whose blocks differ per
question (and may leave a question out).  Names are for people and file names only and are never parsed
back (analyses find conditions by their ``layers``).

Layer 0 rule: Delta H of layer ``l`` is ``H_l - H_{l-1}`` (nats) and layer 0 has no lens
predecessor, so its Delta H is NaN and it is never an expansion/pruning candidate; random
sets draw from the same eligible blocks, so comparisons are like for like.  The sweep still skips
block 0, for the map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from entropy_lens.core.checks import check_positive_int

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
# The lenses a selection reads Delta H through: the logit lens, and a fitted linear lens where one is fitted.
LOGIT, LINEAR = "logit", "linear"
LENSES = (LOGIT, LINEAR)
LENS_TEXT = {LOGIT: "logit lens", LINEAR: "linear lens"}
# The columns of score rows under skip conditions: one row per condition, measure and question;
# ``layers`` is :func:`layer_text` of the skipped blocks, ``gold_logprob`` the gold letter's
# log-probability among the four letters (nats) under the measure's scores.
CORRECT_COLUMNS = ("condition", "kind", "k", "replicate", "layers", "question", "measure", "correct", "gold_logprob")


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
        or ``drop_k{k}_s{i}`` (the random draws per question are :class:`Draws`, named :func:`random_name`)."""
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
    """The expansion and pruning blocks of one lens, variant and ``k``.

    Attributes:
        variant: One of :data:`VARIANTS`.
        k: Blocks per set.
        expansion: The ``k`` eligible blocks of largest mean Delta H, ascending.
        pruning: The ``k`` eligible blocks of smallest mean Delta H, ascending.
        lens: The lens Delta H was read through (:data:`LENSES`).
    """

    variant: str
    k: int
    expansion: tuple[int, ...]
    pruning: tuple[int, ...]
    lens: str = LOGIT

    def __post_init__(self) -> None:
        if self.lens not in LENSES:
            raise ValueError(f"lens must be one of {LENSES}, got {self.lens!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "k": self.k,
            "expansion": list(self.expansion),
            "pruning": list(self.pruning),
            "lens": self.lens,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Selection:
        return cls(
            record["variant"],
            int(record["k"]),
            tuple(record["expansion"]),
            tuple(record["pruning"]),
            str(record.get("lens", LOGIT)),
        )

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


def in_variant(layers: Iterable[int], n_layers: int, variant: str) -> bool:
    """Whether every block of ``layers`` is eligible under ``variant``."""
    return set(int(v) for v in layers) <= set(eligible_layers(n_layers, variant).tolist())


def sweep_conditions(n_layers: int) -> list[Condition]:
    """``intact`` and every block skipped on its own, ``0..L-1`` (the criticality map)."""
    check_positive_int(n_layers, "n_layers")
    return [Condition(INTACT, 0), *(Condition(SINGLE, 1, (layer,)) for layer in range(n_layers))]


def selected_conditions(chosen: Sequence[Selection]) -> list[Condition]:
    """Each distinct block or set the selections chose, once: ``skip_{l}`` at ``k = 1`` (the sweep's own
    condition of that block), an ``expansion`` or ``pruning`` set at ``k >= 2`` (the first kind that chose it,
    its blocks as its tag).  Two lenses or variants that chose alike share one condition: nothing is scored twice."""
    out: dict[tuple[int, ...], Condition] = {}
    for selection in sorted(chosen, key=lambda s: s.k):
        for kind in SELECTION_KINDS:
            layers = selection.layers(kind)
            if layers in out:
                continue
            tag = "-".join(str(v) for v in layers)
            single = selection.k == 1
            out[layers] = Condition(SINGLE, 1, layers) if single else Condition(kind, selection.k, layers, 0, tag)
    return list(out.values())


@dataclass(frozen=True)
class Draws:
    """One skip whose blocks are drawn per question: the random baseline of the paired design.

    Attributes:
        name: The condition's name in score rows (:func:`random_name`).
        kind: One of :data:`KINDS` (``random``).
        k: Blocks per draw.
        layers: Per question (in the scored table's order), the skipped blocks, ascending; ``None`` where the
            question is not scored under this condition.
    """

    name: str
    kind: str
    k: int
    layers: tuple[tuple[int, ...] | None, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"draws kind must be one of {KINDS}, got {self.kind!r}")
        bad = [v for v in self.layers if v is not None and len(v) != self.k]
        if bad:
            raise ValueError(f"draws {self.name!r} of k={self.k} hold sets of another size: {bad[:3]}")

    @classmethod
    def of(cls, condition: Condition, scored: Sequence[bool]) -> Draws:
        """A fixed :class:`Condition` as draws: its blocks on the questions ``scored`` marks, ``None`` elsewhere."""
        return cls(condition.name, condition.kind, condition.k, tuple(condition.layers if s else None for s in scored))


def random_name(k: int, variant: str) -> str:
    """``random_k{k}_{variant}``: the condition name of the random sets drawn per question."""
    return f"random_k{int(k)}_{_check_variant(variant)}"


def random_draws(n_questions: int, n_layers: int, k: int, seed: int) -> dict[str, list[tuple[int, ...]]]:
    """Per variant, one random set of ``k`` distinct eligible blocks for each of ``n_questions`` questions.

    Each question draws a set uniformly from every eligible block (:data:`ALL_BLOCKS`); for
    :data:`NO_FINAL` it keeps that set where the set avoids the final block and draws again from the
    smaller pool where it does not, so each variant's draws are uniform over its own pool and the two
    coincide on most questions (a coincident draw is scored once).  Where the smaller pool holds fewer
    than ``k`` blocks, :data:`NO_FINAL` gets no draws.

    Returns:
        ``{variant: [one ascending tuple per question]}``, reproducible under ``seed``.

    Raises:
        ValueError: for bad counts or ``k`` beyond the eligible blocks.
    """
    n_questions = check_positive_int(n_questions, "n_questions")
    pool = eligible_layers(n_layers, ALL_BLOCKS)
    k = check_k(k, pool.size)
    rng = np.random.default_rng(seed)
    draws = {ALL_BLOCKS: [_draw(rng, pool, k) for _ in range(n_questions)]}
    if pool.size - 1 >= k:
        smaller = eligible_layers(n_layers, NO_FINAL)
        final = n_layers - 1
        draws[NO_FINAL] = [s if final not in s else _draw(rng, smaller, k) for s in draws[ALL_BLOCKS]]
    return draws


def _draw(rng: np.random.Generator, pool: np.ndarray, k: int) -> tuple[int, ...]:
    """``k`` distinct blocks of ``pool``, ascending."""
    return tuple(sorted(int(v) for v in rng.choice(pool, k, replace=False)))


def question_seed(seed: int, k: int) -> int:
    """The seed of the random draws of ``k`` (``(seed, k)``): adding a ``k`` leaves the others' draws unchanged."""
    return int(np.random.SeedSequence([int(seed), int(k)]).generate_state(1)[0])
