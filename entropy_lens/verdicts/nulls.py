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

import numpy as np
import pandas as pd

from entropy_lens.analysis.expansion.planted import overlap_planted_rate, spearman_planted_rate
from entropy_lens.analysis.separability.nulls import planted_baseline_null_rate, planted_null_rate
from entropy_lens.core.intervals import cluster_bootstrap_mean, wilson_interval
from entropy_lens.skipping.drop_scores import planted_null_rate as planted_drop
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts import registry as C
from entropy_lens.verdicts.rows import ROW_NULL_COLUMNS
from entropy_lens.verdicts.skip_nulls import planted_null_rate as planted_skip
from entropy_lens.verdicts.skip_nulls import rank_planted_rate

log = logging.getLogger(__name__)

# A rule shows "beyond its null" on planted null data in at most this share of draws (a 95% interval's
# one-sided error is 2.5%); a rate whose own interval lies above it is logged as a rule that passes on nulls.
MAX_PLANTED_RATE = 0.05
DEFAULT_DRAWS = 100
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


def planted_share_at_bar(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0, *, bar: float = 0.25) -> float:
    """A share (accuracy, held-out share) whose true value is its bar: binomial draws at ``bar``, Wilson
    interval, the fixed-bar null (:func:`~entropy_lens.verdicts.decision.fixed_null`)."""
    rng = np.random.default_rng(seed)
    shown = 0
    for hits in rng.binomial(max(n, 1), bar, size=draws):
        low, high = wilson_interval(int(hits), max(n, 1))
        null = D.fixed_null("bar", D.Interval(hits / max(n, 1), low, high), bar, margin=D.NULL_MARGINS["share"])
        shown += D.beyond_null(null, n=n, unit="units").word == D.SHOWN
    return shown / draws


def planted_zero_mean(n: int, draws: int = DEFAULT_DRAWS, seed: int = 0) -> float:
    """A gap or shape statistic with no structure: per-unit values of mean 0, the prompt-cluster bootstrap
    of their mean (the interval the gap and shape rules read), null 0."""
    rng = np.random.default_rng(seed)
    shown = 0
    for draw in range(draws):
        values = rng.standard_normal(max(n, 2))
        low, high = cluster_bootstrap_mean(values, np.arange(values.size), n_boot=400, seed=draw)
        null = D.fixed_null("zero", D.Interval(float(values.mean()), low, high), 0.0, margin=D.NULL_MARGINS["gap"])
        shown += D.beyond_null(null, n=n, unit="units").word == D.SHOWN
    return shown / draws


# Claim id -> its planted-null simulator. Claims read by an analysis with a null of its own register theirs
# beside it (expansion, kNN, layer skipping).
PLANTED: dict[str, Planted] = {
    "accuracy": planted_share_at_bar,
    "family_heldout": lambda n, draws, seed: planted_share_at_bar(n, draws, seed, bar=0.5),
    "clustering": planted_zero_mean,
    "size_resolution": planted_zero_mean,
    "shape_gpt": planted_zero_mean,
    "shape_llama": planted_zero_mean,
    "skip_vs_random": lambda n, draws, seed: planted_skip(n, draws, seed, ks=(1,)),
    "skip_collapse": lambda n, draws, seed: planted_skip(n, draws, seed, ks=(1,)),
    "pruning_vs_random": lambda n, draws, seed: planted_skip(n, draws, seed, ks=(1,)),
    "skip_rank": rank_planted_rate,
    "drop_sets": planted_drop,
    "spearman": spearman_planted_rate,
    "overlap": overlap_planted_rate,
    **dict.fromkeys(
        ("task", "scrambled", "format", "family", "model_identity", "image_class", "mmlu_correct", "renyi"),
        lambda n, draws, seed: planted_null_rate(max(n, 8), draws, seed),
    ),
    "mmlu_correct_calibrated": lambda n, draws, seed: planted_null_rate(max(n, 8), draws, seed),
    **dict.fromkeys(
        ("task_beyond_baselines", "format_beyond_baselines", "correct_beyond_confidence"),
        lambda n, draws, seed: planted_baseline_null_rate(max(n, 8), draws, seed),
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
        claim_id = C.claim(str(rec["claim_id"])).id
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
