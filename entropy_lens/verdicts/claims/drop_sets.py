"""The drop sets: does a pruning criterion's ``k``-block set keep more than random ``k``-sets?

No claim of the study's: an extension row on every model, counted apart.  One row per model, measure,
statistic, variant, ``k`` and criterion of :func:`entropy_lens.skipping.drop_scores.drop_scores`: the estimate
is the set's change against the intact model (paired over questions); the null is the change of the random
``k``-set drawn for each question; beyond it, the set minus that random set, paired over questions.  The gold
letter's log-probability is the primary statistic (the study states none for drop sets), accuracy beside.

Rule, fixed before any result was read: ``holds`` (better than random) when the beyond interval lies above 0;
``does not hold`` when it lies below the margin (5 accuracy points, 0.10 nats: no better than random by
more than the skip comparisons' margin); else ``undecided``.  Fewer than
:data:`~entropy_lens.verdicts.outcomes.MIN_RANDOM_SETS` random sets, or an intact model not above chance,
leave it undecided, and so does a degenerate interval (zero width, or none).

Its record, its row rule, the paper-table input its rows come from and its planted null, as one object.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from entropy_lens.skipping.conditions import VARIANT_TEXT
from entropy_lens.skipping.criteria import ACCURACY, CRITERION_TEXT, GOLD_LOGPROB
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
        f"set {rec['layers']} minus a random k-set drawn per question {beyond.text(scale, digits)} "
        f"({int(rec['n_sets'])} distinct random sets on {int(rec['n'])} questions)"
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


# --------------------------------------------------------------------------- what a user choosing blocks reads

RECOMMEND_STATISTIC = GOLD_LOGPROB


def separates(rec: Record) -> decision.Verdict:
    """Whether a criterion's set separates from every other criterion's: its paired interval against the best
    other set (``margin``) lies above 0 (``reproduced``), below 0 (``not reproduced``: another set keeps more),
    else ``inconclusive``; through the one decision function."""
    value = interval(rec, "margin", "margin_low", "margin_high")
    if reason := decision.degenerate(value):
        return decision.Verdict(decision.INCONCLUSIVE, f"not decided: {reason}")
    words = decision.Decision(
        reproduced="{text}: keeps more than every other criterion's set",
        not_reproduced="{text}: another criterion's set keeps more",
        inconclusive="{text}: not apart from the best other criterion's set",
    )
    test = decision.Test(yes=(decision.Side(value, 0.0),), no=(decision.Side(value, 0.0, above=False),))
    return decision.judge(
        test, n=0, unit="questions", words=words, text=f"set minus the best other {value.text(1.0, 3)}"
    )


def recommended(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of one model, measure, variant and ``k`` (:data:`RECOMMEND_STATISTIC`) whose set a user may drop:
    the rule, fixed before any drop set was scored, is that its set keeps more than random (:func:`drop_verdict`
    ``reproduced``) and more than every other criterion's set (:func:`separates` ``reproduced``).  Criteria that
    chose the same blocks are one set: they are recommended together or not at all.  Empty: none qualifies."""
    keep = [
        drop_verdict(rec).verdict == decision.REPRODUCED and separates(rec).verdict == decision.REPRODUCED
        for rec in rows.to_dict("records")
    ]
    return rows[keep]


def _set_text(rec: Record) -> str:
    return (
        f"{rec['layers']}: log p {rec['change']:+.2f} [{rec['ci_low']:+.2f}, {rec['ci_high']:+.2f}] nats, "
        f"beyond random {rec['beyond']:+.2f} [{rec['beyond_low']:+.2f}, {rec['beyond_high']:+.2f}]"
    )


def drop_line(scores: pd.DataFrame, measure: str, *, model_names: dict[str, str] | None = None) -> str:
    """One line per model for people: per variant and ``k``, the recommended set (:func:`recommended`) with what
    dropping it costs (the gold letter's log-probability, accuracy beside), or that none qualifies and the set of
    least cost; from a :func:`~entropy_lens.skipping.drop_scores.drop_scores` table."""
    lines = []
    rows = scores[scores["measure"] == measure]
    for model, by_model in rows.groupby("model", sort=False):
        parts = []
        primary = by_model[by_model["statistic"] == RECOMMEND_STATISTIC]
        accuracy = by_model[by_model["statistic"] == ACCURACY].set_index(["variant", "k", "criterion"])
        for (variant, k), group in primary.groupby(["variant", "k"], sort=False):
            share = f"k={int(k)} ({100 * float(group['share'].iloc[0]):.0f}% of blocks, {VARIANT_TEXT[str(variant)]})"
            chosen = recommended(group)
            best = chosen if len(chosen) else group.sort_values("change", ascending=False).head(1)
            rec = best.iloc[0].to_dict()
            names = " and ".join(NAMES.get(str(c), str(c)) for c in best["criterion"])
            acc = (
                accuracy.loc[(variant, k, rec["criterion"])]
                if (variant, k, rec["criterion"]) in accuracy.index
                else None
            )
            beside = "" if acc is None else f", accuracy {100 * acc['change']:+.1f} points"
            if len(chosen):
                parts.append(f"{share}: drop {names}'s blocks {_set_text(rec)}{beside}")
            else:
                parts.append(
                    f"{share}: no set separates from random and from the others (least costly: {names}'s blocks "
                    f"{_set_text(rec)}{beside})"
                )
        name = (model_names or {}).get(str(model), str(model))
        lines.append(
            f"Which blocks of {name} can be dropped ({int(primary['n'].max())} questions, {measure} letters; "
            f"a set is recommended only where it keeps more than random and than every other criterion's): "
            + "; ".join(parts)
            + "."
        )
    return "\n".join(lines)
