"""The standard frame: what every analysis hands to the paper table.

One row per thing measured, with the same columns whatever the analysis:

* ``model``, ``split``, ``measure``: what was measured, on which slice, with which statistic;
* ``estimate``, ``ci_low``, ``ci_high``: the number and its 95% interval (NaN where the analysis
  has no single number, e.g. the three statistics of a profile's shape);
* ``n``: the observations behind it; ``n_sources``: the unit its interval resamples (prompts,
  stories, questions, source groups).

An analysis keeps writing its own table (its column names are its data contract on disk) and
declares, beside the function that computes it, a :class:`Reading`: the name each standard column
has in that table.  :meth:`Reading.frame` adds the standard columns next to the table's own, which
stay for the verdict rule and the row's note.  The paper table reads only standard frames
(``entropy_lens.verdicts.rows.rows_of``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MODEL, SPLIT, MEASURE = "model", "split", "measure"
ESTIMATE, LOW, HIGH = "estimate", "ci_low", "ci_high"
N, SOURCES = "n", "n_sources"
STANDARD_COLUMNS = (MODEL, SPLIT, MEASURE, ESTIMATE, LOW, HIGH, N, SOURCES)
# The columns an analysis table carries for its null (docs/verdicts.md, "Beyond its null"): its name, the
# statistic under it with its interval, and observed - null with a paired interval.
NULL_CONTRACT = ("null_name", "null_estimate", "null_low", "null_high", "beyond", "beyond_low", "beyond_high")
TEXT_COLUMNS = (MODEL, SPLIT, MEASURE)


@dataclass(frozen=True)
class Reading:
    """How one analysis's table reads as a standard frame.

    Attributes:
        estimate: Column of the estimate; ``None`` where the analysis has no single number.
        low, high: Columns of its interval.
        n: Column counting the observations.
        sources: Column counting the unit the interval resamples.
        split: Column naming the slice (``None``, or a column the table lacks: the slice is in
            ``fixed`` or empty; a per-dataset table gets its ``dataset`` column where several are stacked).
        measure: Column naming the statistic (as ``split``).
        fixed: Standard column -> one value for every row (``{"measure": "shannon"}``).
        model: Column naming the model (``None``: the rows are about something else, e.g. a pair of
            models, and the row builder names it).
    """

    estimate: str | None
    low: str = LOW
    high: str = HIGH
    n: str = N
    sources: str = N
    split: str | None = None
    measure: str | None = MEASURE
    fixed: Mapping[str, str] = field(default_factory=dict)
    model: str | None = MODEL

    def columns(self) -> dict[str, str | None]:
        """Standard column -> the table's column it is read from (``None``: fixed or empty)."""
        numbers = {ESTIMATE: self.estimate, LOW: self.low, HIGH: self.high} if self.estimate else {}
        return {
            MODEL: self.model,
            SPLIT: self.split,
            MEASURE: self.measure,
            **numbers,
            N: self.n,
            SOURCES: self.sources,
        }

    def frame(self, table: pd.DataFrame, name: str = "table") -> pd.DataFrame:
        """``table`` with the standard columns added (its own columns kept, in their order).

        Raises:
            ValueError: naming ``name`` and the columns it lacks.
        """
        wanted = {k: v for k, v in self.columns().items() if v is not None and k not in self.fixed}
        missing = sorted({v for k, v in wanted.items() if v not in table.columns and k not in (SPLIT, MEASURE)})
        if missing and not table.empty:
            raise ValueError(f"{name} lacks the column(s) {missing} its reading needs; it has {list(table.columns)}")
        standard = {k: (table[v] if v in table.columns else np.nan) for k, v in wanted.items()}
        standard.update({k: self.fixed[k] for k in self.fixed})
        for column in STANDARD_COLUMNS:
            standard.setdefault(column, "" if column in TEXT_COLUMNS else np.nan)
        return table.assign(**{c: _text(v) if c in TEXT_COLUMNS else v for c, v in standard.items()})


def _text(value: pd.Series | str | float) -> pd.Series | str:
    """A text column with missing values as ``""``."""
    if isinstance(value, pd.Series):
        return value.where(value.notna(), "").astype(str)
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
