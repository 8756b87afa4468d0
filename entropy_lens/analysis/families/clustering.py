"""Do profiles cluster by family or by size?  Distances, hierarchical clustering, its scores, embeddings.

The study's claim under test: profiles cluster by family, not by size.  Numbers:
silhouette and adjusted Rand index (ARI) of the hierarchical clustering against family
labels and against parameter-count buckets, on the profiles of
:mod:`~entropy_lens.analysis.families.profiles` (RMS distance on the depth grid).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist, squareform
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from sklearn.metrics import adjusted_rand_score, silhouette_score
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.families.profiles import N_PARAMS
from entropy_lens.store import schema

log = logging.getLogger(__name__)

# Parameter-count bucket edges: < 1B, 1B-4B, >= 4B.
DEFAULT_SIZE_EDGES: tuple[float, ...] = (1e9, 4e9)
UNKNOWN_SIZE = "unknown"
DEFAULT_LINKAGE = "average"
EMBEDDINGS = ("pca", "tsne")
DEFAULT_PERPLEXITY = 30.0
DEFAULT_SEED = 0
# OpenMP threads for t-SNE: with torch's OpenMP runtime loaded too, more threads spin-wait
# against each other and a 12-point embedding takes tens of seconds instead of 0.1 s.
DEFAULT_THREADS = 1
GROUPINGS = ("family", "size")


def rms_distances(X: np.ndarray) -> np.ndarray:
    """Condensed pairwise RMS distances (Euclidean / sqrt(G)) of ``[N, G]`` rows, in nats."""
    return pdist(X, metric="euclidean") / math.sqrt(X.shape[1])


def model_distances(means: xr.DataArray) -> pd.DataFrame:
    """Square RMS distance matrix between model mean profiles on the depth grid.

    Args:
        means: ``(model, grid)`` from :func:`~entropy_lens.analysis.families.profiles.mean_profiles`.

    Returns:
        ``[M, M]`` frame indexed and labelled by model, in nats.
    """
    names = [str(m) for m in means[schema.MODEL].values]
    return pd.DataFrame(squareform(rms_distances(means.values)), index=names, columns=names)


def linkage_matrix(means: xr.DataArray, method: str = DEFAULT_LINKAGE) -> np.ndarray:
    """SciPy hierarchical-clustering linkage of model mean profiles (RMS distance).

    Returns:
        ``[M-1, 4]`` linkage matrix for ``scipy.cluster.hierarchy.dendrogram``.
    """
    if means.sizes[schema.MODEL] < 2:
        raise ValueError(f"clustering needs >= 2 models, got {means.sizes[schema.MODEL]}")
    return linkage(rms_distances(means.values), method=method)


def size_buckets(n_params: Sequence[int], edges: Sequence[float] = DEFAULT_SIZE_EDGES) -> np.ndarray:
    """Parameter-count bucket labels, e.g. ``"<1B"``, ``"1B-4B"``, ``">=4B"``.

    A count ``<= 0`` (not recorded) gets :data:`UNKNOWN_SIZE`.
    """
    if len(edges) == 0:
        raise ValueError("size edges must list at least one parameter count, e.g. (1e9, 4e9)")
    edges = sorted(float(e) for e in edges)
    names = [f"<{_fmt_params(edges[0])}"]
    names += [f"{_fmt_params(a)}-{_fmt_params(b)}" for a, b in itertools.pairwise(edges)]
    names += [f">={_fmt_params(edges[-1])}"]
    counts = np.asarray(n_params, dtype=float)
    labels = [names[i] for i in np.searchsorted(edges, counts, side="right")]
    return np.where(counts > 0, labels, UNKNOWN_SIZE)


def _fmt_params(n: float) -> str:
    return f"{n / 1e9:g}B" if n >= 1e9 else f"{n / 1e6:g}M"


def _group_labels(frame: pd.DataFrame, grouping: str, edges: Sequence[float]) -> np.ndarray:
    if grouping == "family":
        return frame[schema.FAMILY].astype(str).to_numpy()
    if N_PARAMS not in frame:
        raise ValueError("size grouping needs the 'n_params' coordinate on the store's models")
    return size_buckets(frame[N_PARAMS].to_numpy(), edges)


def _silhouette(X: np.ndarray, labels: np.ndarray) -> float:
    n_groups = np.unique(labels).size
    if not 2 <= n_groups <= len(labels) - 1:
        return float("nan")
    return float(silhouette_score(X, labels, metric="euclidean"))


def _ari(X: np.ndarray, labels: np.ndarray, method: str) -> float:
    n_groups = np.unique(labels).size
    if not 2 <= n_groups <= len(labels) - 1:  # one group, or one member per group: agreement is trivial
        return float("nan")
    clusters = fcluster(linkage(rms_distances(X), method=method), t=n_groups, criterion="maxclust")
    return float(adjusted_rand_score(labels, clusters))


def _sample_frame(samples: xr.DataArray) -> pd.DataFrame:
    names = [c for c in (schema.MODEL, schema.FAMILY, N_PARAMS) if c in samples.coords]
    return pd.DataFrame({c: samples[c].values for c in names})


def clustering_scores(
    samples: xr.DataArray,
    *,
    size_edges: Sequence[float] = DEFAULT_SIZE_EDGES,
    method: str = DEFAULT_LINKAGE,
) -> pd.DataFrame:
    """Silhouette and ARI against family labels and against size buckets.

    Models: their mean profiles (mean over their samples) are clustered hierarchically
    (RMS distance, ``method`` linkage) and cut into as many clusters as the grouping has
    groups; samples: the same on per-sample profiles.  Silhouette (Euclidean) and ARI
    are NaN when a grouping has one group or one member per group (nothing to test).

    Args:
        samples: ``(sample, grid)`` from :func:`~entropy_lens.analysis.families.profiles.sample_profiles`.
        size_edges: Parameter-count bucket edges.
        method: SciPy linkage method.

    Returns:
        One row per grouping (``family``, ``size``): ``grouping, n_groups, n_models,
        n_samples, ari_models, silhouette_models, ari_samples, silhouette_samples``.
    """
    frame = _sample_frame(samples)
    models = frame.drop_duplicates(schema.MODEL).reset_index(drop=True)
    means = np.stack([samples.values[(frame[schema.MODEL] == m).to_numpy()].mean(axis=0) for m in models[schema.MODEL]])
    rows = []
    for grouping in GROUPINGS:
        model_labels = _group_labels(models, grouping, size_edges)
        sample_labels = _group_labels(frame, grouping, size_edges)
        rows.append(
            {
                "grouping": grouping,
                "n_groups": int(np.unique(model_labels).size),
                "n_models": int(model_labels.size),
                "n_samples": int(sample_labels.size),
                "ari_models": _ari(means, model_labels, method),
                "silhouette_models": _silhouette(means, model_labels),
                "ari_samples": _ari(samples.values, sample_labels, method),
                "silhouette_samples": _silhouette(samples.values, sample_labels),
            }
        )
    return pd.DataFrame(rows)


def embed_samples(
    samples: xr.DataArray,
    *,
    method: str = "pca",
    perplexity: float = DEFAULT_PERPLEXITY,
    seed: int = DEFAULT_SEED,
    n_threads: int | None = DEFAULT_THREADS,
) -> pd.DataFrame:
    """2-D embedding of per-sample profiles.

    Args:
        samples: ``(sample, grid)`` from :func:`~entropy_lens.analysis.families.profiles.sample_profiles`.
        method: ``"pca"`` or ``"tsne"`` (perplexity capped below the sample count, with a warning).
        perplexity: t-SNE perplexity.
        seed: Random state of t-SNE.
        n_threads: OpenMP threads for t-SNE (``None``: the library default).

    Returns:
        ``model, prompt, family, n_params, x, y`` per sample.
    """
    X = np.asarray(samples.values, dtype=np.float64)
    if method == "pca":
        xy = PCA(n_components=2).fit_transform(X)
    elif method == "tsne":
        cap = max((X.shape[0] - 1) / 3.0, 1.0)  # sklearn needs perplexity < n_samples; ~n/3 keeps neighbourhoods local
        if perplexity > cap:
            log.warning("t-SNE perplexity %.1f is too large for %d samples; using %.1f", perplexity, X.shape[0], cap)
        tsne = TSNE(n_components=2, perplexity=min(perplexity, cap), random_state=seed, init="pca")
        with threadpool_limits(limits=n_threads, user_api="openmp"):
            xy = tsne.fit_transform(X)
    else:
        raise ValueError(f"embedding method must be one of {EMBEDDINGS}, got {method!r}")
    out = {c: samples[c].values for c in (schema.MODEL, schema.PROMPT, schema.FAMILY, N_PARAMS) if c in samples.coords}
    return pd.DataFrame({**out, "x": xy[:, 0], "y": xy[:, 1]})
