"""One verdict per claim: the headline counts claims, not rows.

A claim has many rows (a row per model, split, variant); a reader asks whether the claim held. Each claim's record
names how its headline rows combine (:attr:`entropy_lens.verdicts.claim.Claim.aggregation`, fixed with the claim
in ``docs/verdicts.md`` before any run read it):

* **every** (a claim about every model in its scope): the positive word when every run row has it; the negative
  word when a row is decided against and none holds; ``mixed`` when rows are decided both ways; ``mechanical``
  when every row holds or is mechanical and one is mechanical; else the undecided word (one reproducing row no
  longer carries a claim whose other rows are undecided). Preconditions and extensions read the same rule in their
  own words (met / not met, holds / does not hold); rows that found a skip outcome give it when every row found
  the same one.
* **pooled** (a claim about one pooled quantity): the pooled row (model ``all``) decides.

Rows that were not run, and rows whose design cannot test the claim (``cannot test``; ``cannot be read``, an
extension whose lens reads no block under its bar), are counted apart: a claim with no run row takes the word of its
rows that could not test it where there are such rows, else ``not run``.

Each reading (:data:`entropy_lens.verdicts.readings.READINGS`: beyond chance, beyond the simplest feature, beyond
the twin) combines the same way: **every** gives the weakest row's word in the order not shown < undecided <
shown, negligible < shown, and ``mixed`` where rows are decided both ways; ``not read`` where every row carrying it
was not read; ``no null`` where no row carries it. The overlap claim's original rule (Jaccard > 0.5) combines as
the as-stated word does.

**Beyond both its null and its twin** (docs/verdicts.md, "Beyond the twin"): for a claim read on the twin, the
claim's "beyond its null" word is the weaker of its beyond-chance and beyond-the-twin words (not shown < mixed <
undecided < shown, negligible < shown; where the twin's is weaker, the why says so and keeps beyond chance alone);
the claim's beyond-the-twin word stands beside it, and each row keeps its own chance and twin words.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from entropy_lens.verdicts import decision, registry
from entropy_lens.verdicts.claim import EVERY, EXTENSION, FINDING, POOLED, PRECONDITION
from entropy_lens.verdicts.decision import CANNOT_TEST, MECHANICAL, NOT_RUN
from entropy_lens.verdicts.outcomes import CANNOT_BE_READ, UNDECIDED
from entropy_lens.verdicts.readings import CHANCE, NOT_READ, READINGS, TWIN, ReadingColumns

MIXED = "mixed"
NO_NULL = "no null"
# Per role: (the positive word, the negative word, the undecided word) of its rows.
ROLE_WORDS = {
    FINDING: (decision.REPRODUCED, decision.NOT_REPRODUCED, decision.INCONCLUSIVE),
    PRECONDITION: tuple(decision.PRECONDITION_WORDS[v] for v in decision.VERDICTS),
    EXTENSION: tuple(decision.EXTENSION_WORDS[v] for v in decision.VERDICTS),
}
# A reading's words from weakest to strongest: an `every` claim reads its weakest row.
BEYOND_ORDER = (decision.NOT_SHOWN, decision.UNDECIDED_BEYOND, decision.SHOWN_NEGLIGIBLE, decision.SHOWN)
BEYOND = (decision.SHOWN, decision.SHOWN_NEGLIGIBLE, decision.NOT_SHOWN, decision.UNDECIDED_BEYOND)
# The words of rows whose design cannot test their claim, whatever the numbers: counted apart, as not-run rows are.
CANNOT = (CANNOT_TEST, CANNOT_BE_READ)
# A claim's words from weakest to strongest where two readings combine (beyond its null and beyond its twin): mixed
# rows include one decided against, so mixed sits below undecided.
CLAIM_BEYOND_ORDER = (decision.NOT_SHOWN, MIXED, *BEYOND_ORDER[1:])
# The model of a row pooled over models: the row a `pooled` claim reads.
POOLED_ROW_MODEL = "all"
CLAIM_COLUMNS = (
    "claim",
    "role",
    "aggregation",
    "verdict",
    *(r.claim_word for r in READINGS),
    "original",
    "original_rule",
    "chosen_after",
    "rows",
    "models",
    "why",
    *(r.why for r in READINGS),
)


def combine(words: Sequence[str], positive: str, negative: str, undecided: str) -> str:
    """The claim's word from the words of the rows that decide it (see the module docstring, **every**); rows that
    cannot test it are left out, and give their word when no other row is left."""
    readable = [w for w in words if w not in CANNOT]
    if words and not readable:
        return words[0]
    words = readable
    pos, neg = positive in words, negative in words
    if pos and neg:
        return MIXED
    if neg:
        return negative
    outcomes = {w for w in words if w not in (positive, undecided, UNDECIDED, "", MECHANICAL)}
    if len(outcomes) > 1 or (outcomes and pos):
        return MIXED
    if outcomes:  # a skip outcome: every row must have found it
        return outcomes.pop() if all(w in outcomes for w in words) else undecided
    if words and all(w == positive for w in words):
        return positive
    if MECHANICAL in words and all(w in (positive, MECHANICAL) for w in words):
        return MECHANICAL
    return undecided


def combine_beyond(words: Sequence[str]) -> str:
    """A reading's claim word from its rows' words (see the module docstring)."""
    said = [w for w in words if w in BEYOND_ORDER]
    if not said:
        return NOT_READ if NOT_READ in words else NO_NULL
    shown = decision.SHOWN in said or decision.SHOWN_NEGLIGIBLE in said
    if shown and decision.NOT_SHOWN in said:
        return MIXED
    return min(said, key=BEYOND_ORDER.index)


def claim_verdicts(headline: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and role of the headline, in its order, with :data:`CLAIM_COLUMNS`."""
    out = []
    for (claim, role), rows in headline.groupby(["claim", "role"], sort=False):
        why = rows["why"].astype(str)
        not_run, cannot = why.str.startswith(NOT_RUN), rows["verdict"].astype(str).isin(CANNOT)
        run = rows[~not_run & ~cannot]
        aggregation = _aggregation(rows)
        deciding = _pooled(run) if aggregation == POOLED else run
        positive, negative, undecided = ROLE_WORDS[str(role)]
        if not run.empty:
            verdict = combine(list(deciding["verdict"].astype(str)), positive, negative, undecided)
        else:
            verdict = _first(rows.loc[cannot, "verdict"].astype(str)) if cannot.any() else NOT_RUN
        absent = rows[cannot] if cannot.any() else rows[not_run]
        out.append(
            {
                "claim": claim,
                "role": role,
                "aggregation": aggregation,
                "verdict": verdict,
                **_readings(deciding),
                **_original(deciding, positive, negative, undecided),
                "rows": _tally(rows, not_run),
                "models": ", ".join(dict.fromkeys(run["model"].astype(str))) if not run.empty else "",
                "why": _first(absent["why"]) if run.empty else "",
            }
        )
    return pd.DataFrame(out, columns=list(CLAIM_COLUMNS))


def _aggregation(rows: pd.DataFrame) -> str:
    """The claim's aggregation from its record (``every`` for rows of no registered claim)."""
    ids = rows["claim_id"].astype(str) if "claim_id" in rows.columns else pd.Series(dtype=str)
    known = [i for i in dict.fromkeys(ids) if i in registry.BY_ID]
    return registry.BY_ID[known[0]].aggregation if known else EVERY


def _pooled(run: pd.DataFrame) -> pd.DataFrame:
    """The rows a pooled claim reads: its pooled row (model ``all``), or its only row."""
    pooled = run[run["model"].astype(str) == POOLED_ROW_MODEL]
    return pooled if not pooled.empty else run


def _readings(rows: pd.DataFrame) -> dict[str, str]:
    """Each reading's claim word and the why of the row that decides it."""
    out: dict[str, str] = {}
    for reading in READINGS:
        words = list(rows[reading.word].astype(str)) if reading.word in rows.columns else []
        word = combine_beyond(words)
        out[reading.claim_word], out[reading.why] = word, _deciding_why(rows, reading, word)
    return beyond_both(out)


def beyond_both(words: dict[str, str]) -> dict[str, str]:
    """A claim's reading words with "beyond its null" the weaker of its chance word and its twin word, where both
    are decided words (:data:`CLAIM_BEYOND_ORDER`). Where the twin's is the weaker, the why says so and keeps the
    chance word alone. Unchanged where the claim has no twin reading, or no chance word to weaken (not read, no
    null)."""
    chance, twin = words[CHANCE.claim_word], words[TWIN.claim_word]
    if chance not in CLAIM_BEYOND_ORDER or twin not in CLAIM_BEYOND_ORDER:
        return words
    if CLAIM_BEYOND_ORDER.index(twin) >= CLAIM_BEYOND_ORDER.index(chance):
        return words
    why = f"beyond the twin: {twin} ({words[TWIN.why]}); beyond chance alone: {chance} ({words[CHANCE.why]})"
    return {**words, CHANCE.claim_word: twin, CHANCE.why: why}


def _deciding_why(rows: pd.DataFrame, reading: ReadingColumns, word: str) -> str:
    """The reason of the first row whose word is the claim's (else the first decided row's, else the first's)."""
    if reading.why not in rows.columns:
        return ""
    words = rows[reading.word].astype(str)
    for source in (rows[words == word], rows[words.isin([decision.SHOWN, decision.NOT_SHOWN])], rows):
        whys = [w for w in source[reading.why].astype(str) if w]
        if whys:
            return whys[0]
    return ""


def _original(rows: pd.DataFrame, positive: str, negative: str, undecided: str) -> dict[str, str]:
    """Where rows carry the rule their statistic replaced after the values were seen: that rule's claim word
    (combined as the as-stated word), the rule, and the statistic chosen after (the rows' measure)."""
    has = rows[rows["original_verdict"].astype(str) != ""] if "original_verdict" in rows.columns else rows.iloc[:0]
    if has.empty:
        return {"original": "", "original_rule": "", "chosen_after": ""}
    word = combine(list(has["original_verdict"].astype(str)), positive, negative, undecided)
    chosen = ", ".join(dict.fromkeys(has["measure"].astype(str)))
    return {"original": word, "original_rule": str(has["original_rule"].iloc[0]), "chosen_after": chosen}


def _tally(rows: pd.DataFrame, not_run: pd.Series) -> str:
    """``reproduced ×3, inconclusive ×1`` over the claim's rows (not-run rows counted as such)."""
    said = rows["verdict"].astype(str).where(~not_run, NOT_RUN)
    return ", ".join(f"{word} ×{n}" for word, n in said.value_counts(sort=False).items())


def _first(values: pd.Series) -> str:
    return str(values.iloc[0]) if len(values) else ""


def counts(claims: pd.DataFrame, role: str) -> dict[str, int]:
    """How many claims of ``role`` got each word, in first-seen order."""
    return {str(w): int(n) for w, n in claims.loc[claims["role"] == role, "verdict"].value_counts(sort=False).items()}
