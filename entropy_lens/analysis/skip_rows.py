"""Paper-table rows of the layer-skip experiment: comparisons, collapse and the rank over blocks.

Each comparison gets its outcome first (:mod:`entropy_lens.analysis.outcomes`); it becomes a
finding's verdict only where the study names a direction for the model
(:data:`entropy_lens.analysis.claims.SKIP_EXPECTED`), and is an extension row elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis import claims as C
from entropy_lens.analysis import outcomes as O
from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.render import LOGPROB, POINTS, RHO
from entropy_lens.analysis.rows import interval, row
from entropy_lens.answers.conditions import EXPANSION, RANDOM, VARIANT_TEXT
from entropy_lens.answers.criticality import ACCURACY

COLLAPSE = "collapse"


def _scope(model: str, scopes: Mapping[str, str | None]) -> str | None:
    return scopes.get(model)


def _judge(claim: str, outcome: O.Outcome, scope: str | None) -> tuple[V.Verdict | O.Outcome, str, str]:
    """(verdict or outcome, role, study text) of a claim's row for a model of ``scope``."""
    expected = C.SKIP_EXPECTED.get(scope or "", {}).get(claim)
    if expected is None:
        return outcome, C.EXTENSION, C.NO_SKIP_CLAIM
    return O.against_study(outcome, expected), C.FINDING, C.STUDY_SKIP_SENTENCE[scope]


def comparison_rows(comparisons: pd.DataFrame, scopes: Mapping[str, str | None]) -> list[dict]:
    """A row per comparison (model, measure, statistic, variant, k), and the collapse row of each
    expansion block at ``k = 1`` (accuracy statistic)."""
    out = []
    for rec in comparisons.to_dict("records"):
        model, k, accuracy = str(rec["model"]), int(rec["k"]), rec["statistic"] == ACCURACY
        intact = interval(rec, "intact", "intact_low", "intact_high")
        n_sets = int(rec["n_sets"]) if rec["second"] == RANDOM and k >= 2 else None
        outcome = O.skip_outcome(
            interval(rec, "difference", "ci_low", "ci_high"),
            first=str(rec["first"]),
            second=str(rec["second"]),
            margin=O.SKIP_MARGIN if accuracy else O.LOGPROB_MARGIN,
            unit="points" if accuracy else "nats",
            n=int(rec["n"]),
            intact=intact,
            chance=float(rec["chance"]),
            n_sets=n_sets,
        )
        claim = C.SKIP_COMPARISON_CLAIMS[(str(rec["first"]), str(rec["second"]))]
        verdict, role, study = _judge(claim, outcome, _scope(model, scopes))
        split = f"k={k}, {VARIANT_TEXT[str(rec['variant'])]}"
        note = f"{rec['first']} {rec['first_layers']} vs {rec['second']} {rec['second_layers']}"
        out.append(
            row(
                claim,
                model,
                POINTS if accuracy else LOGPROB,
                verdict,
                role=role,
                split=split,
                measure=str(rec["measure"]),
                ours=interval(rec, "difference", "ci_low", "ci_high"),
                baseline=intact,
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec["n"]),
                note=f"{note}; baseline = intact accuracy",
            )
        )
        if accuracy and k == 1 and rec["first"] == EXPANSION and rec["second"] == RANDOM:
            out.append(_collapse_row(rec, split, intact, scopes))
    return out


def _collapse_row(rec: Mapping[str, Any], split: str, intact: V.Interval, scopes) -> dict:
    model = str(rec["model"])
    skipped = interval(rec, "skipped", "skipped_low", "skipped_high")
    verdict = O.collapse(skipped, intact=intact, chance=float(rec["chance"]), n=int(rec["n"]))
    scope = _scope(model, scopes)
    finding = C.SKIP_EXPECTED.get(scope or "", {}).get(C.SKIP_COLLAPSE) is not None
    return row(
        C.SKIP_COLLAPSE,
        model,
        "accuracy %",
        verdict,
        role=C.FINDING if finding else C.EXTENSION,
        split=split,
        measure=str(rec["measure"]),
        ours=skipped,
        baseline=intact,
        study=C.STUDY_SKIP_SENTENCE[C.LLAMA_SCOPE] if finding else C.NO_SKIP_CLAIM,
        n=int(rec["n"]),
        n_sources=int(rec["n"]),
        note=f"block {rec['first_layers']} skipped; baseline = intact; chance {100 * float(rec['chance']):.0f}%",
    )


def rank_rows(spearman: pd.DataFrame, scopes: Mapping[str, str | None]) -> list[dict]:
    """A row per model, measure and variant: the Spearman of Delta H with the cost of skipping each block."""
    out = []
    for rec in spearman.to_dict("records"):
        model = str(rec["model"])
        rho = interval(rec, "rho", "ci_low", "ci_high")
        outcome = O.rank_outcome(rho, n=int(rec["n"]), n_blocks=int(rec["n_blocks"]))
        verdict, role, study = _judge(C.SKIP_RANK, outcome, _scope(model, scopes))
        out.append(
            row(
                C.SKIP_RANK,
                model,
                RHO,
                verdict,
                role=role,
                split=VARIANT_TEXT[str(rec["variant"])],
                measure=str(rec["measure"]),
                ours=rho,
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec["n"]),
                note=(
                    f"{int(rec['n_blocks'])} blocks; cost = drop of the gold letter's log-probability; most costly "
                    f"block {int(rec['most_costly'])}, largest ΔH block {int(rec['largest_delta_h'])}; "
                    f"{int(rec['n_calibration'])} calibration questions"
                ),
            )
        )
    return out
