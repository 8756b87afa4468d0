"""One verdict per claim: the headline counts claims, not rows.

A claim has many rows (a row per model, split, variant); a reader asks whether the claim held. The rule,
written in ``docs/verdicts.md`` before any run read it, is the same for every claim and role:

* **as stated**, over the claim's rows that were run (the headline's rows: one measure per claim):
  ``reproduced`` when at least one row reproduces and none is decided against it; ``not reproduced`` when
  at least one row is decided against and none reproduces; ``mixed`` when both occur; ``inconclusive``
  when no row is decided (``cannot be read`` when no row could be read at all); ``not run`` when no row was
  run. Preconditions and extensions read the same
  rule in their own words (met / not met, holds / does not hold; a skip outcome when every decided row
  found the same one).
* **beyond its null**, over the rows that carry a null: ``shown`` when at least one row shows it and
  none is decided against; ``not shown`` when at least one is decided against and none shows it;
  ``mixed``; ``undecided``; ``no null`` where no row carries one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PRECONDITION
from entropy_lens.verdicts.decision import NOT_RUN
from entropy_lens.verdicts.outcomes import CANNOT_BE_READ, UNDECIDED

MIXED = "mixed"
NO_NULL = "no null"
# Per role: (the positive word, the negative word, the undecided word) of its rows.
ROLE_WORDS = {
    FINDING: (D.REPRODUCED, D.NOT_REPRODUCED, D.INCONCLUSIVE),
    PRECONDITION: tuple(D.PRECONDITION_WORDS[v] for v in D.VERDICTS),
    EXTENSION: tuple(D.EXTENSION_WORDS[v] for v in D.VERDICTS),
}
BEYOND = (D.SHOWN, D.NOT_SHOWN, D.UNDECIDED_BEYOND)
CLAIM_COLUMNS = ("claim", "role", "verdict", "beyond_null", "rows", "models", "why", "beyond_why")


def combine(words: Sequence[str], positive: str, negative: str, undecided: str) -> str:
    """The claim's word from its rows' words (see the module docstring)."""
    pos, neg = positive in words, negative in words
    if pos and neg:
        return MIXED
    if pos or neg:
        return positive if pos else negative
    others = {w for w in words if w not in (undecided, UNDECIDED, "", CANNOT_BE_READ)}
    if len(others) == 1:  # a skip outcome every decided row found
        return others.pop()
    if others:
        return MIXED
    return CANNOT_BE_READ if words and set(words) == {CANNOT_BE_READ} else undecided


def claim_verdicts(headline: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and role of the headline, in its order, with :data:`CLAIM_COLUMNS`."""
    out = []
    for (claim, role), rows in headline.groupby(["claim", "role"], sort=False):
        not_run = rows["why"].astype(str).str.startswith(NOT_RUN)
        run = rows[~not_run]
        positive, negative, undecided = ROLE_WORDS[str(role)]
        verdict = NOT_RUN if run.empty else combine(list(run["verdict"].astype(str)), positive, negative, undecided)
        beyond = _beyond(run)
        out.append(
            {
                "claim": claim,
                "role": role,
                "verdict": verdict,
                "beyond_null": beyond,
                "rows": _tally(rows, not_run),
                "models": ", ".join(dict.fromkeys(run["model"].astype(str))) if not run.empty else "",
                "why": _first(rows.loc[not_run, "why"]) if run.empty else "",
                "beyond_why": _beyond_why(run),
            }
        )
    return pd.DataFrame(out, columns=list(CLAIM_COLUMNS))


def _beyond(run: pd.DataFrame) -> str:
    if "beyond_verdict" not in run.columns:
        return NO_NULL
    words = [w for w in run["beyond_verdict"].astype(str) if w]
    return combine(words, *BEYOND) if words else NO_NULL


def _tally(rows: pd.DataFrame, not_run: pd.Series) -> str:
    """``reproduced ×3, inconclusive ×1`` over the claim's rows (not-run rows counted as such)."""
    said = rows["verdict"].astype(str).where(~not_run, NOT_RUN)
    return ", ".join(f"{word} ×{n}" for word, n in said.value_counts(sort=False).items())


def _first(values: pd.Series) -> str:
    return str(values.iloc[0]) if len(values) else ""


def _beyond_why(run: pd.DataFrame) -> str:
    """The reason of the first row whose null decides the claim's beyond-null word (else the first's)."""
    if "beyond_why" not in run.columns:
        return ""
    decided = run[run["beyond_verdict"].astype(str).isin([D.SHOWN, D.NOT_SHOWN])]
    source = decided if not decided.empty else run
    whys = [w for w in source["beyond_why"].astype(str) if w]
    return whys[0] if whys else ""


def counts(claims: pd.DataFrame, role: str) -> dict[str, int]:
    """How many claims of ``role`` got each word, in first-seen order."""
    return {str(w): int(n) for w, n in claims.loc[claims["role"] == role, "verdict"].value_counts(sort=False).items()}
