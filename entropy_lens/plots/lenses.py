"""Fit quality of each lens kind over depth: where the logit lens can be trusted, what a fitted lens buys, how its
fit improves with its corpus (the learning curve), and the entropy schedule each lens reads."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import pandas as pd

from entropy_lens.plots import style

if TYPE_CHECKING:
    from matplotlib.axes import Axes

KIND_COLORS = {"logit": "#4c72b0", "linear": "#dd8452", "tuned": "#55a868"}


def plot_lens_fit(frame: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """Held-out KL to the model's final distribution against normalized depth, one panel per model, one line
    (with its interval band over prompts) per lens kind, on a log scale (the final block's 0 is left out).

    Args:
        frame: :func:`entropy_lens.analysis.lens_fit.lens_fit_table` output.
        path: PNG path.
        title: Figure title.
    """
    style.require_columns(frame, ["model", "kind", "depth", "kl", "ci_low", "ci_high"], "lens fit")
    shown = frame[frame["depth"] < 1]
    models = list(pd.unique(shown["model"]))
    if not models:
        raise ValueError("the lens fit table has no block before the final one to plot")
    fig = style.figure(4.5 * min(len(models), style.FACET_COLUMNS), 3.4 * math.ceil(len(models) / style.FACET_COLUMNS))
    for ax, model in zip(style.facets(fig, len(models)), models, strict=True):
        rows = shown[shown["model"] == model]
        present = list(pd.unique(rows["kind"]))
        for kind in [k for k in KIND_COLORS if k in present] + [k for k in present if k not in KIND_COLORS]:
            grp = rows[rows["kind"] == kind].sort_values("depth")
            color = KIND_COLORS.get(str(kind), "black")
            ax.plot(grp["depth"], grp["kl"], color=color, marker=".", label=f"{kind} lens")
            ax.fill_between(grp["depth"], grp["ci_low"], grp["ci_high"], color=color, alpha=style.BAND_ALPHA)
        ax.set_yscale("log")
        ax.set(title=str(model), xlabel="normalized depth", ylabel="held-out KL to the final layer (nats)")
        ax.legend(fontsize="small")
    fig.suptitle(title)
    style.save_figure(fig, path)


def plot_lens_curve(curve: pd.DataFrame, path: str | Path, *, bar: float, title: str = "") -> None:
    """The learning curve: held-out KL per block (normalized depth) of the lens fitted on each nested prefix of its
    corpus, one line per size (darker: more tokens), one panel per model and fitted kind, on a log scale with the
    KL bar dashed.

    Args:
        curve: :func:`entropy_lens.analysis.lens_curve.curve_table` rows (several models and kinds).
        path: PNG path.
        bar: The KL bar (nats), drawn dashed.
        title: Figure title.
    """
    style.require_columns(curve, ["model", "kind", "fit_tokens", "depth", "kl"], "lens curve")
    shown = curve[curve["depth"] < 1]
    panels = list(dict.fromkeys(zip(shown["model"], shown["kind"], strict=True)))
    if not panels:
        raise ValueError("the learning curve has no block before the final one to plot")
    fig = style.figure(4.5 * min(len(panels), style.FACET_COLUMNS), 3.4 * math.ceil(len(panels) / style.FACET_COLUMNS))
    cmap = matplotlib.colormaps["viridis_r"]
    for ax, (model, kind) in zip(style.facets(fig, len(panels)), panels, strict=True):
        rows = shown[(shown["model"] == model) & (shown["kind"] == kind)]
        sizes = sorted(pd.unique(rows["fit_tokens"]))
        for i, tokens in enumerate(sizes):
            grp = rows[rows["fit_tokens"] == tokens].sort_values("depth")
            shade = cmap(0.15 + 0.85 * (i + 1) / len(sizes))
            ax.plot(grp["depth"], grp["kl"], color=shade, marker=".", label=f"{int(tokens):,} tokens")
        ax.axhline(bar, color="black", linestyle="--", linewidth=0.8)
        ax.set_yscale("log")
        ax.set(title=f"{model} ({kind} lens)", xlabel="normalized depth", ylabel="held-out KL (nats)")
        ax.legend(fontsize="x-small", title="fitted on", title_fontsize="x-small")
    fig.suptitle(title)
    style.save_figure(fig, path)


def draw_schedule(delta_ax: Axes, kl_ax: Axes, rows: pd.DataFrame, *, bar: float) -> None:
    """One model's schedule under each lens on two panels over the block index: ΔH per lens (filled markers where
    its ΔH is under the bar, hollow where not; its interval as a band), and each lens's held-out KL (log scale,
    filled where the block is under the bar) with the bar dashed.

    Args:
        delta_ax, kl_ax: The two panels.
        rows: One model's :func:`entropy_lens.analysis.schedule.schedule_table` rows.
        bar: The KL bar (nats).
    """
    style.require_columns(rows, ["lens", "block", "delta_h", "kl", "under_bar", "block_under_bar"], "schedule")
    for lens, grp in rows.groupby("lens", sort=False):
        grp = grp.sort_values("block")
        color = KIND_COLORS.get(str(lens), "black")
        under, block_under = grp["under_bar"].astype(bool), grp["block_under_bar"].astype(bool)
        delta_ax.plot(grp["block"], grp["delta_h"], color=color, linewidth=0.8, label=f"{lens} lens")
        if {"delta_h_low", "delta_h_high"} <= set(grp.columns):
            delta_ax.fill_between(grp["block"], grp["delta_h_low"], grp["delta_h_high"], color=color, alpha=0.15)
        for ax, column, filled in ((delta_ax, "delta_h", under), (kl_ax, "kl", block_under)):
            ax.scatter(grp["block"][filled], grp[column][filled], color=color, s=16, zorder=3)
            ax.scatter(grp["block"][~filled], grp[column][~filled], facecolors="none", edgecolors=color, s=16, zorder=3)
        kl_ax.plot(grp["block"][grp["kl"] > 0], grp["kl"][grp["kl"] > 0], color=color, linewidth=0.8)
    delta_ax.axhline(0.0, color="black", linewidth=0.8)
    kl_ax.axhline(bar, color="black", linestyle="--", linewidth=0.8)
    kl_ax.set_yscale("log")
    delta_ax.set(ylabel="ΔH on held-out questions (nats)")
    kl_ax.set(ylabel="held-out KL (nats)", xlabel="block")
    delta_ax.legend(fontsize="x-small", title=f"filled: under the {bar:g}-nat bar", title_fontsize="x-small")


def plot_lens_schedule(schedule: pd.DataFrame, path: str | Path, *, bar: float, title: str = "") -> None:
    """The schedule under each lens, one column of two panels per model (:func:`draw_schedule`).

    Args:
        schedule: :func:`entropy_lens.analysis.schedule.schedule_table` rows of one or more models.
        path: PNG path.
        bar: The KL bar (nats).
        title: Figure title.
    """
    style.require_columns(schedule, ["model"], "schedule")
    models = list(pd.unique(schedule["model"]))
    if not models:
        raise ValueError("the schedule table has no model to plot")
    fig = style.figure(4.8 * len(models), 6.0)
    axes = fig.subplots(2, len(models), squeeze=False, sharex="col")
    for column, model in enumerate(models):
        draw_schedule(axes[0, column], axes[1, column], schedule[schedule["model"] == model], bar=bar)
        axes[0, column].set_title(str(model))
    fig.suptitle(title)
    style.save_figure(fig, path)
