"""The MMLU accuracy figure: the letters each measure answered, and accuracy beside chance and the majority letter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.plots import style

LETTER_COLORS = {"A": "tab:blue", "B": "tab:orange", "C": "tab:green", "D": "tab:purple"}


def plot_letter_bias(
    table: pd.DataFrame, path: str | Path, *, title: str = "MMLU: letters answered and accuracy"
) -> None:
    """Per model: the share of each answered letter per style and measure, and the accuracy.

    Top row: stacked bars of the letters each measure answered (raw log-likelihood,
    calibrated, parsed) beside the gold letters' share of the majority letter (dashed).
    Bottom row: accuracy with its Wilson 95% interval, chance (dotted) and the
    majority-letter baseline (dashed).

    Args:
        table: :func:`entropy_lens.answers.accuracy.accuracy_table` output.
        path: PNG path.
        title: Figure title.
    """
    letters = list(LETTER_COLORS)
    style.require_columns(
        table,
        [
            "model",
            "style",
            "measure",
            "accuracy",
            "ci_low",
            "ci_high",
            "chance",
            "majority_baseline",
            *(f"answered_{x}" for x in letters),
        ],
        "MMLU accuracy",
    )
    models = list(pd.unique(table["model"]))
    fig = style.figure(max(4.0, 3.2 * len(models)), 6.0)
    axes = fig.subplots(2, len(models), squeeze=False)
    for col, model in enumerate(models):
        rows = table[table["model"] == model].reset_index(drop=True)
        names = (rows["style"] + "\n" + rows["measure"]).tolist()
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for letter in letters:
            share = rows[f"answered_{letter}"].to_numpy(float)
            axes[0, col].bar(x, share, bottom=bottom, color=LETTER_COLORS[letter], label=letter)
            bottom += share
        axes[0, col].set(title=str(model), ylim=(0, 1), ylabel="share of answers" if col == 0 else "")
        axes[0, col].set_xticks(x, names, fontsize="x-small", rotation=90)
        err = [rows["accuracy"] - rows["ci_low"], rows["ci_high"] - rows["accuracy"]]
        axes[1, col].errorbar(x, rows["accuracy"], yerr=err, fmt="o", color="black", capsize=3)
        axes[1, col].hlines(rows["majority_baseline"], x - 0.4, x + 0.4, colors="tab:red", linestyles="--")
        axes[1, col].axhline(float(rows["chance"].iloc[0]), color="grey", linestyle=":")
        axes[1, col].set(ylim=(0, 1), ylabel="accuracy (95% CI)" if col == 0 else "")
        axes[1, col].set_xticks(x, names, fontsize="x-small", rotation=90)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper right", title="answered", fontsize="small")
    fig.suptitle(f"{title}\n(dashed red: majority-letter baseline; dotted: chance)", fontsize="medium")
    style.save_figure(fig, path)
