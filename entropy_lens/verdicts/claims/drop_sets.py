"""Paper-table rows of the drop sets: does a pruning criterion's ``k``-block set keep more than random ``k``-sets?

No claim of the study's: an extension row on every model, counted apart.  One row per model, measure,
statistic, variant, ``k`` and criterion of :func:`entropy_lens.answers.drop_scores.drop_scores`: the estimate
is the set's change against the intact model (paired over questions); the null is the random ``k``-sets' mean
change (questions and sets resampled); beyond it, the set minus one random set per replicate.

Rule, fixed before any result was read: ``holds`` (better than random) when the beyond interval lies above 0;
``does not hold`` when it lies below the margin (5 accuracy points, 0.10 nats: no better than random by
more than the skip comparisons' margin); else ``undecided``.  Fewer than
:data:`~entropy_lens.verdicts.outcomes.MIN_RANDOM_SETS` random sets, or an intact model not above chance,
leave it undecided, and so does a degenerate interval (zero width, or none).
"""

from __future__ import annotations

import pandas as pd

from entropy_lens.answers.conditions import VARIANT_TEXT
from entropy_lens.answers.criteria import ACCURACY, CRITERION_TEXT
from entropy_lens.answers.drop_scores import DROP_SCORE_READING, MARGINS
from entropy_lens.answers.pruning import GROMOV
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import registry as C
from entropy_lens.verdicts.outcomes import MIN_RANDOM_SETS
from entropy_lens.verdicts.rows import Record, RowRule, interval, rows_of, table_null
from entropy_lens.verdicts.units import LOGPROB, POINTS

DROP_SETS = "drop_sets"
NO_DROP_CLAIM = "no claim of the study's own (it names no pruning criterion)"
CHANCE = 0.25
NAMES = {**CRITERION_TEXT, GROMOV: "Gromov's contiguous span"}


def _accuracy(rec: Record) -> bool:
    return rec["statistic"] == ACCURACY


def drop_verdict(rec: Record) -> D.Verdict:
    """Whether a criterion's drop set keeps more than random ``k``-sets (see the module docstring)."""
    scale, digits = (100.0, 1) if _accuracy(rec) else (1.0, 3)
    margin = MARGINS[str(rec["statistic"])]
    beyond = interval(rec, "beyond", "beyond_low", "beyond_high")
    intact = float(rec["intact"])
    if _accuracy(rec) and not intact > CHANCE:
        return D.Verdict(D.INCONCLUSIVE, f"intact model not above chance: accuracy {100 * intact:.1f}%")
    if int(rec["n_sets"]) < MIN_RANDOM_SETS:
        return D.Verdict(D.INCONCLUSIVE, f"random baseline of {int(rec['n_sets'])} sets (needs {MIN_RANDOM_SETS})")
    if D.degenerate(beyond):
        return D.Verdict(D.INCONCLUSIVE, f"not decided: {D.degenerate(beyond)}")
    text = (
        f"set {rec['layers']} minus random k-sets {beyond.text(scale, digits)}; keeps more than "
        f"{100 * float(rec['beats']):.0f}% of {int(rec['n_sets'])} random sets"
        + ("; best of the criteria (its interval against every other lies above 0)" if bool(rec["best"]) else "")
    )
    words = D.Decision(
        reproduced="{text}: better than random",
        not_reproduced=f"{{text}}: no better than random by {margin * scale:g}",
        inconclusive=f"{{text}}: the interval straddles 0 and +{margin * scale:g}",
    )
    # n=0: its why names no units to decide (the random sets, not only the questions, set the spread).
    return D.judge(D.above(beyond, 0.0, margin=margin), n=0, unit="questions", words=words, text=text)


DROP_RULE = RowRule(
    claim=DROP_SETS,
    unit=lambda rec: POINTS if _accuracy(rec) else LOGPROB,
    judge=lambda _, rec: drop_verdict(rec),
    role=C.EXTENSION,
    study=NO_DROP_CLAIM,
    split=lambda rec: (
        f"k={int(rec['k'])} ({100 * float(rec['share']):.0f}% of blocks), {VARIANT_TEXT[str(rec['variant'])]}, "
        f"{NAMES.get(str(rec['criterion']), str(rec['criterion']))}"
    ),
    note=lambda rec: f"blocks {rec['layers']} dropped together; baseline = intact; {rec['reading']}",
    extra=lambda rec: {"baseline": D.Interval(float(rec["intact"]), float(rec["intact"]), float(rec["intact"]))},
    null=lambda rec: table_null(rec, margin=MARGINS[str(rec["statistic"])]),
)


def drop_set_rows(scores: pd.DataFrame | None) -> list[dict]:
    """The paper-table rows of a :func:`~entropy_lens.answers.drop_scores.drop_scores` table (none for ``None``)."""
    if scores is None or scores.empty:
        return []
    return rows_of(DROP_SCORE_READING.frame(scores, "drop_scores"), DROP_RULE)
