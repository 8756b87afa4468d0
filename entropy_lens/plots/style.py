"""What every figure shares: how it is made, coloured, faceted and saved.

Figures are built as :class:`matplotlib.figure.Figure` objects on the Agg canvas and are
never registered with pyplot, so no global backend is set and no figure stays open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 150
SVG_SALT = "entropy-lens"
PALETTE = "tab10"
BAND_ALPHA = 0.25
FACET_COLUMNS = 3


def figure(width: float, height: float) -> Figure:
    """A new figure of ``width`` x ``height`` inches on its own Agg canvas, laid out by constraints."""
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


def colors(n: int) -> list[tuple[float, ...]]:
    """``n`` colours of the palette, cycling when ``n`` exceeds it."""
    cmap = matplotlib.colormaps[PALETTE]
    return [cmap(i % cmap.N) for i in range(n)]


def facets(fig: Figure, n: int) -> list:
    """``n`` panels on ``fig``, :data:`FACET_COLUMNS` to a row; the grid's spare panels are hidden."""
    cols = min(n, FACET_COLUMNS)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise a ``ValueError`` naming the ``columns`` that ``frame`` (a ``what`` frame) lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} frame lacks columns {missing}; build it with the matching analysis function")
