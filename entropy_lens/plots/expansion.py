"""Figures of nucleus expansion: Delta H against the nucleus-size change, and adjacent-layer overlap over depth."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from entropy_lens.plots import style

SCATTER_ALPHA = 0.35
POINT_SIZE = 4.0
# Each model's points are drawn in this many evenly strided layers, the models' layers in turn.
INTERLEAVE = 8
OVERLAP_COLORS = {"jaccard": "tab:blue", "containment": "tab:orange"}
# The overlap verdict's threshold: more than half of the top-p set is shared with the next layer.
OVERLAP_THRESHOLD = 0.5


def plot_expansion(
    points: pd.DataFrame, path: str | Path, *, spearman: pd.DataFrame | None = None, title: str = ""
) -> None:
    """Scatter of ``Delta H`` against the nucleus-size change, coloured by model.

    Args:
        points: :func:`entropy_lens.analysis.expansion.spearman.expansion_points` output.
        path: PNG path.
        spearman: Optional :func:`~entropy_lens.analysis.expansion.spearman.expansion_spearman` output
            to put rho and n in the legend.
        title: Figure title.
    """
    style.require_columns(points, ["model", "delta_nucleus", "delta_entropy"], "expansion points")
    rho = (
        {}
        if spearman is None
        else dict(zip(spearman["model"], zip(spearman["spearman"], spearman["n"], strict=True), strict=True))
    )
    fig = style.figure(5.5, 4.5)
    ax = fig.subplots()
    models = list(pd.unique(points["model"]))
    labels = {
        model: f"{model} (n={int((points['model'] == model).sum()):,})"
        if model not in rho
        else f"{model} (ρ={rho[model][0]:.3f}, n={rho[model][1]:,})"
        for model in models
    }
    colors = dict(zip(models, style.colors(len(models)), strict=True))
    # Layers of every model in turn, so that no model's points lie under all the others'.
    for layer in range(INTERLEAVE):
        for model in models:
            grp = points[points["model"] == model].iloc[layer::INTERLEAVE]
            ax.scatter(
                grp["delta_nucleus"],
                grp["delta_entropy"],
                s=POINT_SIZE,
                color=colors[model],
                alpha=SCATTER_ALPHA,
                label=labels[model],
                edgecolors="none",
            )
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set(xlabel="Δ nucleus size (tokens, symlog)", ylabel="ΔH (nats)", title=title)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels()), strict=True))  # each model once
    ax.legend(list(handles.values()), list(handles), fontsize="small", markerscale=3)
    style.save_figure(fig, path)


def plot_overlap_depth(frame: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """Adjacent-layer nucleus overlap against normalized depth, one panel per model.

    Each statistic (Jaccard, containment) is a line of per-layer means with its interval
    band; the dashed line marks the threshold "more than half shared" (0.5).

    Args:
        frame: :func:`entropy_lens.analysis.expansion.overlap.overlap_by_depth` output.
        path: PNG path.
        title: Figure title.
    """
    style.require_columns(frame, ["model", "statistic", "depth", "mean", "ci_low", "ci_high"], "overlap by depth")
    models, statistics = list(pd.unique(frame["model"])), list(pd.unique(frame["statistic"]))
    fig = style.figure(4.5 * min(len(models), style.FACET_COLUMNS), 3.4 * math.ceil(len(models) / style.FACET_COLUMNS))
    colors = {s: OVERLAP_COLORS.get(s, c) for s, c in zip(statistics, style.colors(len(statistics)), strict=True)}
    for ax, model in zip(style.facets(fig, len(models)), models, strict=True):
        for statistic, grp in frame[frame["model"] == model].groupby("statistic", sort=False):
            grp = grp.sort_values("depth")
            ax.plot(grp["depth"], grp["mean"], color=colors[statistic], marker=".", label=str(statistic))
            ax.fill_between(
                grp["depth"], grp["ci_low"], grp["ci_high"], color=colors[statistic], alpha=style.BAND_ALPHA
            )
        ax.axhline(OVERLAP_THRESHOLD, color="grey", linestyle="--", linewidth=1, label="half shared")
        ax.set(title=str(model), xlabel="normalized depth", ylabel="overlap of layers l, l+1", ylim=(0.0, 1.02))
        ax.legend(fontsize="small")
    fig.suptitle(title)
    style.save_figure(fig, path)
