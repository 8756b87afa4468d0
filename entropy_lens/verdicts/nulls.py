"""The null-calibration table: per claim's rows, its null, the run's observed and null values, the excess
with its interval, and how often the rule shows "beyond its null" on data planted under that null.

Every row of the paper table that carries a null (:func:`entropy_lens.verdicts.rows.table_null`, or a
fixed bar: chance, the majority letter, no structure) becomes one row here. The planted-null rate is
simulated at the row's own sample size (its ``n_sources``) through the rule's own interval and decision
(:data:`PLANTED`); a rate above :data:`MAX_PLANTED_RATE` says the rule could pass on null data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import pandas as pd

from entropy_lens.analysis.expansion.planted import overlap_planted_rate, spearman_planted_rate
from entropy_lens.analysis.separability.nulls import baseline_planted_rate, knn_planted_rate
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.core.planted import Shown
from entropy_lens.skipping.drop_scores import drop_set_planted_rate
from entropy_lens.verdicts import decision, registry
from entropy_lens.verdicts.planted_nulls import DEFAULT_DRAWS, planted_share_at_bar, planted_zero_mean
from entropy_lens.verdicts.rows import ROW_NULL_COLUMNS
from entropy_lens.verdicts.skip_nulls import skip_planted_rate

log = logging.getLogger(__name__)

# A rule shows "beyond its null" on planted null data in at most this share of draws (a 95% interval's
# one-sided error is 2.5%); a rate whose own interval lies above it is logged as a rule that passes on nulls.
MAX_PLANTED_RATE = 0.05
NULLS_COLUMNS = (
    "claim_id",
    "claim",
    "role",
    "model",
    "split",
    "measure",
    "unit",
    "n_sources",
    "observed",
    *ROW_NULL_COLUMNS,
    "planted_null_rate",
    "planted_low",
    "planted_high",
    "planted_draws",
    "planted_n",
)

# A planted-null simulator: (units, draws, seed) -> share of draws shown beyond the null.
Planted = Callable[[int, int, int], float]


def _shown(statistic: str) -> Shown:
    """The one decision on an excess over the null, at the statistic's margin."""
    return partial(decision.shown_beyond, margin=decision.NULL_MARGINS[statistic])


# Claim id -> its planted-null simulator. Claims read by an analysis with a null of its own register theirs
# beside it (expansion, kNN, layer skipping).
PLANTED: dict[str, Planted] = {
    "accuracy": planted_share_at_bar,
    "family_heldout": lambda n, draws, seed: planted_share_at_bar(n, draws, seed, bar=0.5),
    "clustering": planted_zero_mean,
    "size_resolution": planted_zero_mean,
    "shape_gpt": planted_zero_mean,
    "shape_llama": planted_zero_mean,
    "skip_vs_random": lambda n, draws, seed: skip_planted_rate(n, draws, seed, ks=(1,)),
    "skip_collapse": lambda n, draws, seed: skip_planted_rate(n, draws, seed, ks=(1,)),
    "pruning_vs_random": lambda n, draws, seed: skip_planted_rate(n, draws, seed, ks=(1,)),
    "skip_rank": planted_zero_mean,
    "drop_sets": lambda n, draws, seed: drop_set_planted_rate(n, draws, seed, shown=_shown("accuracy")),
    "spearman": lambda n, draws, seed: spearman_planted_rate(n, draws, seed, shown=_shown("rho")),
    "overlap": lambda n, draws, seed: overlap_planted_rate(n, draws, seed, shown=_shown("containment")),
    **dict.fromkeys(
        ("task", "scrambled", "format", "family", "model_identity", "image_class", "mmlu_correct", "renyi"),
        lambda n, draws, seed: knn_planted_rate(max(n, 8), draws, seed, shown=_shown("AUC")),
    ),
    "mmlu_correct_calibrated": lambda n, draws, seed: knn_planted_rate(max(n, 8), draws, seed, shown=_shown("AUC")),
    **dict.fromkeys(
        ("task_beyond_baselines", "format_beyond_baselines", "correct_beyond_confidence"),
        lambda n, draws, seed: baseline_planted_rate(max(n, 8), draws, seed, shown=_shown("AUC")),
    ),
}
# Claims whose rows carry no null of their own, and why; every other claim of the registry has a PLANTED entry
# (tests/test_claims.py fails on a claim in neither).
NO_NULL_OF_ITS_OWN = {
    "skip_vs_pruning": "expansion against pruning: each side's row against random blocks is its null",
}
# Simulators that run the whole analysis per draw take fewer draws (each skip draw reruns the comparisons).
MAX_DRAWS = {"skip_vs_random": 40, "skip_collapse": 40, "pruning_vs_random": 40, "drop_sets": 40}
# ... and at most this many units (the lens on random logits costs about 0.4 s per prompt and draw); the
# table's ``planted_n`` says where a row's own sample size was capped.
MAX_UNITS = {"spearman": 120, "overlap": 120, **dict.fromkeys(("task", "scrambled", "format", "mmlu_correct"), 400)}


def nulls_table(
    table: pd.DataFrame, planted: Mapping[str, Planted] | None = None, *, draws: int = DEFAULT_DRAWS, seed: int = 0
) -> pd.DataFrame:
    """One row per paper-table row that carries a null, with the planted-null rate of its claim's rule.

    Args:
        table: :func:`entropy_lens.verdicts.table.paper_table` rows.
        planted: Claim id -> simulator (default :data:`PLANTED`); a claim without one gets NaN.
        draws: Planted draws per row.
        seed: Seed of the first draw.
    """
    planted = PLANTED if planted is None else planted
    has = table[table.get("beyond_verdict", pd.Series("", index=table.index)).astype(str) != ""]
    rates: dict[tuple[str, int], float] = {}
    out = []
    for rec in has.to_dict("records"):
        claim_id = registry.claim(str(rec["claim_id"])).id
        n = int(rec["n_sources"]) if pd.notna(rec["n_sources"]) else 0
        n_sim = min(n, MAX_UNITS.get(claim_id, n))
        key = (claim_id, n_sim)
        used = min(draws, MAX_DRAWS.get(claim_id, draws)) if claim_id in planted else 0
        if key not in rates:
            rates[key] = planted[claim_id](n_sim, used, seed) if used else float("nan")
        rate = rates[key]
        low, high = wilson_interval(round(rate * used), used) if used else (np.nan, np.nan)
        out.append(
            {
                "claim_id": claim_id,
                **{c: rec[c] for c in ("claim", "role", "model", "split", "measure", "unit", "n_sources")},
                "observed": rec["estimate"],
                **{c: rec[c] for c in ROW_NULL_COLUMNS},
                "planted_null_rate": rate,
                "planted_low": low,
                "planted_high": high,
                "planted_draws": used,
                "planted_n": n_sim if used else 0,
            }
        )
    frame = pd.DataFrame(out, columns=list(NULLS_COLUMNS))
    loud = frame[frame["planted_low"] > MAX_PLANTED_RATE]
    for rec in loud.to_dict("records"):
        log.warning(
            "%s (%s): planted-null rate %.2f above %.2f",
            rec["claim"],
            rec["model"],
            rec["planted_null_rate"],
            MAX_PLANTED_RATE,
        )
    return frame
