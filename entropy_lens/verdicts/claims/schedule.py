"""The schedule under a fitted lens: does the logit lens's expansion/pruning schedule survive a lens fitted to the
model (:mod:`entropy_lens.analysis.schedule`, :mod:`~entropy_lens.analysis.schedule_agreement`)?

No claim of the study's (it reads the logit lens alone): an extension row per model and fitted kind, counted apart.
The blocks read are those whose ΔH is under the fitted lens's KL bar (its reading there counts as the model's); the
statistic is the Spearman over them of the logit lens's ΔH with the fitted lens's, on the held-out questions of the
lens corpus; the null permutes the blocks in the same bootstrap. Where those blocks hold no expansion or no pruning
block of the logit lens's, or fewer than three, the row *cannot be read* (its own word). The rule, fixed in
``docs/verdicts.md`` before any schedule was read: :func:`~entropy_lens.verdicts.rules.schedule_survives`.

Its record, its row rule, the paper-table input its rows come from and its planted null, as one object.
"""

from __future__ import annotations

from entropy_lens.analysis.schedule import KL_BAR
from entropy_lens.analysis.schedule_agreement import AGREEMENT_COLUMNS, AGREEMENT_READING, UNDER_BAR
from entropy_lens.verdicts import decision, rules
from entropy_lens.verdicts.claim import EXTENSION, Claim
from entropy_lens.verdicts.inputs import WITH_LENSES, PaperInput, rule_rows
from entropy_lens.verdicts.outcomes import Outcome
from entropy_lens.verdicts.rows import Record, RowRule, table_null, text
from entropy_lens.verdicts.tested import PlantedNull, TestedClaim
from entropy_lens.verdicts.units import RHO

SCHEDULE_SURVIVES = Claim(
    id="schedule_survives",
    name="the expansion/pruning schedule survives a fitted lens",
    sentence="where a fitted lens reads the model (held-out KL under the bar), it ranks the blocks' entropy changes "
    "as the logit lens does (no claim of the study's own: it reads the logit lens alone)",
    role=EXTENSION,
    unit="held-out questions",
    dataset="lens_held_out",
    rule=rules.schedule_survives,
)

NO_SCHEDULE_CLAIM = "no claim of the study's own (it reads the logit lens alone)"
# Why the rows are not recomputed from a profile store (PaperInput.from_store).
FROM_LENS_CORPUS = "read on the lens corpus's held-out questions by the fit jobs, not from a profile store"


def _unreadable(rec: Record) -> str:
    return text(rec.get("reading"))


def schedule_verdict(rho: decision.Interval, rec: Record) -> decision.Verdict | Outcome:
    """The row's verdict: :func:`~entropy_lens.verdicts.rules.schedule_survives` of its Spearman."""
    return rules.schedule_survives(
        rho, n=int(rec["n_prompts"]), n_blocks=int(rec["n_blocks"]), unreadable=_unreadable(rec)
    )


SCHEDULE_RULE = RowRule(
    claim=SCHEDULE_SURVIVES,
    unit=RHO,
    judge=schedule_verdict,
    role=EXTENSION,
    study=NO_SCHEDULE_CLAIM,
    keep=lambda rec: rec["blocks"] == UNDER_BAR,
    split=lambda rec: f"{rec['lens']} lens, blocks under its {KL_BAR:g}-nat bar",
    measure="Spearman of ΔH (logit vs fitted lens)",
    note=lambda rec: (
        f"blocks {text(rec['block_list']) or 'none'} ({int(rec['n_rising'])} rising, {int(rec['n_falling'])} "
        f"falling under the logit lens); the logit lens's ΔH is mostly its convergence at blocks "
        f"{text(rec['convergence_blocks']) or 'none'}; with depth there: rho {float(rec['depth_rho_logit']):+.2f} "
        f"(logit), {float(rec['depth_rho_fitted']):+.2f} (fitted); the interval resamples held-out questions, blocks "
        "fixed"
    ),
    # the block permutation, computed in the same bootstrap; none where the schedule cannot be read
    null=lambda rec: None if _unreadable(rec) else table_null(rec, margin=decision.NULL_MARGINS["rho"]),
)


SCHEDULE_TABLE = PaperInput(
    "lens_schedule",
    "analysis.schedule_agreement.agreement_table (the blocks under the fitted lens's bar)",
    AGREEMENT_READING,
    rule_rows("lens_schedule", SCHEDULE_RULE),
    from_store=FROM_LENS_CORPUS,
    path="results/tables/lens_schedule_agreement.csv",
    made=WITH_LENSES,
    columns=AGREEMENT_COLUMNS,
)

SCHEDULE_TESTED = TestedClaim(
    SCHEDULE_SURVIVES,
    SCHEDULE_RULE,
    (SCHEDULE_TABLE,),
    PlantedNull("entropy_lens.verdicts.schedule_nulls:schedule_planted_rate"),
)
