"""The drop sets: does a pruning criterion's ``k``-block set keep more than random ``k``-sets?

No claim of the study's: an extension row on every model, counted apart.  One row per model, measure,
statistic, variant, ``k`` and criterion of :func:`entropy_lens.skipping.drop_scores.drop_scores`: the estimate
is the set's change against the intact model (paired over questions); the null is the random ``k``-sets' mean
change (questions and sets resampled); beyond it, the set minus one random set per replicate.

Rule, fixed before any result was read: ``holds`` (better than random) when the beyond interval lies above 0;
``does not hold`` when it lies below the margin (5 accuracy points, 0.10 nats: no better than random by
more than the skip comparisons' margin); else ``undecided``.  Fewer than
:data:`~entropy_lens.verdicts.outcomes.MIN_RANDOM_SETS` random sets, or an intact model not above chance,
leave it undecided, and so does a degenerate interval (zero width, or none).

Its record, its row rule, the paper-table input its rows come from and its planted null, as one object.
"""

from __future__ import annotations

from dataclasses import replace

from entropy_lens.skipping.conditions import VARIANT_TEXT
from entropy_lens.skipping.criteria import ACCURACY, CRITERION_TEXT
from entropy_lens.skipping.drop_scores import DROP_SCORE_READING, MARGINS, SCORE_COLUMNS
from entropy_lens.skipping.pruning import GROMOV
from entropy_lens.verdicts import decision, outcomes
from entropy_lens.verdicts.claim import EXTENSION, SKIP_ROWS, Claim
from entropy_lens.verdicts.inputs import FROM_ANSWERS, WITH_LAYER_SKIP, PaperInput, rule_rows
from entropy_lens.verdicts.rows import Record, RowRule, interval, table_null
from entropy_lens.verdicts.tested import PlantedNull, TestedClaim
from entropy_lens.verdicts.units import LOGPROB, POINTS

DROP_SETS = Claim(
    id="drop_sets",
    name="dropping the k blocks a pruning criterion ranks least critical vs random k-sets",
    sentence="which k blocks can you drop? each criterion's k least critical blocks (ΔH, Block Influence, "
    "angular distance, position) and Gromov's contiguous span, skipped together, against random k-sets "
    "(no claim of the study's own)",
    role=EXTENSION,
    unit="questions, random sets",
    dataset="layer_skip_eval",
    rule=outcomes.drop_set,
    # one row per criterion, share, variant and statistic: the full table's section; its k count toward the
    # experiment's smallest k
    headline=replace(SKIP_ROWS, shown=False),
)

NO_DROP_CLAIM = "no claim of the study's own (it names no pruning criterion)"
CHANCE = 0.25
NAMES = {**CRITERION_TEXT, GROMOV: "Gromov's contiguous span"}


def _accuracy(rec: Record) -> bool:
    return rec["statistic"] == ACCURACY


def drop_verdict(rec: Record) -> decision.Verdict:
    """Whether a criterion's drop set keeps more than random ``k``-sets: its record read by
    :func:`~entropy_lens.verdicts.outcomes.drop_set`."""
    scale, digits = (100.0, 1) if _accuracy(rec) else (1.0, 3)
    beyond = interval(rec, "beyond", "beyond_low", "beyond_high")
    text = (
        f"set {rec['layers']} minus random k-sets {beyond.text(scale, digits)}; keeps more than "
        f"{100 * float(rec['beats']):.0f}% of {int(rec['n_sets'])} random sets"
        + ("; best of the criteria (its interval against every other lies above 0)" if bool(rec["best"]) else "")
    )
    return outcomes.drop_set(
        beyond,
        margin=MARGINS[str(rec["statistic"])],
        scale=scale,
        intact=float(rec["intact"]) if _accuracy(rec) else None,
        chance=CHANCE,
        n_sets=int(rec["n_sets"]),
        text=text,
    )


DROP_RULE = RowRule(
    claim=DROP_SETS,
    unit=lambda rec: POINTS if _accuracy(rec) else LOGPROB,
    judge=lambda _, rec: drop_verdict(rec),
    role=EXTENSION,
    study=NO_DROP_CLAIM,
    split=lambda rec: (
        f"k={int(rec['k'])} ({100 * float(rec['share']):.0f}% of blocks), {VARIANT_TEXT[str(rec['variant'])]}, "
        f"{NAMES.get(str(rec['criterion']), str(rec['criterion']))}"
    ),
    note=lambda rec: f"blocks {rec['layers']} dropped together; baseline = intact; {rec['reading']}",
    extra=lambda rec: {"baseline": decision.Interval(float(rec["intact"]), float(rec["intact"]), float(rec["intact"]))},
    null=lambda rec: table_null(rec, margin=MARGINS[str(rec["statistic"])]),
)


DROP_TABLE = PaperInput(
    "drop_scores",
    "skipping.drop_scores.drop_scores (each criterion's drop set against random k-sets)",
    DROP_SCORE_READING,
    rule_rows("drop_scores", DROP_RULE),
    from_store=FROM_ANSWERS,
    path="results/tables/skip_drop_scores.csv",
    made=WITH_LAYER_SKIP,
    columns=SCORE_COLUMNS,
)

# Each planted draw reruns the whole drop-set comparison: at most 40 draws.
DROP_SETS_TESTED = TestedClaim(
    DROP_SETS,
    DROP_RULE,
    (DROP_TABLE,),
    PlantedNull("entropy_lens.skipping.drop_scores:drop_set_planted_rate", margin="accuracy", max_draws=40),
)
