"""Figures from analysis results, each written as PNG plus an SVG beside it.

Every function takes data (the frames and arrays of :mod:`entropy_lens.analysis`) and
the PNG path, writes ``path`` and ``path.with_suffix(".svg")``, and returns nothing
(an ``.svg`` path writes the SVG alone).
Figures are built as :class:`matplotlib.figure.Figure` objects on the Agg canvas and are
never registered with pyplot, so no global backend is set and no figure stays open.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy.cluster.hierarchy import dendrogram

from entropy_lens.answers.criticality import MIN_SKIP_EFFECT as MIN_SKIP_DROP
from entropy_lens.store import schema
from entropy_lens.store.storage import as_str

if TYPE_CHECKING:
    from entropy_lens.analysis.families import Fingerprints

log = logging.getLogger(__name__)

DPI = 150
SVG_SALT = "entropy-lens"
CMAP = "viridis"
PALETTE = "tab10"
BAND_ALPHA = 0.25
MAX_CELL_CHARS = 6
MAX_HEATMAP_TOKENS = 64
CELL_FONT_SIZE = 6
# Text on heatmap cells is black on the bright half of the colormap, white on the dark half.
TEXT_SWITCH = 0.55
MARKER_SIZE = (12.0, 160.0)
SCATTER_ALPHA = 0.35
EMBED_ALPHA = 0.6
POINT_SIZE = 4.0
FACET_COLUMNS = 3
LINE_STYLES = ("-", "--", ":", "-.")
MODEL_DIM, DEPTH_COORD, FAMILY_COORD, N_LAYERS_COORD = schema.MODEL, schema.DEPTH, schema.FAMILY, schema.N_LAYERS


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path) -> None:
    """Write ``fig`` to ``path``: a ``.png`` also gets an ``.svg`` of the same stem beside it.

    A ``.svg`` path writes the SVG alone.  SVG text stays text (``svg.fonttype = none``)
    so that token labels are searchable.
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise ValueError(f"figure path must end in .png (an .svg is written beside it) or .svg, got {str(path)!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".png":
        fig.savefig(out, dpi=DPI, metadata={"Software": None})
    # no date and fixed element ids: the same figure gives the same bytes (DVC stores it once)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": SVG_SALT}):
        fig.savefig(out.with_suffix(".svg"), metadata={"Date": None})


def _colors(n: int) -> list[tuple[float, ...]]:
    cmap = matplotlib.colormaps[PALETTE]
    return [cmap(i % cmap.N) for i in range(n)]


def _facets(fig: Figure, n: int) -> list:
    cols = min(n, FACET_COLUMNS)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} frame lacks columns {missing}; build it with the matching analysis function")


def plot_profile_bands(
    bands: pd.DataFrame, path: str | Path, *, title: str = "", ylabel: str = "entropy (nats)"
) -> None:
    """Mean profile vs normalized depth per label value, with its band; one panel per model.

    Args:
        bands: :func:`entropy_lens.analysis.features.profile_bands` output (one or more models).
        path: PNG path.
        title: Figure title.
        ylabel: Y axis label.
    """
    _require(bands, ["model", "value", "depth", "mean", "lower", "upper"], "profile bands")
    models = list(pd.unique(bands["model"]))
    fig = _figure(4.5 * min(len(models), FACET_COLUMNS), 3.4 * math.ceil(len(models) / FACET_COLUMNS))
    values = list(pd.unique(bands["value"]))
    colors = dict(zip(values, _colors(len(values)), strict=True))
    for ax, model in zip(_facets(fig, len(models)), models, strict=True):
        for value, grp in bands[bands["model"] == model].groupby("value", sort=False):
            ax.plot(grp["depth"], grp["mean"], color=colors[value], label=str(value))
            ax.fill_between(grp["depth"], grp["lower"], grp["upper"], color=colors[value], alpha=BAND_ALPHA)
        ax.set(title=str(model), xlabel="normalized depth", ylabel=ylabel)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    save_figure(fig, path)


def plot_family_profiles(profiles: xr.DataArray, path: str | Path, *, title: str = "") -> None:
    """Mean profile per model vs normalized depth, coloured by family.

    Args:
        profiles: ``(model, layer)`` from :func:`entropy_lens.analysis.families.layer_profiles`
            (coords ``depth (model, layer)``, ``family`` and ``n_layers`` on ``model``).
        path: PNG (or SVG) path.
        title: Figure title.
    """
    missing = [c for c in (DEPTH_COORD, FAMILY_COORD, N_LAYERS_COORD) if c not in profiles.coords]
    if missing:
        raise ValueError(f"profiles lack coordinates {missing}; build them with analysis.families.layer_profiles")
    fams = list(pd.unique(as_str(profiles[FAMILY_COORD].values)))
    colors = dict(zip(fams, _colors(len(fams)), strict=True))
    fig = _figure(6.0, 4.2)
    ax = fig.subplots()
    seen: dict[str, int] = {}
    for i, model in enumerate(profiles[MODEL_DIM].values):
        fam, n = as_str(profiles[FAMILY_COORD].values)[i], int(profiles[N_LAYERS_COORD].values[i])
        style = LINE_STYLES[seen.get(fam, 0) % len(LINE_STYLES)]
        seen[fam] = seen.get(fam, 0) + 1
        depth, values = profiles[DEPTH_COORD].values[i, :n], profiles.values[i, :n]
        ax.plot(depth, values, color=colors[fam], linestyle=style, marker=".", label=f"{model} ({fam}, {n} layers)")
    ax.set(xlabel="normalized depth", ylabel="mean entropy (nats)", title=title)
    ax.legend(fontsize="small")
    save_figure(fig, path)


def cell_text(token: str, max_chars: int = MAX_CELL_CHARS) -> str:
    """A decoded token made safe and short for a heatmap cell (escapes, mathtext off)."""
    text = token.replace("\n", "\\n").replace("\t", "\\t").replace("$", r"\$")
    text = text if text.strip() else "·" * len(text) or "∅"  # spaces made visible
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def plot_token_heatmap(
    values: np.ndarray,
    top1_ids: np.ndarray,
    decode: Callable[[int], str],
    path: str | Path,
    *,
    token_labels: Sequence[str] | None = None,
    title: str = "",
    max_tokens: int = MAX_HEATMAP_TOKENS,
    colorbar_label: str = "entropy (nats)",
) -> None:
    """Token x layer heatmap of one prompt with the top-1 token decoded in every cell.

    Args:
        values: ``[T, L]`` metric values (NaN rows, i.e. masked tokens, are dropped).
        top1_ids: ``[T, L]`` top-1 token ids of the logit lens.
        decode: Token id -> text (e.g. ``lambda i: tokenizer.decode([i])``).
        path: PNG path.
        token_labels: ``[T]`` row labels (e.g. the generated tokens); default: slot index.
        title: Figure title.
        max_tokens: Only the first ``max_tokens`` valid rows are drawn.
        colorbar_label: Colour bar label.
    """
    values, top1_ids = np.asarray(values, dtype=float), np.asarray(top1_ids)
    if values.ndim != 2 or values.shape != top1_ids.shape:
        raise ValueError(f"values and top1_ids must share a [T, L] shape, got {values.shape}, {top1_ids.shape}")
    rows = np.flatnonzero(np.isfinite(values).any(axis=1))[:max_tokens]
    labels = [str(i) for i in range(values.shape[0])] if token_labels is None else list(token_labels)
    values, top1_ids = values[rows], top1_ids[rows]
    t, n_layers = values.shape
    fig = _figure(2.5 + 0.5 * n_layers, 1.5 + 0.28 * t)
    ax = fig.subplots()
    image = ax.imshow(values, aspect="auto", cmap=CMAP, interpolation="nearest")
    lo, hi = np.nanmin(values), np.nanmax(values)
    scale = (values - lo) / (hi - lo) if hi > lo else np.zeros_like(values)
    for (i, j), tok in np.ndenumerate(top1_ids):
        if tok >= 0:
            color = "black" if scale[i, j] > TEXT_SWITCH else "white"
            ax.text(j, i, cell_text(decode(int(tok))), ha="center", va="center", fontsize=CELL_FONT_SIZE, color=color)
    ax.set_xticks(range(n_layers))
    ax.set_yticks(range(t), [cell_text(labels[r], 2 * MAX_CELL_CHARS) for r in rows])
    ax.set(xlabel="layer", ylabel="generated token", title=title)
    fig.colorbar(image, ax=ax, label=colorbar_label)
    save_figure(fig, path)


def plot_auc_bars(table: pd.DataFrame, path: str | Path, *, title: str = "", protocol: str = "grouped") -> None:
    """kNN AUC with its 95% interval per target and entropy measure; one panel per model.

    The dummy's interval upper end is a short black line over each bar; chance is the
    dotted 0.5 line.  Rows of other fold protocols are left out (``protocol``).

    Args:
        table: :func:`entropy_lens.analysis.knn.knn_table` output.
        path: PNG path.
        title: Figure title.
        protocol: Which fold protocol to draw (``grouped``, the verdicts', or ``study``).
    """
    _require(
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
    cols, rows = min(len(models), FACET_COLUMNS), math.ceil(len(models) / FACET_COLUMNS)
    fig = _figure(cols * (1.5 + 0.25 * most_groups * len(measures)), 0.6 + 3.4 * rows)
    colors = dict(zip(measures, _colors(len(measures)), strict=True))
    for ax, model in zip(_facets(fig, len(models)), models, strict=True):
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
    save_figure(fig, path)


def plot_prompt_heatmap(row: xr.Dataset, tokenizer: object, path: str | Path, *, title: str = "") -> None:
    """:func:`plot_token_heatmap` of one prompt of a per-model store (``entropy``, ``top1_id``,
    ``token_id`` of that prompt), with ``tokenizer`` decoding the tokens."""
    generated = [tokenizer.decode([int(t)]) if t >= 0 else "" for t in row[schema.TOKEN_ID].values]
    plot_token_heatmap(
        row[schema.ENTROPY].values,
        row[schema.TOP1_ID].values,
        lambda token_id: tokenizer.decode([int(token_id)]),
        path,
        token_labels=generated,
        title=title,
    )


def plot_fingerprints(found: Fingerprints, *, dendrogram: str | Path, pca: str | Path, tsne: str | Path) -> None:
    """The dendrogram and the PCA and t-SNE embeddings of :func:`entropy_lens.analysis.families.fingerprints`."""
    plot_dendrogram(found.linkage, found.models, dendrogram, families=found.families, title="blank-prompt profiles")
    plot_embedding(found.pca, pca, title="PCA of blank-prompt profiles")
    plot_embedding(found.tsne, tsne, title="t-SNE of blank-prompt profiles")


def plot_dendrogram(
    linkage_matrix: np.ndarray,
    labels: Sequence[str],
    path: str | Path,
    *,
    families: Sequence[str] | None = None,
    title: str = "",
) -> None:
    """Dendrogram of model profiles; leaf labels coloured by family when given.

    Args:
        linkage_matrix: ``[M-1, 4]`` from :func:`entropy_lens.analysis.families.linkage_matrix`.
        labels: ``[M]`` model names in the linkage's order.
        path: PNG path.
        families: ``[M]`` family of each model.
        title: Figure title.
    """
    labels = [str(x) for x in labels]
    fig = _figure(6.0, 1.2 + 0.45 * len(labels))
    ax = fig.subplots()
    dendrogram(linkage_matrix, labels=labels, orientation="right", ax=ax, color_threshold=0)
    if families is not None:
        fams = list(pd.unique(as_str(families)))
        color = dict(zip(fams, _colors(len(fams)), strict=True))
        fam_of = dict(zip(labels, as_str(families), strict=True))
        for tick in ax.get_yticklabels():
            tick.set_color(color[fam_of[tick.get_text()]])
    ax.set(xlabel="RMS distance of mean profiles (nats)", title=title)
    save_figure(fig, path)


def _sizes(n_params: np.ndarray) -> np.ndarray:
    root = np.sqrt(np.asarray(n_params, dtype=float))
    lo, hi = MARKER_SIZE
    if root.size == 0 or np.ptp(root) == 0:
        return np.full(root.shape, (lo + hi) / 2)
    return lo + (hi - lo) * (root - root.min()) / np.ptp(root)


def plot_embedding(embedding: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """2-D embedding of per-sample profiles, coloured by family, sized by parameter count.

    Args:
        embedding: :func:`entropy_lens.analysis.families.embed_samples` output
            (``x, y, family``, optional ``n_params``, ``model``).
        path: PNG path.
        title: Figure title (e.g. "PCA" or "t-SNE").
    """
    _require(embedding, ["x", "y", "family"], "embedding")
    fig = _figure(5.5, 4.5)
    ax = fig.subplots()
    sizes = _sizes(embedding["n_params"]) if "n_params" in embedding else np.full(len(embedding), MARKER_SIZE[0])
    fams = list(pd.unique(embedding["family"].astype(str)))
    for fam, color in zip(fams, _colors(len(fams)), strict=True):
        pick = (embedding["family"].astype(str) == fam).to_numpy()
        ax.scatter(
            embedding["x"][pick],
            embedding["y"][pick],
            s=sizes[pick],
            color=color,
            alpha=EMBED_ALPHA,
            label=fam,
            edgecolors="none",
        )
    ax.legend(title="family (size ~ parameters)", fontsize="small")
    ax.set(xlabel="component 1", ylabel="component 2", title=title)
    save_figure(fig, path)


def plot_expansion(
    points: pd.DataFrame, path: str | Path, *, spearman: pd.DataFrame | None = None, title: str = ""
) -> None:
    """Scatter of ``Delta H`` against the nucleus-size change, coloured by model.

    Args:
        points: :func:`entropy_lens.analysis.expansion.expansion_points` output.
        path: PNG path.
        spearman: Optional :func:`~entropy_lens.analysis.expansion.expansion_spearman` output
            to put rho and n in the legend.
        title: Figure title.
    """
    _require(points, ["model", "delta_nucleus", "delta_entropy"], "expansion points")
    rho = (
        {}
        if spearman is None
        else dict(zip(spearman["model"], zip(spearman["spearman"], spearman["n"], strict=True), strict=True))
    )
    fig = _figure(5.5, 4.5)
    ax = fig.subplots()
    models = list(pd.unique(points["model"]))
    for model, color in zip(models, _colors(len(models)), strict=True):
        grp = points[points["model"] == model]
        label = str(model) if model not in rho else f"{model} (ρ={rho[model][0]:.3f}, n={rho[model][1]})"
        ax.scatter(
            grp["delta_nucleus"],
            grp["delta_entropy"],
            s=POINT_SIZE,
            color=color,
            alpha=SCATTER_ALPHA,
            label=label,
            edgecolors="none",
        )
    ax.set_xscale("symlog", linthresh=1.0)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set(xlabel="Δ nucleus size (tokens, symlog)", ylabel="ΔH (nats)", title=title)
    ax.legend(fontsize="small", markerscale=3)
    save_figure(fig, path)


OVERLAP_COLORS = {"jaccard": "tab:blue", "containment": "tab:orange"}
# The overlap verdict's threshold: more than half of the top-p set is shared with the next layer.
OVERLAP_THRESHOLD = 0.5


def plot_overlap_depth(frame: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """Adjacent-layer nucleus overlap against normalized depth, one panel per model.

    Each statistic (Jaccard, containment) is a line of per-layer means with its interval
    band; the dashed line marks the threshold "more than half shared" (0.5).

    Args:
        frame: :func:`entropy_lens.analysis.expansion.overlap_by_depth` output.
        path: PNG path.
        title: Figure title.
    """
    _require(frame, ["model", "statistic", "depth", "mean", "ci_low", "ci_high"], "overlap by depth")
    models, statistics = list(pd.unique(frame["model"])), list(pd.unique(frame["statistic"]))
    fig = _figure(4.5 * min(len(models), FACET_COLUMNS), 3.4 * math.ceil(len(models) / FACET_COLUMNS))
    colors = {s: OVERLAP_COLORS.get(s, c) for s, c in zip(statistics, _colors(len(statistics)), strict=True)}
    for ax, model in zip(_facets(fig, len(models)), models, strict=True):
        for statistic, grp in frame[frame["model"] == model].groupby("statistic", sort=False):
            grp = grp.sort_values("depth")
            ax.plot(grp["depth"], grp["mean"], color=colors[statistic], marker=".", label=str(statistic))
            ax.fill_between(grp["depth"], grp["ci_low"], grp["ci_high"], color=colors[statistic], alpha=BAND_ALPHA)
        ax.axhline(OVERLAP_THRESHOLD, color="grey", linestyle="--", linewidth=1, label="half shared")
        ax.set(title=str(model), xlabel="normalized depth", ylabel="overlap of layers l, l+1", ylim=(0.0, 1.02))
        ax.legend(fontsize="small")
    fig.suptitle(title)
    save_figure(fig, path)


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
        table: :func:`entropy_lens.answers.scoring.accuracy_table` output.
        path: PNG path.
        title: Figure title.
    """
    letters = list(LETTER_COLORS)
    _require(
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
    fig = _figure(max(4.0, 3.2 * len(models)), 6.0)
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
    save_figure(fig, path)


SKIP_COLORS = {"expansion": "tab:red", "pruning": "tab:blue", "random": "tab:gray", "intact": "black"}


READING_COLORS = {"safe": "tab:green", "costly": "tab:red", "unclear": "tab:gray"}


def plot_skip_map(rows: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """The criticality map of one model and measure: per block, its mean Delta H and what skipping it costs.

    Three panels over the block index: mean Delta H at the answer position (bars; the expansion
    and pruning blocks of each variant coloured), the change of accuracy and the change of the
    gold letter's log-probability when the block is skipped alone (points with 95% intervals,
    coloured by the reading safe / costly / unclear).

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.answers.criticality.skip_map`.
        path: PNG path.
        title: Figure title.
    """
    columns = ["layer", "delta_h", "d_accuracy", "d_accuracy_low", "d_accuracy_high", "d_logprob", "reading", "marks"]
    _require(rows, [*columns, "d_logprob_low", "d_logprob_high"], "skip map")
    rows = rows.sort_values("layer")
    marks = rows["marks"].fillna("").astype(str)
    bar_colors = [
        SKIP_COLORS["expansion"] if "expansion" in m else SKIP_COLORS["pruning"] if "pruning" in m else "0.6"
        for m in marks
    ]
    fig = _figure(max(6.0, 0.22 * len(rows) + 2.0), 7.0)
    axes = fig.subplots(3, 1, sharex=True)
    axes[0].bar(rows["layer"], rows["delta_h"].fillna(0.0), color=bar_colors)
    axes[0].axhline(0.0, color="black", linewidth=0.8)
    axes[0].set(ylabel="mean ΔH (nats)")
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
    save_figure(fig, path)


def plot_skip_profiles(profiles: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """Mean entropy profile vs normalized depth under each skip condition.

    Args:
        profiles: Rows ``condition, kind, depth, entropy`` (one line per condition), as
            :func:`entropy_lens.answers.skipping.profile_conditions` gives them.
        path: PNG path.
        title: Figure title.
    """
    _require(profiles, ["condition", "kind", "depth", "entropy"], "skip profiles")
    fig = _figure(5.5, 4.0)
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
    save_figure(fig, path)
