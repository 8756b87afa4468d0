"""Fit quality of each lens kind over depth: where the logit lens can be trusted, and what a fitted lens buys."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from entropy_lens.plots import style

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
