"""Figures of entropy profiles: mean profiles over depth (bands per label, one line per model) and
the token x layer heatmap of one prompt with its decoded top-1 tokens."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

from entropy_lens.plots import style
from entropy_lens.store import schema
from entropy_lens.store.storage import as_str

CMAP = "viridis"
MAX_CELL_CHARS = 6
MAX_HEATMAP_TOKENS = 64
CELL_FONT_SIZE = 6
# Text on a heatmap cell is black where the cell's luminance (Rec. 709 weights of its drawn colour)
# exceeds this, white below.
TEXT_SWITCH = 0.5
LUMINANCE = np.array([0.2126, 0.7152, 0.0722])
LINE_STYLES = ("-", "--", ":", "-.")
MODEL_DIM, DEPTH_COORD, FAMILY_COORD, N_LAYERS_COORD = schema.MODEL, schema.DEPTH, schema.FAMILY, schema.N_LAYERS


def plot_profile_bands(
    bands: pd.DataFrame, path: str | Path, *, title: str = "", ylabel: str = "entropy (nats)"
) -> None:
    """Mean profile vs normalized depth per label value, with its band; one panel per model.

    Args:
        bands: :func:`entropy_lens.analysis.bands.profile_bands` output (one or more models).
        path: PNG path.
        title: Figure title.
        ylabel: Y axis label.
    """
    style.require_columns(bands, ["model", "value", "depth", "mean", "lower", "upper"], "profile bands")
    models = list(pd.unique(bands["model"]))
    fig = style.figure(4.5 * min(len(models), style.FACET_COLUMNS), 3.4 * math.ceil(len(models) / style.FACET_COLUMNS))
    values = list(pd.unique(bands["value"]))
    colors = dict(zip(values, style.colors(len(values)), strict=True))
    for ax, model in zip(style.facets(fig, len(models)), models, strict=True):
        for value, grp in bands[bands["model"] == model].groupby("value", sort=False):
            ax.plot(grp["depth"], grp["mean"], color=colors[value], label=str(value))
            ax.fill_between(grp["depth"], grp["lower"], grp["upper"], color=colors[value], alpha=style.BAND_ALPHA)
        ax.set(title=str(model), xlabel="normalized depth", ylabel=ylabel)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    style.save_figure(fig, path)


def plot_family_profiles(profiles: xr.DataArray, path: str | Path, *, title: str = "") -> None:
    """Mean profile per model vs normalized depth, coloured by family.

    Args:
        profiles: ``(model, layer)`` from :func:`entropy_lens.analysis.families.profiles.layer_profiles`
            (coords ``depth (model, layer)``, ``family`` and ``n_layers`` on ``model``).
        path: PNG (or SVG) path.
        title: Figure title.
    """
    missing = [c for c in (DEPTH_COORD, FAMILY_COORD, N_LAYERS_COORD) if c not in profiles.coords]
    if missing:
        raise ValueError(
            f"profiles lack coordinates {missing}; build them with analysis.families.profiles.layer_profiles"
        )
    fams = list(pd.unique(as_str(profiles[FAMILY_COORD].values)))
    colors = dict(zip(fams, style.colors(len(fams)), strict=True))
    fig = style.figure(6.0, 4.2)
    ax = fig.subplots()
    seen: dict[str, int] = {}
    for i, model in enumerate(profiles[MODEL_DIM].values):
        fam, n = as_str(profiles[FAMILY_COORD].values)[i], int(profiles[N_LAYERS_COORD].values[i])
        dashes = LINE_STYLES[seen.get(fam, 0) % len(LINE_STYLES)]
        seen[fam] = seen.get(fam, 0) + 1
        depth, values = profiles[DEPTH_COORD].values[i, :n], profiles.values[i, :n]
        ax.plot(depth, values, color=colors[fam], linestyle=dashes, marker=".", label=f"{model} ({fam}, {n} layers)")
    ax.set(xlabel="normalized depth", ylabel="mean entropy (nats)", title=title)
    ax.legend(fontsize="small")
    style.save_figure(fig, path)


@functools.cache
def _font_lacks(char: str) -> bool:
    """Whether the figures' font has no glyph for ``char`` (matplotlib would draw a box)."""
    font = FT2Font(font_manager.findfont(font_manager.FontProperties(family=matplotlib.rcParams["font.family"])))
    return font.get_char_index(ord(char)) == 0


def cell_text(token: str, max_chars: int = MAX_CELL_CHARS) -> str:
    """A decoded token made safe and short for a heatmap cell (escapes, mathtext off, characters the
    font lacks, and invisible ones, written as their code point, e.g. ``U+4E2D``, instead of a box)."""
    token = "".join(c if c in "\n\t" or (c.isprintable() and not _font_lacks(c)) else f"U+{ord(c):04X}" for c in token)
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
    fig = style.figure(2.5 + 0.5 * n_layers, 1.5 + 0.28 * t)
    ax = fig.subplots()
    image = ax.imshow(values, aspect="auto", cmap=CMAP, interpolation="nearest")
    rgb = image.to_rgba(values)[..., :3]  # each cell's colour as drawn
    luminance = rgb @ LUMINANCE
    for (i, j), tok in np.ndenumerate(top1_ids):
        if tok >= 0:
            color = "black" if luminance[i, j] > TEXT_SWITCH else "white"
            ax.text(j, i, cell_text(decode(int(tok))), ha="center", va="center", fontsize=CELL_FONT_SIZE, color=color)
    ax.set_xticks(range(n_layers))
    ax.set_yticks(range(t), [cell_text(labels[r], 2 * MAX_CELL_CHARS) for r in rows])
    ax.set(xlabel="layer", ylabel="generated token", title=title)
    fig.colorbar(image, ax=ax, label=colorbar_label)
    style.save_figure(fig, path)


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
