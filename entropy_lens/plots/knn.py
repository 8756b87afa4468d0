"""The kNN figure: AUC with its interval per target and entropy measure, beside the dummy and chance."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.analysis.separability.knn import POOLED_MODEL
from entropy_lens.plots import style

UNSCORED = "not scored"
DUMMY_LABEL = "dummy classifier: upper end of its 95% CI"
CHANCE_LABEL = "chance (0.5)"
POOLED_TITLE = "all models pooled"
MAX_NOTES = 3


def plot_auc_bars(
    table: pd.DataFrame,
    path: str | Path,
    *,
    title: str = "",
    protocol: str = "grouped",
    names: Mapping[str, str] | None = None,
) -> None:
    """kNN AUC with its 95% interval per target and entropy measure; one panel per model.

    The dummy's interval upper end is a short black line over each bar; chance is the
    dotted 0.5 line; both are in the legend.  A row that could not be scored (NaN AUC) is
    marked "not scored" where its bar would stand, and the reasons (the table's ``note``)
    are written under its panel.  Rows of other fold protocols are left out (``protocol``).

    Args:
        table: :func:`entropy_lens.analysis.separability.targets.knn_table` output.
        path: PNG path.
        title: Figure title.
        protocol: Which fold protocol to draw (``grouped``, the verdicts', or ``study``).
        names: Display names of targets, e.g. ``{"family": "model identity"}`` where each family
            has one model (the name the verdicts use then).
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
    target = table["target"].map(lambda t: (names or {}).get(t, t))
    frame = table.assign(group=target + np.where(split != "", "/" + split, ""))
    models, measures = list(pd.unique(frame["model"])), list(pd.unique(frame["measure"]))
    most_groups = int(frame.groupby("model")["group"].nunique().max())
    width = 0.8 / len(measures)
    cols, rows = min(len(models), style.FACET_COLUMNS), math.ceil(len(models) / style.FACET_COLUMNS)
    fig = style.figure(cols * (1.5 + 0.25 * most_groups * len(measures)), 0.9 + 3.4 * rows)
    colors = dict(zip(measures, style.colors(len(measures)), strict=True))
    for ax, model in zip(style.facets(fig, len(models)), models, strict=True):
        sub = frame[frame["model"] == model]
        groups = list(pd.unique(sub["group"]))
        for m, measure in enumerate(measures):
            drawn = sub[sub["measure"] == measure]
            bars = drawn.set_index("group").reindex(groups)
            x = np.arange(len(groups)) + (m - (len(measures) - 1) / 2) * width
            err = [bars["auc_mean"] - bars["auc_low"], bars["auc_high"] - bars["auc_mean"]]
            ax.bar(x, bars["auc_mean"], width, yerr=err, color=colors[measure], label=measure, capsize=2)
            ax.hlines(bars["dummy_high"], x - width / 2, x + width / 2, colors="black", linewidth=1, label=DUMMY_LABEL)
            unscored = bars["auc_mean"].isna().to_numpy() & np.isin(groups, drawn["group"])
            for xi in x[unscored]:
                ax.text(xi, 0.02, UNSCORED, rotation=90, ha="center", va="bottom", fontsize="x-small", color="dimgrey")
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label=CHANCE_LABEL)
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
        ax.set(ylim=(0.0, 1.05), ylabel="ROC AUC", title=POOLED_TITLE if model == POOLED_MODEL else str(model))
        ax.set_xlabel(_unscored_note(sub), fontsize="x-small", color="dimgrey", wrap=True)
    handles = dict(zip(*reversed(_legend_entries(fig)), strict=True))
    fig.legend(
        list(handles.values()), list(handles), loc="outside lower center", ncols=min(len(handles), 4), fontsize="small"
    )
    fig.suptitle(title)
    style.save_figure(fig, path)


def _legend_entries(fig) -> tuple[list, list[str]]:
    """Every labelled artist of every panel, each label once (a panel may lack a series another has)."""
    handles, labels = [], []
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def _unscored_note(panel: pd.DataFrame) -> str:
    """Which of a panel's groups were not scored and why (the rows' ``note``); ``""`` when all were."""
    unscored = panel[panel["auc_mean"].isna()]
    notes = []
    for group, rows in unscored.groupby("group", sort=False):
        reasons = [r for r in pd.unique(rows["note"].dropna().astype(str)) if r] if "note" in rows else []
        notes.append(f"{group} ({'; '.join(reasons[:MAX_NOTES]) or 'no AUC, see knn_auc.md'})")
    return f"{UNSCORED}: " + ", ".join(notes) if notes else ""
