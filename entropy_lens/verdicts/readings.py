"""A row's readings beyond its stated statistic: each a named group of columns, filled by one function.

A row of the paper table states the study's statistic against the study's bar (its as-stated word). Beside it
stand up to three readings, each the same statistic against a null computed in the same run and read by the
table's one decision (:func:`entropy_lens.verdicts.decision.beyond_null`) in the same words (docs/verdicts.md,
"The words"):

* **beyond chance** (:data:`CHANCE`, the column "beyond its null"): the dummy, the cross-prompt partner, chance,
  no structure, random blocks;
* **beyond the simplest feature** (:data:`FEATURE`): the feature that already separates (the first token, the
  prompt text, the top-letter probability, token 0's final-layer entropy), on identical folds;
* **beyond the twin** (:data:`TWIN`): the same architecture with its weights re-initialised.

Each reading is a :class:`ReadingColumns`: the null's name, the statistic it is subtracted from, the null's value
with its interval, the excess with its interval, the word and why, and whether the null alone reaches the study's
bar.  :func:`reading_values` fills one reading's columns from a :class:`~entropy_lens.verdicts.decision.Null` (or
a :class:`NotRead`); the claim's word, the renderer and the nulls table loop over :data:`READINGS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from entropy_lens.verdicts import decision

# A reading the row's design does not read (a model answering MMLU at chance has no baseline reading).
NOT_READ = "not read"


@dataclass(frozen=True)
class ReadingColumns:
    """The columns of one reading of a row.

    Attributes:
        key: The keyword a row gets its :class:`~entropy_lens.verdicts.decision.Null` under, and the reading's name
            in the nulls table (``chance``, ``feature``, ``twin``).
        title: How a reader names it (``beyond its null``, ``beyond the simplest feature``).
        claim_word: The column of the claim's word for it (:func:`entropy_lens.verdicts.claim_verdicts.claim_verdicts`).
        name, observed, estimate, low, high, beyond, beyond_low, beyond_high, word, why, at_bar: Its columns: the
            null's name, the statistic the null is subtracted from, the null's value and interval, the excess and
            its interval, the word (:data:`~entropy_lens.verdicts.decision.BEYOND_WORDS` or :data:`NOT_READ`) and
            why, and whether the null alone reaches the study's bar (1.0 / 0.0; NaN where the rule has no bar).
    """

    key: str
    title: str
    claim_word: str
    name: str
    observed: str
    estimate: str
    low: str
    high: str
    beyond: str
    beyond_low: str
    beyond_high: str
    word: str
    why: str
    at_bar: str

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column of the reading, in table order."""
        return (
            self.name,
            self.observed,
            self.estimate,
            self.low,
            self.high,
            self.beyond,
            self.beyond_low,
            self.beyond_high,
            self.word,
            self.why,
            self.at_bar,
        )

    @property
    def numbers(self) -> tuple[str, ...]:
        """Its numeric columns."""
        return (self.observed, self.estimate, self.low, self.high, self.beyond, self.beyond_low, self.beyond_high)


def prefixed(key: str, title: str) -> ReadingColumns:
    """A reading whose every column starts with ``key``: ``feature``, ``feature_estimate``, ... ``feature_verdict``."""
    names = ("observed", "estimate", "low", "high", "beyond", "beyond_low", "beyond_high", "verdict", "why", "at_bar")
    return ReadingColumns(key, title, f"beyond_{key}", key, *(f"{key}_{n}" for n in names))


# Beyond chance keeps the column names of the null every row had before the other readings (null_*, beyond*).
CHANCE = ReadingColumns(
    "chance",
    "beyond its null",
    "beyond_null",
    "null",
    "null_observed",
    "null_estimate",
    "null_low",
    "null_high",
    "beyond",
    "beyond_low",
    "beyond_high",
    "beyond_verdict",
    "beyond_why",
    "null_at_bar",
)
FEATURE = prefixed("feature", "beyond the simplest feature")
TWIN = prefixed("twin", "beyond the twin")
READINGS = (CHANCE, FEATURE, TWIN)
BY_KEY: Mapping[str, ReadingColumns] = {r.key: r for r in READINGS}
COLUMNS = tuple(c for r in READINGS for c in r.columns)
NUMBER_COLUMNS = frozenset({c for r in READINGS for c in r.numbers} | {r.at_bar for r in READINGS})


@dataclass(frozen=True)
class NotRead:
    """A reading the row's design does not read, and why (``"the model answers at chance"``)."""

    reason: str


def reading_values(
    reading: ReadingColumns, null: decision.Null | NotRead, *, n: int, estimate: float, scale: float, digits: int
) -> dict[str, Any]:
    """The columns of ``reading`` for one row.

    Args:
        reading: Which reading.
        null: Its null (the word then comes from :func:`~entropy_lens.verdicts.decision.beyond_null`), or why the row
            does not read it.
        n: Units behind the paired interval.
        estimate: The row's own estimate, the observed statistic where the null names none.
        scale, digits: How the numbers are shown in the ``why`` (100 and 1 for AUC points).
    """
    if isinstance(null, NotRead):
        return {reading.word: NOT_READ, reading.why: f"{NOT_READ}: {null.reason}"}
    beyond = decision.beyond_null(null, n=n, unit="units", scale=scale, digits=digits)
    observed = null.observed if math.isfinite(null.observed) else estimate
    values = (null.value.estimate, null.value.low, null.value.high)
    excess = (null.beyond.estimate, null.beyond.low, null.beyond.high)
    return {
        reading.name: null.name,
        reading.observed: observed,
        **dict(zip((reading.estimate, reading.low, reading.high), values, strict=True)),
        **dict(zip((reading.beyond, reading.beyond_low, reading.beyond_high), excess, strict=True)),
        reading.word: beyond.word,
        reading.why: beyond.why,
        reading.at_bar: math.nan if null.bar is None else float(null.reaches_bar()),
    }
