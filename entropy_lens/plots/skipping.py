"""Figures of the layer-skip experiment: the per-block criticality map and the profiles under each skip condition."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from entropy_lens.analysis.schedule import KL_BAR
from entropy_lens.plots import style
from entropy_lens.plots.lenses import draw_schedule
from entropy_lens.skipping.criticality import MIN_SKIP_EFFECT as MIN_SKIP_DROP

SKIP_COLORS = {"expansion": "tab:red", "pruning": "tab:blue", "random": "tab:gray", "intact": "black"}
READING_COLORS = {"safe": "tab:green", "costly": "tab:red", "unclear": "tab:gray"}


def plot_skip_map(
    rows: pd.DataFrame, path: str | Path, *, title: str = "", schedule: pd.DataFrame | None = None
) -> None:
    """The criticality map of one model and measure: per block, its mean Delta H and what skipping it costs.

    Three panels over the block index: mean Delta H at the answer position (bars; the expansion
    and pruning blocks of each variant coloured; a block no selection may skip, block 0, hatched
    and named), the change of accuracy and the change of the
    gold letter's log-probability when the block is skipped alone (points with 95% intervals,
    coloured by the reading safe / costly / unclear); with ``schedule``, two more: each block's ΔH under the logit
    lens and each fitted lens on the lens corpus's held-out questions, and each lens's held-out KL, filled where
    under the KL bar (:func:`entropy_lens.plots.lenses.draw_schedule`).

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.skipping.criticality.skip_map`.
        path: PNG path.
        title: Figure title.
        schedule: The model's rows of :func:`entropy_lens.analysis.schedule.schedule_table`, where a lens is fitted.
    """
    columns = ["layer", "delta_h", "d_accuracy", "d_accuracy_low", "d_accuracy_high", "d_logprob", "reading", "marks"]
    style.require_columns(rows, [*columns, "d_logprob_low", "d_logprob_high"], "skip map")
    rows = rows.sort_values("layer")
    marks = rows["marks"].fillna("").astype(str)
    bar_colors = [
        SKIP_COLORS["expansion"] if "expansion" in m else SKIP_COLORS["pruning"] if "pruning" in m else "0.6"
        for m in marks
    ]
    panels = 3 if schedule is None else 5
    fig = style.figure(max(6.0, 0.22 * len(rows) + 2.0), 7.0 if schedule is None else 11.0)
    axes = fig.subplots(panels, 1, sharex=True)
    axes[0].bar(rows["layer"], rows["delta_h"].fillna(0.0), color=bar_colors)
    axes[0].axhline(0.0, color="black", linewidth=0.8)
    axes[0].set(ylabel="mean ΔH (nats)")
    for layer in rows.loc[~rows["eligible"].astype(bool), "layer"] if "eligible" in rows else []:
        # block 0: no ΔH, never selected nor drawn; its cost is in the panels below
        axes[0].axvspan(layer - 0.45, layer + 0.45, color="0.85", hatch="//", zorder=0)
        axes[0].annotate("no ΔH:\nnot eligible", (layer, 0.0), ha="center", va="bottom", fontsize="x-small")
    fig.suptitle(title)
    colors = [READING_COLORS.get(r, "tab:gray") for r in rows["reading"]]
    for ax, name, scale in ((axes[1], "d_accuracy", 100.0), (axes[2], "d_logprob", 1.0)):
        value = rows[name].to_numpy(float) * scale
        err = [
            value - rows[f"{name}_low"].to_numpy(float) * scale,
            rows[f"{name}_high"].to_numpy(float) * scale - value,
        ]
        ax.errorbar(rows["layer"], value, yerr=err, fmt="none", ecolor="0.5", capsize=2)
        ax.scatter(rows["layer"], value, c=colors, s=18, zorder=3)
        ax.axhline(0.0, color="black", linewidth=0.8)
    axes[1].axhline(-100.0 * MIN_SKIP_DROP, color="tab:red", linestyle="--", linewidth=0.8)
    axes[1].set(ylabel="Δ accuracy (points)")
    axes[2].set(ylabel="Δ log p(gold) (nats)", xlabel="block skipped alone")
    if schedule is not None:
        draw_schedule(axes[3], axes[4], schedule, bar=KL_BAR)
        axes[2].set(xlabel="")
        axes[4].set(xlabel="block (skipped alone, above; read through each lens, below)")
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=r) for r, c in READING_COLORS.items()]
    handles += [Patch(color=SKIP_COLORS[k], label=f"{k} block") for k in ("expansion", "pruning")]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=len(handles),
        fontsize="small",
        title="dots: the reading of Δ accuracy (both panels); bars: the blocks chosen",
        title_fontsize="small",
    )
    style.save_figure(fig, path)


def plot_skip_profiles(profiles: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """Mean entropy profile vs normalized depth under each skip condition.

    Args:
        profiles: Rows ``condition, kind, depth, entropy`` (one line per condition), as
            :func:`entropy_lens.skipping.evaluation.profile_conditions` gives them.
        path: PNG path.
        title: Figure title.
    """
    style.require_columns(profiles, ["condition", "kind", "depth", "entropy"], "skip profiles")
    fig = style.figure(5.5, 4.0)
    ax = fig.add_subplot()
    for (condition, kind), rows in profiles.groupby(["condition", "kind"], sort=False):
        ax.plot(
            rows["depth"],
            rows["entropy"],
            marker=".",
            color=SKIP_COLORS.get(kind),
            label=str(condition),
            linestyle="-" if kind != "random" else ":",
        )
    ax.set(xlabel="normalized depth", ylabel="mean entropy (nats)", title=title)
    ax.legend(fontsize="small")
    style.save_figure(fig, path)
