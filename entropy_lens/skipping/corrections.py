"""What a skip comparison is judged against: its claim's other comparisons (Holm) and the random blocks (its null).

One claim of the layer-skip experiment (expansion vs random, pruning vs random, expansion vs
pruning) has a comparison row per ``k``, variant, lens, letter measure and statistic.  Read one by one
at 95%, some row decides an outcome by chance alone; so the rows of one claim and one statistic on one
model (:data:`FAMILY`: the headline reads one statistic per claim, so its rows are one family; the other
statistic's rows, shown beside, are corrected among themselves) are corrected together by Holm's
step-down procedure (:mod:`entropy_lens.core.multiplicity`), each row's p-value taken from its own paired
bootstrap.  The raw 95% interval stays beside the corrected one.

The null of a comparison against random blocks is the random blocks themselves: what skipping
them costs (:func:`random_null`), computed in the same run on the same questions, and the first
skip's cost beyond it (``beyond``, with the Holm-level interval, so that "beyond its null" is
family-wise as well).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.core.intervals import paired_bootstrap
from entropy_lens.core.multiplicity import FAMILY_ALPHA, holm, holm_levels, normal_interval
from entropy_lens.skipping.conditions import RANDOM

# The family a comparison's p-value is corrected within (Holm): one claim (first vs second) of one model.
FAMILY = ("model", "first", "second", "statistic")
RANDOM_NULL = "random blocks (one random set of k eligible blocks drawn per question, paired)"
HOLM_COLUMNS = ("n_family", "p_holm", "holm_level", "holm_low", "holm_high", "beyond", "beyond_low", "beyond_high")


def with_holm(table: pd.DataFrame, *, alpha: float = FAMILY_ALPHA) -> pd.DataFrame:
    """``table`` with each claim's comparisons corrected together (Holm within :data:`FAMILY`).

    Args:
        table: Comparison rows with ``model, first, second, difference`` (first minus second), ``se``
            (the bootstrap's standard error), ``df`` (its degrees of freedom) and ``p_value`` (NaN: no test).
        alpha: Family-wise error rate.

    Returns:
        A copy with :data:`HOLM_COLUMNS`: ``n_family`` (rows with a p-value in the family), ``p_holm``,
        ``holm_level`` and the normal interval at that level (``holm_low``, ``holm_high``; it excludes
        0 exactly where Holm rejects); for comparisons against random blocks ``beyond`` = the first
        skip's cost beyond the random blocks' (``-difference``) with the Holm-level interval.
    """
    out = table.copy()
    for column in HOLM_COLUMNS:
        out[column] = np.nan
    for _, family in out.groupby(list(FAMILY), sort=False):
        p = family["p_value"].to_numpy(float)
        levels = holm_levels(p, alpha)
        bounds = [
            normal_interval(float(d), float(se), float(lv), float(df))
            for d, se, lv, df in zip(family["difference"], family["se"], levels, family["df"], strict=True)
        ]
        out.loc[family.index, "n_family"] = int(np.isfinite(p).sum())
        out.loc[family.index, "p_holm"] = holm(p)
        out.loc[family.index, "holm_level"] = levels
        out.loc[family.index, "holm_low"] = [b[0] for b in bounds]
        out.loc[family.index, "holm_high"] = [b[1] for b in bounds]
    against_random = out["second"] == RANDOM
    out.loc[against_random, "beyond"] = -out.loc[against_random, "difference"]
    out.loc[against_random, "beyond_low"] = -out.loc[against_random, "holm_high"]
    out.loc[against_random, "beyond_high"] = -out.loc[against_random, "holm_low"]
    return out


def random_null(intact: np.ndarray, b: np.ndarray, boot: dict, level: float) -> dict[str, float | str]:
    """What skipping the random blocks costs: the intact score minus the random draw's, paired per question.

    Args:
        intact: ``[N]`` per-question scores of the intact model.
        b: ``[N]`` per-question scores under the random set drawn for each question.
        boot: ``n_boot`` and ``seed`` of the bootstrap.
        level: Coverage.

    Returns:
        ``null_name, null_estimate, null_low, null_high`` (the statistic's unit: accuracy 0-1 or nats).
    """
    drop = paired_bootstrap(intact, b, **boot, level=level)
    return {"null_name": RANDOM_NULL, "null_estimate": drop[0], "null_low": drop[1], "null_high": drop[2]}
