"""Multi-block drop sets: the ``k`` blocks each criterion ranks least critical, and Gromov et al.'s contiguous choice.

Pure NumPy/pandas over a :func:`~entropy_lens.skipping.criteria.criteria_table` (one model) and its
:class:`~entropy_lens.skipping.readings.BlockReadings`.  ``k`` is a share of the model's blocks
(:data:`DEFAULT_SHARES`: about 12% and 25%, 3 and 7 of 28), rounded, at least 1.  The sets are what a
researcher pruning by each criterion would drop.  :func:`drop_conditions` turns them into skip conditions
the evaluation job scores on the shared intact prefix beside one random ``k``-set drawn per question
(:func:`entropy_lens.skipping.evaluation.evaluate_drop_sets`); :mod:`entropy_lens.skipping.drop_scores`
reads the scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from entropy_lens.skipping.conditions import DROP, Condition, eligible_layers
from entropy_lens.skipping.criteria import ALL_CRITERIA, gromov_choice, present
from entropy_lens.skipping.readings import BlockReadings

DEFAULT_SHARES = (0.12, 0.25)
GROMOV = "gromov_contiguous"
DROP_COLUMNS = ("model", "variant", "share", "k", "criterion", "layers")


def drop_k(n_layers: int, share: float) -> int:
    """Blocks to drop for a ``share`` of ``n_layers`` (rounded, at least 1).

    Raises:
        ValueError: for a share outside ``(0, 1)``.
    """
    if not 0 < share < 1:
        raise ValueError(f"share must lie in (0, 1), got {share!r}; e.g. 0.25 drops a quarter of the blocks")
    return max(1, round(share * n_layers))


def least_critical(criteria: pd.DataFrame, criterion: str, k: int, pool: Sequence[int]) -> tuple[int, ...]:
    """The ``k`` blocks of ``pool`` that ``criterion`` scores lowest (least critical; ties to the deeper block).

    Raises:
        ValueError: for an unknown criterion or ``k`` beyond the pool.
    """
    if criterion not in ALL_CRITERIA:
        raise ValueError(f"criterion must be one of {ALL_CRITERIA}, got {criterion!r}")
    blocks = [int(b) for b in pool]
    if not 1 <= k <= len(blocks):
        raise ValueError(f"k={k} must lie in 1..{len(blocks)} (the eligible blocks); lower the share")
    scores = criteria.set_index("layer").loc[blocks, criterion]
    order = sorted(blocks, key=lambda b: (scores[b], -b))
    return tuple(sorted(order[:k]))


def drop_sets(
    criteria: pd.DataFrame,
    readings: BlockReadings,
    model: str,
    variants: Sequence[str],
    shares: Sequence[float] = DEFAULT_SHARES,
) -> pd.DataFrame:
    """Per variant, share and criterion, the blocks to drop (:data:`DROP_COLUMNS`; ``layers`` as ``"3,4,5"``).

    Each criterion drops its ``k`` least critical eligible blocks; ``gromov_contiguous`` the ``k``
    consecutive eligible blocks whose input and output lie closest in angle at the last token.
    """
    rows = []
    for variant in variants:
        pool = [int(b) for b in eligible_layers(readings.n_layers, variant)]
        done: set[int] = set()
        for share in shares:
            k = drop_k(readings.n_layers, share)
            if k > len(pool) or k in done:  # a shallow model rounds two shares to one k: list it once
                continue
            done.add(k)
            chosen = {c: least_critical(criteria, c, k, pool) for c in present(criteria, pool)}
            chosen[GROMOV] = gromov_choice(readings, k, pool)
            rows += [
                {"model": model, "variant": variant, "share": share, "k": k, "criterion": c, "layers": _text(b)}
                for c, b in chosen.items()
            ]
    return pd.DataFrame(rows, columns=list(DROP_COLUMNS))


def _text(blocks: Sequence[int]) -> str:
    return ",".join(str(int(b)) for b in sorted(blocks))


def drop_conditions(drops: pd.DataFrame) -> list[Condition]:
    """The skip conditions that score a :func:`drop_sets` table: each distinct chosen set once (kind ``drop``).

    The scores are found again by their blocks, never by a condition's name.
    """
    conditions: list[Condition] = []
    for k in sorted({int(v) for v in drops["k"]}):
        chosen = dict.fromkeys(str(t) for t in drops.loc[drops["k"] == k, "layers"])
        conditions += [Condition(DROP, k, _blocks(t), i) for i, t in enumerate(chosen)]
    return conditions


def _blocks(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in str(text).split(",") if v != "")
