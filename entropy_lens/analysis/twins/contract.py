"""The twin table's columns and its paired resampling over sources: what every twin reading shares.

A twin reading is one row per claim's statistic: the trained model's value with its interval (``estimate``,
``ci_low``, ``ci_high``), the twin's (``null_estimate``, ``null_low``, ``null_high``) and trained - twin
(``beyond``, ``beyond_low``, ``beyond_high``), paired over the claim's unit: the same folds for separability,
the same sources (stories, topics, samples) drawn together for every other statistic. ``null_name`` names the
twin, so the verdict layer reads the table as a second null beside the row's own (docs/verdicts.md, "Beyond the
twin").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.features import plain
from entropy_lens.core.frames import NULL_CONTRACT, Reading
from entropy_lens.core.intervals import DEFAULT_LEVEL, cluster_sums, percentile_interval
from entropy_lens.store import schema

# What each row reads (the claim kinds with a twin reading).
SEPARABILITY, SPEARMAN, OVERLAP, SHAPE, FAMILY_PAIR = "separability", "spearman", "overlap", "shape", "family_pair"
READINGS = (SEPARABILITY, SPEARMAN, OVERLAP, SHAPE, FAMILY_PAIR)
COLUMNS = (
    "reading",
    "dataset",
    "target",
    "split",
    "model",
    "statistic",
    "scale",
    "unit",
    "n",
    "n_sources",
    "estimate",
    "ci_low",
    "ci_high",
    *NULL_CONTRACT,
    "note",
)
# The table as a standard frame (entropy_lens.core.frames): the trained model's statistic on the paired units.
TWIN_READING = Reading("estimate", n="n", sources="n_sources", split="dataset", measure="statistic")
# Prompt coordinates naming a prompt's source, first found wins (a blank sample is its own source).
SOURCE_COORDS = ("story_id", "question_id", "topic")
# Fewest finite bootstrap replicates that give an interval (else NaN: undecided), as the expansion nulls ask.
MIN_REPLICATES = 100


def twin_name(seed: int) -> str:
    """The ``null_name`` of every twin row: what the twin is."""
    return f"random-init twin (seed {seed}, same architecture)"


def null_columns(name: str, twin: tuple[float, float, float], beyond: tuple[float, float, float]) -> dict[str, Any]:
    """The :data:`~entropy_lens.core.frames.NULL_CONTRACT` columns of one row.

    Args:
        name: The twin's name (:func:`twin_name`).
        twin: The twin's statistic and its interval.
        beyond: Trained - twin and its paired interval.
    """
    return dict(zip(NULL_CONTRACT, (name, *map(float, twin), *map(float, beyond)), strict=True))


def empty_row(base: Mapping[str, Any], name: str, note: str) -> dict[str, Any]:
    """A row that could not be read: its labels, the twin's name and why."""
    return {**base, "null_name": name, "note": note}


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The twin table of ``rows``, in :data:`COLUMNS` order."""
    return pd.DataFrame(rows, columns=list(COLUMNS))


def prompt_sources(ds: xr.Dataset, prompts: np.ndarray) -> np.ndarray:
    """``[P]`` source of each of ``prompts``: the first of :data:`SOURCE_COORDS` on ``prompt``, else the prompt id."""
    for name in SOURCE_COORDS:
        if name in ds.coords and ds[name].dims == (schema.PROMPT,):
            return plain(ds[name].sel({schema.PROMPT: list(prompts)}).values).astype(str)
    return np.asarray(prompts).astype(str)


def shared_prompts(trained: xr.Dataset, twin: xr.Dataset) -> np.ndarray:
    """``[P]`` the prompt ids both stores hold, in the trained store's order.

    Raises:
        ValueError: when they share none (the twin was profiled on another prompt set).
    """
    ids = [str(p) for p in trained.indexes[schema.PROMPT]]
    held = {str(p) for p in twin.indexes[schema.PROMPT]}
    shared = np.asarray([p for p in ids if p in held], dtype=object)
    if shared.size == 0:
        raise ValueError("the twin's store shares no prompt with the trained store; profile it on the same prompt set")
    return shared


def paired_source_draws(weights: np.ndarray, sources: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray | None:
    """Bootstrap replicates of per-prompt sums, whole sources drawn with replacement, one draw for every row.

    Args:
        weights: ``[J, P]`` per-prompt values to sum (the trained model's and the twin's side by side, so both
            sides of a replicate read the same sources).
        sources: ``[P]`` source of each prompt.
        n_boot: Replicates.
        seed: Seed of the draws.

    Returns:
        ``[J, n_boot]`` sums, or ``None`` with fewer than two sources.
    """
    return cluster_sums(list(np.asarray(weights, dtype=np.float64)), sources, n_boot=n_boot, seed=seed)


def paired_interval(
    trained: np.ndarray, twin: np.ndarray, level: float = DEFAULT_LEVEL
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Percentile intervals of the trained replicates, the twin's and their paired difference.

    Args:
        trained: ``[B]`` replicates of the trained model's statistic.
        twin: ``[B]`` replicates of the twin's, on the same draws.
        level: Coverage.

    Returns:
        ``(trained, twin, difference)`` intervals; NaN for one with fewer than :data:`MIN_REPLICATES` finite
        replicates.
    """
    trained, twin = np.asarray(trained, dtype=np.float64), np.asarray(twin, dtype=np.float64)
    return tuple(_interval(x, level) for x in (trained, twin, trained - twin))  # type: ignore[return-value]


def _interval(draws: np.ndarray, level: float) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if finite.size < MIN_REPLICATES:
        return float("nan"), float("nan")
    low, high = percentile_interval(finite, level)
    return float(low), float(high)


def paired_source_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    trained: np.ndarray,
    twin: np.ndarray,
    *,
    n_boot: int,
    seed: int,
    level: float = DEFAULT_LEVEL,
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Paired bootstrap over sources of a statistic of per-source rows, trained and twin drawn together.

    Args:
        statistic: ``[B, S]``-weighted means ``[B, K]`` -> ``[B]`` (e.g. a shape statistic of mean profiles).
        trained: ``[S, K]`` one row per source (its mean profile), the trained model's.
        twin: ``[S, K]`` the twin's rows of the same sources, in the same order.
        n_boot: Replicates.
        seed: Seed of the draws.
        level: Coverage.

    Returns:
        The intervals of :func:`paired_interval`.
    """
    if trained.shape[0] != twin.shape[0]:
        raise ValueError(f"trained and twin rows must pair source by source, got {trained.shape} and {twin.shape}")
    n = trained.shape[0]
    if n < 2:
        nan = (float("nan"), float("nan"))
        return nan, nan, nan
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)  # [B, S]
    return paired_interval(statistic(counts @ trained / n), statistic(counts @ twin / n), level)
