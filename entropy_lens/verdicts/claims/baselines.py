"""Beyond the simplest feature: a separability row read against the feature that already separates its labels
(:mod:`entropy_lens.analysis.separability.baselines`).

The baselines table stays a table of its own (``knn_baselines``); here it becomes a reading of each separability
row (docs/verdicts.md, "Beyond the simplest feature"): the paired fold-AUC difference profile - feature on identical
folds, margin 5 AUC points, through the table's one decision. Where a claim has two features (the first token and
the prompt text; the top-letter probability and the final layer's entropy), the one with the smaller excess (the
stronger feature) decides. The table's input gives no rows of its own: the kNN rows read it
(:mod:`entropy_lens.verdicts.claims.separability`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from entropy_lens.analysis.separability.baselines import BASELINE_COLUMNS, BASELINE_READING, BASELINES
from entropy_lens.verdicts import decision
from entropy_lens.verdicts.claim import SHANNON
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, PaperInput
from entropy_lens.verdicts.readings import NotRead
from entropy_lens.verdicts.rows import Record, interval, text

# The keys a kNN row and its baseline rows share (the analysis tables' own columns).
KEYS = ("target", "model", "split")


def feature_reading(baselines: pd.DataFrame | None) -> Callable[[Record], decision.Null | NotRead | None]:
    """``record -> its beyond-the-simplest-feature null`` for the kNN rows (Shannon entropy) whose target has
    baselines (:data:`~entropy_lens.analysis.separability.baselines.BASELINES`): the stronger feature's paired
    excess; a :class:`~entropy_lens.verdicts.readings.NotRead` where no feature could be scored; ``None`` for a row
    without baselines (another target, a Rényi order, no baselines table)."""
    by_key = {} if baselines is None else {k: g for k, g in baselines.groupby(list(KEYS), sort=False, dropna=False)}

    def reading(rec: Record) -> decision.Null | NotRead | None:
        if baselines is None or str(rec["target"]) not in BASELINES or str(rec.get("measure")) != SHANNON:
            return None
        rows = by_key.get(tuple(text(rec.get(k)) if k == "split" else rec[k] for k in KEYS))
        if rows is None:
            return None
        scored = rows[np.isfinite(rows["beyond"].astype(float))]
        if scored.empty:
            notes = "; ".join(dict.fromkeys(t for t in rows["note"].map(text) if t))
            return NotRead(f"no feature could be scored ({notes or 'no folds'})")
        stronger = scored.loc[scored["beyond"].astype(float).idxmin()]
        return decision.Null(
            str(stronger["baseline"]),
            interval(stronger, "null_estimate", "null_low", "null_high"),
            interval(stronger, "beyond", "beyond_low", "beyond_high"),
            margin=decision.NULL_MARGINS["AUC"],
            observed=float(stronger["auc_mean"]),
        )

    return reading


BASELINES_TABLE = PaperInput(
    "baselines",
    "analysis.separability.baselines.baseline_table (read by the kNN rows: beyond the simplest feature)",
    BASELINE_READING,
    None,
    from_store=f"{LOGIT_LENS_ONLY}: the profile against its simplest feature",
    path="results/tables/knn_baselines.csv",
    columns=BASELINE_COLUMNS,
)
