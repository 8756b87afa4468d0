"""Layer skipping: remove blocks' residual writes, choose which, and score the damage.

The causal test of the study: skipping the blocks where the logit-lens entropy rises
most (expansion) should cost more accuracy than skipping where it falls most
(pruning) or random blocks.  This module holds

* :func:`skip_blocks`, a context manager that makes chosen blocks pass their input
  through unchanged (with or without a KV cache) and restores the model on exit;
* layer selection from a mean Delta H profile (:func:`mean_delta_h`,
  :func:`select_layers`, :func:`random_layer_sets`, :func:`protected_layers`);
* the evaluation loop (:func:`run_skip_conditions`) with a bootstrap interval
  (:func:`bootstrap_ci`); the scorer is passed in, so this module does not depend on
  how answers are scored.

Skipping is not trained early exit: the skipped blocks are simply bypassed in a
model trained with them.

Layer 0 rule: Delta H of layer ``l`` is ``H_l - H_{l-1}`` (nats) and layer 0 has no
lens predecessor, so :func:`mean_delta_h` leaves it NaN and layers whose Delta H is
NaN are never expansion/pruning candidates; random baselines draw from the same
candidate pool (layer 0 excluded by default) so the comparison is like for like.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import xarray as xr
from torch import nn

from entropy_lens import schema
from entropy_lens.models import LensModel

logger = logging.getLogger(__name__)

EXPANSION = "expansion"
PRUNING = "pruning"
SELECTION_KINDS = (EXPANSION, PRUNING)
FIRST_LAYER_RULE = (
    "layer 0 has no lens predecessor, so its Delta H is undefined (NaN) and it is never an "
    "expansion/pruning candidate; random baselines exclude it too"
)
DEFAULT_EXCLUDE = (0,)
DEFAULT_N_BOOT = 1000
DEFAULT_LEVEL = 0.95
DEFAULT_MIN_INCREASE = 0.0
ALL_GROUP = "all"

Scorer = Callable[[LensModel, list[str]], np.ndarray]


# --------------------------------------------------------------------------- skipping


def check_layers(layers: Iterable[int], n_layers: int) -> list[int]:
    """Validate block indices: integers in ``0..n_layers-1``, each at most once.

    Returns:
        The indices as Python ints, in the order given.

    Raises:
        TypeError: for an index that is not an integer.
        ValueError: for an index out of range or listed twice.
    """
    checked: list[int] = []
    for value in layers:
        if isinstance(value, bool):
            raise TypeError(f"layer index must be an integer, got {value!r}")
        try:
            index = operator.index(value)
        except TypeError as err:
            raise TypeError(f"layer index must be an integer, got {value!r} ({type(value).__name__})") from err
        if not 0 <= index < n_layers:
            raise ValueError(f"layer {index} is out of range: the model has {n_layers} blocks, valid 0..{n_layers - 1}")
        if index in checked:
            raise ValueError(f"layer {index} is listed twice; list each block to skip once")
        checked.append(index)
    return checked


def _first_param(block: nn.Module) -> str:
    """Name of the first parameter of ``block.forward`` (the residual stream input)."""
    params = list(inspect.signature(block.forward).parameters)
    if not params:
        raise ValueError(f"block {type(block).__name__} takes no arguments; cannot find its residual input")
    return params[0]


def _skip_hook(name: str) -> Callable[..., Any]:
    """A forward hook (``with_kwargs=True``) that replaces the block's hidden output by its input."""

    def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        hidden = args[0] if args else kwargs.get(name)
        if not isinstance(hidden, torch.Tensor):
            raise ValueError(f"block {type(module).__name__} was called without its residual input {name!r}")
        if isinstance(output, torch.Tensor):
            return hidden
        if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
            return type(output)((hidden, *output[1:]))
        raise TypeError(
            f"block {type(module).__name__} returned {type(output).__name__}; skipping supports blocks that "
            "return the hidden states as a tensor or as the first element of a tuple"
        )

    return hook


@contextlib.contextmanager
def skip_blocks(lm: LensModel, layers: Iterable[int]) -> Iterator[tuple[int, ...]]:
    """Make each listed block's output equal its input while the context is open.

    The whole residual write of a skipped block (attention and MLP) is removed: the
    residual stream after block ``i`` equals the one after block ``i - 1`` (or the
    embeddings for ``i = 0``).  Implementation: a forward hook registered with
    ``with_kwargs=True`` and ``prepend=True`` replaces the block's hidden-state output
    (a tensor, or the first element of a tuple on older conventions) by its input
    (the first argument of ``forward``, positional or keyword).  Why a hook that lets
    the block run rather than a wrapper that skips its computation:

    * KV caches: with a cache, every attention layer appends its keys/values, and the
      model reads cache lengths from particular layers (``get_seq_length`` of layer
      0 for positions; the first full and first sliding layer for mask sizes). A
      block that never runs leaves its cache layer empty and breaks decoding. Letting
      it run keeps every cache layer as long as in the intact model; its keys/values
      are read only by its own attention, whose output is discarded, so they cannot
      leak into the result.
    * Return conventions and attributes: the block object stays in place, so model
      loops that read ``decoder_layer.attention_type`` or index ``config.layer_types``
      work, and tensor vs tuple returns are mirrored from the real output.
    * Other hooks (e.g. the residual recorder of :mod:`entropy_lens.generation`) see
      the skipped output because this hook is prepended.

    The price is that a skipped block costs as much compute as an intact one; skipping
    is an intervention, not a speed-up.

    Args:
        lm: The model.
        layers: Block indices ``0..L-1`` to skip, each at most once; empty means none.

    Yields:
        The skipped indices, as a tuple of ints.

    Raises:
        TypeError: for a non-integer index.
        ValueError: for an index out of range or listed twice (the model is untouched).
    """
    indices = check_layers(layers, lm.n_layers)
    handles = []
    try:
        for index in indices:
            block = lm.blocks[index]
            hook = _skip_hook(_first_param(block))
            handles.append(block.register_forward_hook(hook, with_kwargs=True, prepend=True))
        if indices:
            logger.debug("skipping blocks %s of %s", indices, lm.name)
        yield tuple(indices)
    finally:
        for handle in handles:
            handle.remove()


# --------------------------------------------------------------------------- selection


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
    entropy = ds[schema.ENTROPY]
    if schema.N_LAYERS in ds.coords and ds[schema.N_LAYERS].ndim == 0:
        entropy = entropy.isel({schema.LAYER: slice(0, int(ds[schema.N_LAYERS]))})
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
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
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
    if isinstance(n_layers, bool) or not isinstance(n_layers, (int, np.integer)) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    if isinstance(n_sets, bool) or not isinstance(n_sets, (int, np.integer)) or n_sets < 1:
        raise ValueError(f"n_sets must be a positive integer, got {n_sets!r}")
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


# --------------------------------------------------------------------------- evaluation


def bootstrap_ci(
    correct: np.ndarray, n_boot: int, seed: int, level: float = DEFAULT_LEVEL
) -> tuple[float, float, float]:
    """Accuracy and its percentile-bootstrap interval.

    For 0/1 outcomes the bootstrap distribution of the mean is exactly
    ``Binomial(N, mean) / N``, so it is drawn directly instead of resampling indices
    (same distribution, O(n_boot) memory).

    Args:
        correct: ``[N]`` outcomes, bool or integers in {0, 1}.
        n_boot: Bootstrap replicates (>= 1).
        seed: Seed of :func:`numpy.random.default_rng`.
        level: Interval coverage in ``(0, 1)``.

    Returns:
        ``(mean, lo, hi)`` as floats in ``[0, 1]``.

    Raises:
        ValueError: for an empty array, values other than 0/1, or bad ``n_boot`` / ``level``.
    """
    values = np.asarray(correct).ravel()
    if values.size == 0:
        raise ValueError("correct is empty; need at least one outcome")
    if not np.isin(values, (0, 1)).all():
        raise ValueError("correct must hold only 0/1 (or bool); map unparsed answers (-1) to 0 or drop them first")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    mean = float(values.mean())
    draws = np.random.default_rng(seed).binomial(values.size, mean, size=int(n_boot)) / values.size
    tail = (1 - level) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return mean, float(lo), float(hi)


def answer_indices(answers: Sequence[int | str], n_choices: int) -> np.ndarray:
    """``[N]`` int64 choice indices from ints ``0..C-1`` or letters ``"A"..``.

    Raises:
        ValueError: for an answer outside the ``n_choices`` choices.
    """
    out = np.empty(len(answers), dtype=np.int64)
    for i, answer in enumerate(answers):
        if isinstance(answer, str) and len(answer.strip()) == 1:
            index = ord(answer.strip().upper()) - ord("A")
        elif isinstance(answer, (int, np.integer)) and not isinstance(answer, bool):
            index = int(answer)
        else:
            index = -1
        if not 0 <= index < n_choices:
            raise ValueError(
                f"answer {i} is {answer!r}; expected an index 0..{n_choices - 1} or a letter "
                f"A..{chr(ord('A') + n_choices - 1)}"
            )
        out[i] = index
    return out


def _check_scores(scores: np.ndarray, n_prompts: int, condition: str) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != n_prompts or values.shape[1] < 2:
        raise ValueError(
            f"scorer returned shape {values.shape} under condition {condition!r}; expected [{n_prompts}, C>=2]"
        )
    if np.isnan(values).any():
        raise ValueError(f"scorer returned NaN under condition {condition!r}")
    return values


def score_conditions(
    lm: LensModel,
    prompts: Sequence[str],
    answers: Sequence[int | str],
    conditions: Mapping[str, Sequence[int]],
    score: Scorer,
) -> tuple[dict[str, np.ndarray], int]:
    """Per-prompt correctness of the model under every skip condition.

    The same ``lm`` is used for every condition (it is never reloaded); each condition
    scores all prompts inside :func:`skip_blocks`.  All layer lists are validated
    before any scoring starts.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts, handed to ``score`` as a list.
        answers: ``N`` correct choices (index or letter).
        conditions: Name -> layers to skip (empty for the intact model).
        score: ``score(lm, prompts) -> [N, C]`` per-choice scores (e.g. letter
            log-likelihoods); the prediction is the argmax.

    Returns:
        ``({name: [N] bool correct}, C)``.

    Raises:
        ValueError: for no conditions, mismatched lengths, bad layers or bad scores.
    """
    if not conditions:
        raise ValueError("conditions is empty; pass at least one, e.g. {'intact': []}")
    if len(prompts) != len(answers) or not prompts:
        raise ValueError(f"need as many answers as prompts (> 0), got {len(prompts)} prompts, {len(answers)} answers")
    for name, layers in conditions.items():
        try:
            check_layers(layers, lm.n_layers)
        except (TypeError, ValueError) as err:
            raise type(err)(f"condition {name!r}: {err}") from err
    texts = list(prompts)
    correct: dict[str, np.ndarray] = {}
    n_choices = 0
    for name, layers in conditions.items():
        with skip_blocks(lm, layers):
            scores = _check_scores(score(lm, texts), len(texts), name)
        n_choices = scores.shape[1]
        correct[name] = scores.argmax(axis=1) == answer_indices(answers, n_choices)
        logger.info("condition %s (skip %s): accuracy %.3f", name, list(layers), correct[name].mean())
    return correct, n_choices


def accuracy_table(
    correct: Mapping[str, np.ndarray],
    conditions: Mapping[str, Sequence[int]],
    *,
    groups: Sequence[str] | None = None,
    n_choices: int,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """One row per (condition, group) with accuracy and its bootstrap interval.

    Args:
        correct: Name -> ``[N]`` bool correctness (as from :func:`score_conditions`).
        conditions: Name -> skipped layers (for the ``layers`` and ``k`` columns).
        groups: Optional ``[N]`` labels (e.g. prompt style); each group gets rows
            besides the overall group :data:`ALL_GROUP`.
        n_choices: Number of choices ``C`` (chance is ``1 / C``).
        n_boot, seed, level: See :func:`bootstrap_ci`.

    Returns:
        Columns ``condition, layers`` (comma-separated, ``""`` for none), ``k, group, n,
        accuracy, ci_low, ci_high, level, chance``.
    """
    rows = []
    for name, outcome in correct.items():
        labels = np.asarray(groups if groups is not None else [ALL_GROUP] * len(outcome), dtype=object)
        if labels.shape != outcome.shape:
            raise ValueError(f"groups has {labels.size} labels for {outcome.size} prompts; give one per prompt")
        layers = list(conditions[name])
        parts = [(ALL_GROUP, outcome)]
        if groups is not None:
            parts += [(str(g), outcome[labels == g]) for g in sorted(set(labels.tolist()), key=str)]
        for group, values in parts:
            mean, lo, hi = bootstrap_ci(values, n_boot, seed, level)
            rows.append(
                {
                    "condition": name,
                    "layers": ",".join(str(v) for v in layers),
                    "k": len(layers),
                    "group": group,
                    "n": int(values.size),
                    "accuracy": mean,
                    "ci_low": lo,
                    "ci_high": hi,
                    "level": float(level),
                    "chance": 1.0 / n_choices,
                }
            )
    return pd.DataFrame(rows)


def run_skip_conditions(
    lm: LensModel,
    prompts: Sequence[str],
    answers: Sequence[int | str],
    conditions: Mapping[str, Sequence[int]],
    score: Scorer,
    *,
    groups: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Accuracy of the model under each skip condition, with bootstrap intervals.

    Batching and tokenization reuse are the scorer's job; this loop only switches
    skips on and off around it, on one loaded model.

    Args:
        lm: The model.
        prompts: ``N`` prompt texts.
        answers: ``N`` correct choices (index ``0..C-1`` or letter).
        conditions: Name -> layers to skip, e.g. ``{"intact": [], "expansion_k1": [7]}``.
        score: ``score(lm, prompts) -> [N, C]`` per-choice scores; argmax is the answer.
        groups: Optional ``[N]`` labels (e.g. prompt style) for per-group rows.
        n_boot, seed, level: See :func:`bootstrap_ci`.

    Returns:
        The table of :func:`accuracy_table`.
    """
    if groups is not None and len(groups) != len(prompts):
        raise ValueError(f"groups has {len(groups)} labels for {len(prompts)} prompts; give one per prompt")
    correct, n_choices = score_conditions(lm, prompts, answers, conditions, score)
    return accuracy_table(
        correct, conditions, groups=groups, n_choices=n_choices, n_boot=n_boot, seed=seed, level=level
    )


INTACT = "intact"
RANDOM = "random"


def skip_conditions(delta_h: np.ndarray, ks: Sequence[int], n_random: int, seed: int) -> dict[str, list[int]]:
    """The experiment's conditions: intact, then per ``k`` expansion, pruning and random sets.

    Names are ``intact``, ``expansion_k{k}``, ``pruning_k{k}`` and ``random_k{k}_r{i}``;
    random set ``i`` for ``k`` is drawn with seed ``(seed, k)`` so adding a ``k`` leaves
    the others unchanged.

    Args:
        delta_h: ``[L]`` mean Delta H (layer 0 NaN, see :data:`FIRST_LAYER_RULE`).
        ks: Numbers of layers to skip.
        n_random: Random sets per ``k``.
        seed: Base seed of the random sets.
    """
    n_layers = len(delta_h)
    conditions: dict[str, list[int]] = {INTACT: []}
    for k in ks:
        conditions[f"{EXPANSION}_k{k}"] = select_layers(delta_h, k, EXPANSION)
        conditions[f"{PRUNING}_k{k}"] = select_layers(delta_h, k, PRUNING)
        sets = random_layer_sets(n_layers, k, n_random, int(np.random.SeedSequence([seed, k]).generate_state(1)[0]))
        conditions.update({f"{RANDOM}_k{k}_r{i}": layers for i, layers in enumerate(sets)})
    return conditions


def condition_kind(name: str) -> str:
    """``intact``, ``expansion``, ``pruning`` or ``random`` from a condition name."""
    kind = name.split("_", 1)[0]
    if kind not in (INTACT, EXPANSION, PRUNING, RANDOM):
        raise ValueError(f"condition {name!r} is not one of intact / expansion_k* / pruning_k* / random_k*_r*")
    return kind
