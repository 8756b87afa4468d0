"""Accuracy statistics of scored answers, with intervals over questions.

* :func:`accuracy_table`: MMLU accuracy per model, style and measure, its Wilson interval,
  chance, the majority-letter baseline and the letters the model answered.

The layer-skip experiment's statistics are :mod:`entropy_lens.skipping.criticality`.

Pure pandas: the forward passes live in :mod:`entropy_lens.answers.scoring`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.answers.letters import MEASURES, UNPARSED
from entropy_lens.core.frames import Reading
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    cluster_bootstrap_mean,
    wilson_interval,
)
from entropy_lens.prompts.datasets import ANSWER, LETTERS, QUESTION_ID, STYLE
from entropy_lens.store.schema import MODEL


def accuracy_table(scores: pd.DataFrame, *, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Accuracy per model, style and measure, with its Wilson interval and the letter bias.

    The unit is the question: within a style every question appears once, and the
    interval is Wilson's.  With several styles a pooled row (style :data:`ALL_STYLES`)
    follows each model; its prompts are nested in questions, so its interval is a
    bootstrap over questions.  Beside each accuracy stand chance (1/4), the
    majority-letter baseline (the share of the most common gold letter among these
    questions: what always answering it would score) and the letters the model answered.

    Args:
        scores: Rows of :func:`score_prompts` (any number of models).
        level: Coverage of the interval.

    Returns:
        Columns :data:`ACCURACY_COLUMNS`; ``accuracy`` counts answered questions only
        (``n`` of them; ``n_unparsed`` completions had no letter).
    """
    missing = [c for c in (MODEL, STYLE, ANSWER, *(m[0] for m in MEASURES.values())) if c not in scores.columns]
    if missing:
        raise ValueError(f"scores lack columns {missing}; they have {list(scores.columns)}")
    rows = []
    for model, by_model in scores.groupby(MODEL, sort=False):
        groups = [(str(style), group) for style, group in by_model.groupby(STYLE, sort=False)]
        groups += [(ALL_STYLES, by_model)] if len(groups) > 1 else []
        rows += [
            _accuracy_row(group, str(model), style, measure, level) for style, group in groups for measure in MEASURES
        ]
    return pd.DataFrame(rows, columns=list(ACCURACY_COLUMNS))


ALL_STYLES = "all styles"


def _accuracy_row(group: pd.DataFrame, model: str, style: str, measure: str, level: float) -> dict:
    letter_col, correct_col = MEASURES[measure]
    answered = group[group[letter_col] != UNPARSED]
    n, hits = len(answered), int(answered[correct_col].sum())
    if style == ALL_STYLES and n:
        lo, hi = cluster_bootstrap_mean(
            answered[correct_col].to_numpy(float), answered[QUESTION_ID].to_numpy(), level=level
        )
    else:
        lo, hi = wilson_interval(hits, n, level)
    gold = group[ANSWER].value_counts(normalize=True)
    shares = answered[letter_col].value_counts(normalize=True).reindex(list(LETTERS), fill_value=0.0)
    return {
        "model": model,
        "style": style,
        "measure": measure,
        "n": n,
        "n_unparsed": int(len(group) - n),
        "accuracy": hits / n if n else np.nan,
        "ci_low": lo,
        "ci_high": hi,
        "chance": 1.0 / len(LETTERS),
        "majority_letter": str(gold.index[0]),
        "majority_baseline": float(gold.iloc[0]),
        **{f"answered_{x}": float(shares[x]) for x in LETTERS},
        "top_letter": str(shares.idxmax()) if n else "",
        "top_share": float(shares.max()) if n else np.nan,
    }


ACCURACY_COLUMNS = (
    "model",
    "style",
    "measure",
    "n",
    "n_unparsed",
    "accuracy",
    "ci_low",
    "ci_high",
    "chance",
    "majority_letter",
    "majority_baseline",
    *(f"answered_{x}" for x in LETTERS),
    "top_letter",
    "top_share",
)
# The table as a standard frame (entropy_lens.core.frames): accuracy over questions, per style.
ACCURACY_READING = Reading("accuracy", split="style")
