"""Accuracy statistics of scored answers, with intervals over questions.

* :func:`accuracy_table`: MMLU accuracy per model, style and measure, its Wilson interval,
  chance, the majority-letter baseline and the letters the model answered;
* :func:`condition_table` / :func:`skip_differences` / :func:`skip_tables`: the
  layer-skip experiment's accuracy per condition and the paired differences (expansion
  minus random, expansion minus pruning) with bootstrap intervals over questions.

Pure pandas: the forward passes live in :mod:`entropy_lens.answers.scoring` and
:mod:`entropy_lens.answers.skipping`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from entropy_lens.answers.conditions import EXPANSION, INTACT, PRUNING, RANDOM
from entropy_lens.answers.letters import MEASURES, UNPARSED
from entropy_lens.core.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    cluster_bootstrap_mean,
    paired_bootstrap,
    wilson_interval,
)
from entropy_lens.prompts.datasets import ANSWER, LETTERS, QUESTION_ID, STYLE
from entropy_lens.store.schema import MODEL

CORRECT_COLUMNS = ("condition", "kind", "k", "replicate", "layers", "question", "measure", "correct")
DIFFERENCE_COLUMNS = (
    "measure",
    "k",
    "versus",
    "n",
    "difference",
    "ci_low",
    "ci_high",
    "intact",
    "intact_low",
    "intact_high",
    "chance",
)


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


def condition_table(correct: pd.DataFrame, *, n_choices: int = 4, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Accuracy per measure and condition with its Wilson interval over questions.

    Args:
        correct: Rows of :func:`score_conditions`.
        n_choices: Choices per question (chance is ``1 / n_choices``).
        level: Coverage.

    Returns:
        ``measure, condition, kind, k, replicate, layers, n, accuracy, ci_low, ci_high, chance``.
    """
    keys = ["measure", "condition", "kind", "k", "replicate", "layers"]
    rows = []
    for key, group in correct.groupby(keys, sort=False):
        hits, n = int(group["correct"].sum()), len(group)
        lo, hi = wilson_interval(hits, n, level)
        rows.append({**dict(zip(keys, key, strict=True)), "n": n, "accuracy": hits / n, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows).assign(chance=1.0 / n_choices)


def skip_differences(
    correct: pd.DataFrame,
    *,
    n_choices: int = 4,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Expansion minus random and expansion minus pruning, paired over questions.

    For each measure and ``k``, the per-question accuracy with the expansion layers
    skipped is compared with the mean over the random sets of the same ``k`` and with
    the pruning skip; questions are resampled together (:func:`entropy_lens.core.intervals.paired_bootstrap`).
    The intact accuracy and its Wilson interval stand beside, since a model at chance
    has nothing to lose.

    Returns:
        Columns :data:`DIFFERENCE_COLUMNS` (accuracies 0-1, negative = expansion hurts more).
    """
    rows = []
    for measure, by_measure in correct.groupby("measure", sort=False):
        wide = by_measure.pivot_table(index="question", columns="condition", values="correct", aggfunc="first")
        intact = wide.get(INTACT)
        for k in sorted(by_measure.loc[by_measure["kind"] == EXPANSION, "k"].unique()):
            pairs = _k_differences(by_measure, wide, intact, int(k), n_boot, seed, level)
            rows += [{"measure": measure, **pair, "chance": 1.0 / n_choices} for pair in pairs]
    return pd.DataFrame(rows, columns=list(DIFFERENCE_COLUMNS))


def _k_differences(by_measure, wide, intact, k: int, n_boot: int, seed: int, level: float) -> list[dict]:
    of_k = by_measure[by_measure["k"] == k]
    names = {
        kind: of_k.loc[of_k["kind"] == kind, "condition"].unique().tolist() for kind in (EXPANSION, PRUNING, RANDOM)
    }
    expansion = wide[names[EXPANSION][0]].to_numpy(float)
    versus = {
        RANDOM: wide[names[RANDOM]].mean(axis=1).to_numpy(float),
        PRUNING: wide[names[PRUNING][0]].to_numpy(float),
    }
    hits = int(intact.sum()) if intact is not None else 0
    lo_i, hi_i = wilson_interval(hits, len(intact), level) if intact is not None else (np.nan, np.nan)
    base = {"k": k, "n": expansion.size, "intact": hits / len(intact) if intact is not None else np.nan}
    out = []
    for kind, other in versus.items():
        diff, lo, hi = paired_bootstrap(expansion, other, n_boot=n_boot, seed=seed, level=level)
        out.append(
            {
                **base,
                "versus": kind,
                "difference": diff,
                "ci_low": lo,
                "ci_high": hi,
                "intact_low": lo_i,
                "intact_high": hi_i,
            }
        )
    return out


def skip_tables(
    correct: pd.DataFrame, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, level: float = DEFAULT_LEVEL
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per model: :func:`condition_table` and :func:`skip_differences` of its ``correct`` rows.

    Args:
        correct: :func:`score_conditions` rows of one or more models, with a ``model`` column.
    """
    accuracy = correct.groupby("model", sort=False)[list(CORRECT_COLUMNS)].apply(
        lambda rows: condition_table(rows, level=level)
    )
    differences = correct.groupby("model", sort=False)[list(CORRECT_COLUMNS)].apply(
        lambda rows: skip_differences(rows, n_boot=n_boot, seed=seed, level=level)
    )
    return accuracy.reset_index(level=0).reset_index(drop=True), differences.reset_index(level=0).reset_index(drop=True)
