"""The kNN figure: AUC with its interval per target and entropy measure, beside the dummy and chance."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.plots import style


def plot_auc_bars(table: pd.DataFrame, path: str | Path, *, title: str = "", protocol: str = "grouped") -> None:
    """kNN AUC with its 95% interval per target and entropy measure; one panel per model.

    The dummy's interval upper end is a short black line over each bar; chance is the
    dotted 0.5 line.  Rows of other fold protocols are left out (``protocol``).

    Args:
        table: :func:`entropy_lens.analysis.targets.knn_table` output.
        path: PNG path.
        title: Figure title.
        protocol: Which fold protocol to draw (``grouped``, the verdicts', or ``study``).
    """
    style.require_columns(
        table,
        ["model", "target", "split", "measure", "protocol", "auc_mean", "auc_low", "auc_high", "dummy_high"],
        "kNN",
    )
    table = table[table["protocol"] == protocol]
    if table.empty:
        raise ValueError(f"no kNN rows of protocol {protocol!r} to plot")
    split = table["split"].fillna("").astype(str)
    frame = table.assign(group=table["target"] + np.where(split != "", "/" + split, ""))
    models, measures = list(pd.unique(frame["model"])), list(pd.unique(frame["measure"]))
    most_groups = int(frame.groupby("model")["group"].nunique().max())
    width = 0.8 / len(measures)
    cols, rows = min(len(models), style.FACET_COLUMNS), math.ceil(len(models) / style.FACET_COLUMNS)
    fig = style.figure(cols * (1.5 + 0.25 * most_groups * len(measures)), 0.6 + 3.4 * rows)
    colors = dict(zip(measures, style.colors(len(measures)), strict=True))
    for ax, model in zip(style.facets(fig, len(models)), models, strict=True):
        sub = frame[frame["model"] == model]
        groups = list(pd.unique(sub["group"]))
        for m, measure in enumerate(measures):
            bars = sub[sub["measure"] == measure].set_index("group").reindex(groups)
            x = np.arange(len(groups)) + (m - (len(measures) - 1) / 2) * width
            err = [bars["auc_mean"] - bars["auc_low"], bars["auc_high"] - bars["auc_mean"]]
            ax.bar(x, bars["auc_mean"], width, yerr=err, color=colors[measure], label=measure, capsize=2)
            ax.hlines(bars["dummy_high"], x - width / 2, x + width / 2, colors="black", linewidth=1)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
        ax.set(ylim=(0.0, 1.05), ylabel="ROC AUC", title=str(model))
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(measures), 6), fontsize="small")
    fig.suptitle(title)
    style.save_figure(fig, path)
