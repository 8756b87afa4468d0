"""The layer-skip claims: comparisons, collapse and the rank over blocks (:mod:`entropy_lens.skipping.criticality`).

Each comparison gets its outcome first (:mod:`entropy_lens.verdicts.outcomes`); it becomes a
finding's verdict only where the study names a direction for the model
(:data:`entropy_lens.verdicts.study.SKIP_EXPECTED`), and is an extension row elsewhere.  A finding reads the
study's statistic (accuracy); an extension row reads the gold letter's log-probability among the four letters,
paired over questions, with the accuracy comparison quoted beside it
(:data:`~entropy_lens.verdicts.claim.SKIP_COMPARISON_ROWS`).
Each claim as one object: its record, its row rule, the paper-table input its rows come from, its planted null
and why it was not run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.skipping.comparisons import COMPARISON_COLUMNS, COMPARISON_READING, LENS_JOIN
from entropy_lens.skipping.conditions import EXPANSION, LENS_TEXT, LOGIT, PRUNING, RANDOM, VARIANT_TEXT
from entropy_lens.skipping.criticality import ACCURACY
from entropy_lens.skipping.criticality import SPEARMAN_COLUMNS as RANK_COLUMNS
from entropy_lens.skipping.criticality import SPEARMAN_READING as RANK_READING
from entropy_lens.verdicts import decision, outcomes, study
from entropy_lens.verdicts.claim import EXTENSION, FINDING, SKIP_COMPARISON_ROWS, SKIP_ROWS, Claim
from entropy_lens.verdicts.inputs import FROM_ANSWERS, WITH_LAYER_SKIP, PaperInput, given
from entropy_lens.verdicts.rows import Expected, Record, RowRule, interval, rows_of, table_null
from entropy_lens.verdicts.tested import NoNull, PlantedNull, TestedClaim
from entropy_lens.verdicts.units import LOGPROB, POINTS, RHO

SKIP_COLLAPSE = Claim(
    id="skip_collapse",
    name="skipping the single largest-expansion block collapses MMLU to chance",
    sentence="on Llama, skipping the single largest-expansion layer collapses MMLU to chance",
    role=FINDING,
    unit="questions",
    dataset="layer_skip_eval",
    rule=outcomes.collapse,
    figure="skip_llama",
    headline=SKIP_ROWS,
)

SKIP_VS_RANDOM = Claim(
    id="skip_vs_random",
    name="skipping the expansion block(s) vs random blocks",
    sentence="expansion layers are more critical than random layers (Llama)",
    role=FINDING,
    unit="questions (and random sets)",
    dataset="layer_skip_eval",
    rule=outcomes.skip_outcome,
    figure="skip_llama",
    headline=SKIP_COMPARISON_ROWS,
)

SKIP_VS_PRUNING = Claim(
    id="skip_vs_pruning",
    name="skipping the expansion block(s) vs the pruning block(s)",
    sentence="Llama: expansion layers matter more; Gemma-2-2B-it: pruning layers matter more",
    role=FINDING,
    unit="questions",
    dataset="layer_skip_eval",
    rule=outcomes.skip_outcome,
    figure="skip_llama",
    headline=SKIP_COMPARISON_ROWS,
)

PRUNING_VS_RANDOM = Claim(
    id="pruning_vs_random",
    name="skipping the pruning block(s) vs random blocks",
    sentence="pruning layers against random layers (no claim of the study's own)",
    role=EXTENSION,
    unit="questions (and random sets)",
    dataset="layer_skip_eval",
    rule=outcomes.skip_outcome,
    headline=SKIP_COMPARISON_ROWS,
)

SKIP_RANK = Claim(
    id="skip_rank",
    name="the cost of skipping a block follows its entropy change (rank over blocks)",
    sentence="rank of each block's ΔH against the cost of skipping it (no claim of the study's own: it compares "
    "the selected layers with random ones)",
    role=EXTENSION,
    unit="questions, blocks",
    dataset="layer_skip_eval",
    rule=outcomes.rank_outcome,
    headline=SKIP_ROWS,
)

# Comparisons of the skip experiment (first, second) -> the claim their row names.
SKIP_COMPARISON_CLAIMS = {
    (EXPANSION, RANDOM): SKIP_VS_RANDOM,
    (PRUNING, RANDOM): PRUNING_VS_RANDOM,
    (EXPANSION, PRUNING): SKIP_VS_PRUNING,
}


def _judge(
    claim: str, outcome: outcomes.Outcome, scope: str | None
) -> tuple[decision.Verdict | outcomes.Outcome, str, str]:
    """(verdict or outcome, role, study text) of a claim's row for a model of ``scope``."""
    expected = study.SKIP_EXPECTED.get(scope or "", {}).get(claim)
    if expected is None:
        return outcome, EXTENSION, study.NO_SKIP_CLAIM
    return outcomes.against_study(outcome, expected), FINDING, study.STUDY_SKIP_SENTENCE[scope]


def _claim(rec: Record) -> Claim:
    return SKIP_COMPARISON_CLAIMS[(str(rec["first"]), str(rec["second"]))]


def _is_accuracy(rec: Record) -> bool:
    return rec["statistic"] == ACCURACY


def _split(rec: Record) -> str:
    return f"k={int(rec['k'])}, {VARIANT_TEXT[str(rec['variant'])]}" + _lens_text(rec)


def _lens_text(rec: Record) -> str:
    """``", ΔH under the linear lens"`` (nothing for the logit lens alone); both lenses where they chose alike."""
    lenses = str(rec.get("lens") or LOGIT).split(LENS_JOIN)
    if lenses == [LOGIT]:
        return ""
    if len(lenses) > 1:
        return ", ΔH under both lenses (the same blocks)"
    return f", ΔH under the {LENS_TEXT[lenses[0]]}"


def _intact(rec: Record) -> decision.Interval:
    return interval(rec, "intact", "intact_low", "intact_high")


def comparison_rule(scopes: Mapping[str, str | None]) -> RowRule:
    """A comparison's outcome, judged against the study's direction where it names one for the model's scope."""

    def judged(rec: Record) -> tuple[decision.Verdict | outcomes.Outcome, str, str]:
        outcome = outcomes.comparison_outcome(rec)
        return _judge(_claim(rec).id, outcome, scopes.get(str(rec["model"])))

    return RowRule(
        claim=_claim,
        unit=lambda rec: POINTS if _is_accuracy(rec) else LOGPROB,
        judge=lambda _, rec: judged(rec)[0],
        role=lambda rec: judged(rec)[1],
        study=lambda rec: judged(rec)[2],
        note=lambda rec: (
            f"{rec['first']} {rec['first_layers']} vs {rec['second']} {rec['second_layers']}; "
            "baseline = intact accuracy" + (f"; {rec['beside']}" if rec.get("beside") else "")
        ),
        split=_split,
        extra=lambda rec: {"baseline": _intact(rec)},
        null=_random_null,
    )


def _random_null(rec: Record) -> decision.Null | None:
    """Random blocks, the null of a comparison against them (the table's own columns, Holm-level excess);
    expansion against pruning has none of its own: each side's row against random blocks is its null."""
    null = table_null(rec, margin=outcomes.SKIP_MARGIN if _is_accuracy(rec) else outcomes.LOGPROB_MARGIN)
    if null is None:
        return None
    # what the first skip costs (intact - first): the random blocks' cost plus the first's excess over it (paired
    # means over the same questions add up), so observed - null = beyond
    return dataclasses.replace(null, observed=null.value.estimate + null.beyond.estimate)


def collapse_rule(scopes: Mapping[str, str | None]) -> RowRule:
    """Accuracy with the largest-expansion block skipped (``k = 1``) against chance and the intact model."""

    def finding(rec: Record) -> bool:
        return study.SKIP_EXPECTED.get(scopes.get(str(rec["model"])) or "", {}).get(SKIP_COLLAPSE.id) is not None

    return RowRule(
        claim=SKIP_COLLAPSE,
        unit="accuracy %",
        judge=lambda skipped, rec: outcomes.collapse(
            skipped, intact=_intact(rec), chance=float(rec["chance"]), n=int(rec["n"])
        ),
        role=lambda rec: FINDING if finding(rec) else EXTENSION,
        study=lambda rec: study.STUDY_SKIP_SENTENCE[study.LLAMA_SCOPE] if finding(rec) else study.NO_SKIP_CLAIM,
        note=lambda rec: (
            f"block {rec['first_layers']} skipped; baseline = intact; chance {100 * float(rec['chance']):.0f}%"
        ),
        keep=lambda rec: (
            _is_accuracy(rec) and int(rec["k"]) == 1 and rec["first"] == EXPANSION and rec["second"] == RANDOM
        ),
        split=_split,
        extra=lambda rec: {"baseline": _intact(rec)},
        # a collapse says something about expansion only where a random block's skip does not collapse too
        null=_random_null,
    )


# The keys that pair a log-probability comparison with its accuracy comparison.
PAIR_KEYS = ["model", "measure", "variant", "k", "lens", "first", "second"]


def with_accuracy_beside(comparisons: pd.DataFrame) -> pd.DataFrame:
    """``comparisons`` with a ``beside`` column: on each log-probability row, its accuracy comparison's difference
    and raw interval (points), the statistic an extension row quotes beside its primary one."""
    if comparisons.empty:
        return comparisons.assign(beside="")
    keys = [k for k in PAIR_KEYS if k in comparisons]
    accuracy = comparisons[comparisons["statistic"] == ACCURACY]
    text = {
        tuple(rec[k] for k in keys): (
            f"accuracy beside: {100 * rec['difference']:+.1f} [{100 * rec['ci_low']:+.1f}, "
            f"{100 * rec['ci_high']:+.1f}] points"
        )
        for rec in accuracy.to_dict("records")
    }
    beside = [
        "" if rec["statistic"] == ACCURACY else text.get(tuple(rec[k] for k in keys), "")
        for rec in comparisons.to_dict("records")
    ]
    return comparisons.assign(beside=beside)


def comparison_rows(comparisons: pd.DataFrame, scopes: Mapping[str, str | None]) -> list[dict]:
    """A row per comparison (model, measure, statistic, variant, k, lens), and the collapse row of each
    expansion block at ``k = 1`` (accuracy statistic)."""
    comparisons = with_accuracy_beside(comparisons)
    skipped = comparisons.assign(
        **{ESTIMATE: comparisons["skipped"], LOW: comparisons["skipped_low"], HIGH: comparisons["skipped_high"]}
    )
    return rows_of(comparisons, comparison_rule(scopes)) + rows_of(skipped, collapse_rule(scopes))


# The rank over blocks is no claim of the study's (it compares the selected layers with random ones): an
# extension on every model, reported with its outcome.
NO_RANK_CLAIM = "no claim of the study's own (the study compares the selected layers with random ones)"


def rank_rule(scopes: Mapping[str, str | None]) -> RowRule:
    """The Spearman of Delta H with the cost of skipping each block: an extension row on every model.

    ``scopes`` is accepted for the caller's symmetry with :func:`comparison_rule`; no scope makes it a finding.
    """
    del scopes

    def judged(rec: Record) -> outcomes.Outcome:
        rho = interval(rec, ESTIMATE, LOW, HIGH)
        return outcomes.rank_outcome(rho, n=int(rec["n"]), n_blocks=int(rec["n_blocks"]))

    return RowRule(
        claim=SKIP_RANK,
        unit=RHO,
        judge=lambda _, rec: judged(rec),
        role=EXTENSION,
        study=NO_RANK_CLAIM,
        note=lambda rec: (
            f"{int(rec['n_blocks'])} blocks, fixed (questions resampled); cost = drop of the gold letter's "
            "log-probability; most costly "
            f"block {int(rec['most_costly'])}, largest ΔH block {int(rec['largest_delta_h'])}; "
            f"{int(rec['n_calibration'])} calibration questions"
        ),
        split=lambda rec: VARIANT_TEXT[str(rec["variant"])],
        # for this model its blocks are the population: costs with no block structure read around 0
        null=lambda rec: decision.fixed_null(
            "no relation (rho 0)", interval(rec, ESTIMATE, LOW, HIGH), 0.0, margin=outcomes.RHO_MARGIN
        ),
    )


COMPARISONS_TABLE = PaperInput(
    "layer_skip",
    "skipping.comparisons.skip_comparisons",
    COMPARISON_READING,
    given("layer_skip", lambda b: comparison_rows(b.frames["layer_skip"], b.scopes)),
    from_store=FROM_ANSWERS,
    path="results/tables/layer_skip_comparisons.csv",
    made=WITH_LAYER_SKIP,
    columns=COMPARISON_COLUMNS,
)
RANK_TABLE = PaperInput(
    "skip_spearman",
    "skipping.criticality.criticality_spearman",
    RANK_READING,
    lambda b: rows_of(b.frames["skip_spearman"], rank_rule(b.scopes)),
    from_store=FROM_ANSWERS,
    path="results/tables/layer_skip_spearman.csv",
    made=WITH_LAYER_SKIP,
    columns=RANK_COLUMNS,
)


def skip_shortfall(models: Sequence[str], expected: Expected, *, named: bool) -> str:
    """Why ``models`` have no layer-skip rows: the experiment is off, none is in ``layer_skip.models`` (named
    where the row does not name the model), or the run gave no result."""
    if not expected.layer_skip:
        return "the layer-skip experiment is off"
    if set(models) & set(expected.layer_skip):
        return "no result"
    return f"{', '.join(models)} not in layer_skip.models" if named else "not in layer_skip.models"


def skip_absence(claim: Claim, expected: Expected) -> str:
    """Why a layer-skip claim has no row in its role: no direction of the study's for it, no model of its scope,
    or the shortfall of the models of its scope."""
    scopes = [scope for scope, claims in study.SKIP_EXPECTED.items() if claim.id in claims]
    if not scopes:
        return "the study names no direction for it on any model: every row of it is an extension"
    scoped = [model for model, scope in expected.skip_scopes().items() if scope in scopes]
    if not scoped:
        names = " or ".join(study.SKIP_SCOPE_NAMES[s] for s in scopes)
        return f"no model of {names} (the study's scope) in this configuration; other models' rows are extensions"
    return skip_shortfall(scoped, expected, named=True)


def _skip_tested(claim: Claim, rule: Callable[..., RowRule], null: PlantedNull | NoNull) -> TestedClaim:
    """A layer-skip claim: read from the comparisons (the rank from the per-block Spearman), its own absence."""
    table = RANK_TABLE if claim is SKIP_RANK else COMPARISONS_TABLE
    return TestedClaim(claim, rule, (table,), null, absence=skip_absence)


# A skip draw reruns the comparisons at k = 1 on simulated questions: at most 40 draws.
SKIP_NULL = PlantedNull("entropy_lens.verdicts.skip_nulls:skip_planted_rate", keywords=(("ks", (1,)),), max_draws=40)
SKIP_COLLAPSE_TESTED = _skip_tested(SKIP_COLLAPSE, collapse_rule, SKIP_NULL)
SKIP_VS_RANDOM_TESTED = _skip_tested(SKIP_VS_RANDOM, comparison_rule, SKIP_NULL)
SKIP_VS_PRUNING_TESTED = _skip_tested(
    SKIP_VS_PRUNING,
    comparison_rule,
    NoNull("expansion against pruning: each side's row against random blocks is its null"),
)
PRUNING_VS_RANDOM_TESTED = _skip_tested(PRUNING_VS_RANDOM, comparison_rule, SKIP_NULL)
# The rank over blocks reads its Spearman against rho 0 at the skip comparisons' rho margin.
SKIP_RANK_TESTED = _skip_tested(
    SKIP_RANK, rank_rule, PlantedNull("entropy_lens.verdicts.skip_nulls:rank_planted_rate", margin=outcomes.RHO_MARGIN)
)
