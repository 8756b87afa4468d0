"""Figures of family fingerprints: the dendrogram of blank-prompt profiles and their 2-D embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import dendrogram

from entropy_lens.plots import style
from entropy_lens.store.storage import as_str

if TYPE_CHECKING:
    from entropy_lens.analysis.families.fingerprints import Fingerprints

MARKER_SIZE = (12.0, 160.0)
EMBED_ALPHA = 0.6


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
        linkage_matrix: ``[M-1, 4]`` from :func:`entropy_lens.analysis.families.clustering.linkage_matrix`.
        labels: ``[M]`` model names in the linkage's order.
        path: PNG path.
        families: ``[M]`` family of each model.
        title: Figure title.
    """
    labels = [str(x) for x in labels]
    fig = style.figure(6.0, 1.2 + 0.45 * len(labels))
    ax = fig.subplots()
    dendrogram(linkage_matrix, labels=labels, orientation="right", ax=ax, color_threshold=0)
    if families is not None:
        fams = list(pd.unique(as_str(families)))
        color = dict(zip(fams, style.colors(len(fams)), strict=True))
        fam_of = dict(zip(labels, as_str(families), strict=True))
        for tick in ax.get_yticklabels():
            tick.set_color(color[fam_of[tick.get_text()]])
    ax.set(xlabel="RMS distance of mean profiles (nats)", title=title)
    style.save_figure(fig, path)


def _sizes(n_params: np.ndarray) -> np.ndarray:
    root = np.sqrt(np.asarray(n_params, dtype=float))
    lo, hi = MARKER_SIZE
    if root.size == 0 or np.ptp(root) == 0:
        return np.full(root.shape, (lo + hi) / 2)
    return lo + (hi - lo) * (root - root.min()) / np.ptp(root)


def plot_embedding(embedding: pd.DataFrame, path: str | Path, *, title: str = "") -> None:
    """2-D embedding of per-sample profiles, coloured by family, sized by parameter count.

    Args:
        embedding: :func:`entropy_lens.analysis.families.clustering.embed_samples` output
            (``x, y, family``, optional ``n_params``, ``model``).
        path: PNG path.
        title: Figure title (e.g. "PCA" or "t-SNE").
    """
    style.require_columns(embedding, ["x", "y", "family"], "embedding")
    fig = style.figure(5.5, 4.5)
    ax = fig.subplots()
    sizes = _sizes(embedding["n_params"]) if "n_params" in embedding else np.full(len(embedding), MARKER_SIZE[0])
    fams = list(pd.unique(embedding["family"].astype(str)))
    for fam, color in zip(fams, style.colors(len(fams)), strict=True):
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
    style.save_figure(fig, path)
