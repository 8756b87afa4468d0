"""Figures of which blocks to drop: each pruning criterion's ranking beside the measured cost, and the exit curve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from entropy_lens.plots import style
from entropy_lens.skipping.criteria import CRITERIA, CRITERION_TEXT, criterion_ranks
from entropy_lens.skipping.exit import LINEAR, LOGIT

EXIT_COLORS = {"ll": "tab:gray", "calibrated": "tab:blue"}
EXIT_LINES = {LOGIT: "-", LINEAR: "--"}


def plot_criteria(skip_map: pd.DataFrame, criteria: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """The cost of skipping each block alone (top) and, beneath it, every criterion's rank of the blocks.

    Args:
        skip_map: One model's and measure's rows of :func:`entropy_lens.skipping.criticality.skip_map`.
        criteria: One model's rows of :func:`entropy_lens.skipping.criteria.criteria_table`.
        path: PNG path (an SVG beside it).
        title: Figure title.
    """
    style.require_columns(skip_map, ["layer", "d_logprob", "d_logprob_low", "d_logprob_high"], "skip map")
    style.require_columns(criteria, ["layer", *CRITERIA], "criteria")
    rows = skip_map.sort_values("layer")
    blocks = [int(b) for b in rows["layer"] if b in set(criteria["layer"])]
    rows = rows.set_index("layer").loc[blocks]
    cost = -rows["d_logprob"].to_numpy(float)  # a drop of the gold letter's log-probability, positive
    err = [cost + rows["d_logprob_high"].to_numpy(float), -rows["d_logprob_low"].to_numpy(float) - cost]
    ranks = criterion_ranks(criteria, blocks)
    measured = pd.Series(cost, index=blocks).rank(ascending=False, method="min").astype(int)
    ranks.loc["measured cost"] = measured.to_numpy()
    fig = style.figure(max(6.0, 0.25 * len(blocks) + 2.5), 6.0)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[1.0, 1.0])
    top.bar(blocks, cost, color="0.6")
    top.errorbar(blocks, cost, yerr=np.clip(err, 0, None), fmt="none", ecolor="0.3", capsize=2)
    top.axhline(0.0, color="black", linewidth=0.8)
    top.set(ylabel="drop of log p(gold), nats", title=title)
    image = bottom.imshow(ranks.to_numpy(float), aspect="auto", cmap="viridis_r", extent=_extent(blocks, len(ranks)))
    bottom.set_yticks(range(len(ranks)), [CRITERION_TEXT.get(c, c) for c in ranks.index])
    bottom.set(xlabel="block skipped alone")
    fig.colorbar(image, ax=bottom, label="rank (1: most critical)")
    style.save_figure(fig, path)


def _extent(blocks: list[int], n_rows: int) -> tuple[float, float, float, float]:
    return (min(blocks) - 0.5, max(blocks) + 0.5, n_rows - 0.5, -0.5)


def plot_exit_curve(curve: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """MMLU accuracy and the gold letter's log-probability read at every block, beside the lens entropy; one line
    style per lens (the logit lens solid, the linear lens dashed where fitted).

    Args:
        curve: One model's rows of :func:`entropy_lens.skipping.exit.exit_curve`.
        path: PNG path (an SVG beside it).
        title: Figure title.
    """
    style.require_columns(
        curve, ["lens", "measure", "position", "accuracy", "ci_low", "ci_high", "gold_logprob", "entropy"], "exit"
    )
    fig = style.figure(6.0, 6.5)
    axes = fig.subplots(3, 1, sharex=True)
    for (lens, measure), rows in curve.groupby(["lens", "measure"], sort=False):
        rows = rows.sort_values("position")
        color, line = EXIT_COLORS.get(str(measure), "tab:orange"), EXIT_LINES.get(str(lens), ":")
        axes[0].plot(
            rows["position"],
            100 * rows["accuracy"],
            marker=".",
            color=color,
            linestyle=line,
            label=f"{measure}, {lens}",
        )
        axes[0].fill_between(rows["position"], 100 * rows["ci_low"], 100 * rows["ci_high"], color=color, alpha=0.15)
    for lens, rows in curve.groupby("lens", sort=False):
        first = rows[rows["measure"] == rows["measure"].iloc[0]].sort_values("position")
        line = EXIT_LINES.get(str(lens), ":")
        axes[1].plot(
            first["position"], first["gold_logprob"], marker=".", color="tab:green", linestyle=line, label=lens
        )
        axes[2].plot(first["position"], first["entropy"], marker=".", color="tab:purple", linestyle=line, label=lens)
    axes[0].axhline(25.0, color="black", linestyle=":", linewidth=0.8)
    axes[0].set(ylabel="accuracy (%)", title=title)
    axes[0].legend(fontsize="small", title="letters, lens", title_fontsize="small")
    axes[1].axhline(np.log(0.25), color="black", linestyle=":", linewidth=0.8)
    axes[1].set(ylabel="log p(gold) among 4")
    axes[2].set(ylabel="lens entropy (nats)", xlabel="blocks run (0: embeddings)")
    axes[2].legend(fontsize="small", title="lens", title_fontsize="small")
    axes[2].xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are whole blocks
    style.save_figure(fig, path)
