"""Family fingerprints: blank-prompt profiles compared across models at normalized depth.

Models have different layer counts, so profiles are compared on a common normalized-
depth grid (:func:`entropy_lens.analysis.features.depth_grid`) after linear
interpolation, never after zero-padding (padding makes deeper models look different only
because they are longer).  Every profile here is a mean over valid (unmasked) token
slots; masked slots are ignored, not filled.

The study's claim under test: profiles cluster by family, not by size.  Numbers:
silhouette and adjusted Rand index (ARI) of the hierarchical clustering against family
labels and against parameter-count buckets.  "Size looks like resolution": within a
family, the smaller model's profile matches the larger one's read at the smaller
model's depths.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist, squareform
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from sklearn.metrics import adjusted_rand_score, silhouette_score
from threadpoolctl import threadpool_limits

from entropy_lens.analysis.features import (
    DEFAULT_GRID_POINTS,
    depth_grid,
    model_depth,
    model_n_layers,
    model_names,
    model_profiles,
    plain,
    prompt_ids,
    resample_depth,
)
from entropy_lens.store import schema

log = logging.getLogger(__name__)

N_PARAMS = "n_params"
GRID_DIM = "grid"
SAMPLE_DIM = "sample"
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


def _model_coords(ds: xr.Dataset, models: list[str]) -> dict[str, tuple[str, np.ndarray]]:
    sub = ds.sel({schema.MODEL: models})
    coords = {schema.N_LAYERS: (schema.MODEL, np.asarray(sub[schema.N_LAYERS].values))}
    for name in (schema.FAMILY, N_PARAMS):
        if name in ds.coords:
            coords[name] = (schema.MODEL, plain(sub[name].values))
    return coords


def _token_mean(profiles: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    counts = np.isfinite(profiles).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, np.nansum(profiles, axis=axis) / counts, np.nan)


def layer_profiles(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    models: Sequence[str] | None = None,
    prompts: Sequence[str] | None = None,
) -> xr.DataArray:
    """Mean profile per model on its own layers (mean over prompts and valid tokens).

    Args:
        ds: Combined dataset, typically the ``blank`` store (lazy is fine).
        metric: ``"entropy"`` or ``"renyi"``.
        alpha: Rényi order for ``renyi``.
        models: Models to include (default: all).
        prompts: Prompt ids to average over (default: all).

    Returns:
        ``(model, layer)`` nats, NaN on padded layers; coords ``depth (model, layer)``,
        ``n_layers``, ``family``, ``n_params`` on ``model``.
    """
    names = model_names(ds, models)
    width = ds.sizes[schema.LAYER]
    values = np.full((len(names), width), np.nan)
    depth = np.full((len(names), width), np.nan)
    for i, model in enumerate(names):
        prof = model_profiles(ds, model, metric=metric, alpha=alpha, prompts=prompts)
        values[i, : prof.shape[2]] = _token_mean(prof, (0, 1))
        depth[i, : prof.shape[2]] = model_depth(ds, model)
    coords = {schema.MODEL: names, schema.LAYER: np.arange(width), schema.DEPTH: ((schema.MODEL, schema.LAYER), depth)}
    return xr.DataArray(values, dims=(schema.MODEL, schema.LAYER), coords={**coords, **_model_coords(ds, names)})


def _real(profiles: xr.DataArray, model: str) -> tuple[np.ndarray, np.ndarray]:
    row = schema.real_layers(profiles, model)
    return np.asarray(row[schema.DEPTH].values, dtype=np.float64), np.asarray(row.values, dtype=np.float64)


def mean_profiles(profiles: xr.DataArray, grid_points: int = DEFAULT_GRID_POINTS) -> xr.DataArray:
    """Resample per-model layer profiles onto the common normalized-depth grid.

    Args:
        profiles: ``(model, layer)`` from :func:`layer_profiles`.
        grid_points: Grid size.

    Returns:
        ``(model, grid)`` with coordinate ``depth (grid)`` and the model coords.
    """
    names = list(profiles[schema.MODEL].values)
    grid = depth_grid([int(n) for n in profiles[schema.N_LAYERS].values], grid_points)
    rows = [resample_depth(values, depth, grid) for depth, values in (_real(profiles, m) for m in names)]
    model_coords = {k: v for k, v in profiles.coords.items() if v.dims == (schema.MODEL,)}
    return xr.DataArray(
        np.stack(rows), dims=(schema.MODEL, GRID_DIM), coords={**model_coords, schema.DEPTH: (GRID_DIM, grid)}
    )


def sample_profiles(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    grid_points: int = DEFAULT_GRID_POINTS,
    models: Sequence[str] | None = None,
    prompts: Sequence[str] | None = None,
) -> xr.DataArray:
    """Per-sample profiles (each prompt's mean over its valid tokens) on the depth grid.

    Samples with no valid token are dropped with a warning.

    Returns:
        ``(sample, grid)``; coords on ``sample``: ``model``, ``prompt``, ``family``,
        ``n_params``; ``depth (grid)``.
    """
    names = model_names(ds, models)
    grid = depth_grid([model_n_layers(ds, m) for m in names], grid_points)
    ids = prompt_ids(ds, prompts)
    rows = [
        resample_depth(
            _token_mean(model_profiles(ds, m, metric=metric, alpha=alpha, prompts=ids), (1,)), model_depth(ds, m), grid
        )
        for m in names
    ]
    values = np.concatenate(rows)
    keep = np.isfinite(values).all(axis=1)
    if not keep.all():
        log.warning("%d of %d samples have no valid token and are dropped", int((~keep).sum()), keep.size)
    model_col = np.repeat(np.asarray(names, dtype=object), ids.size)[keep]
    coords = {schema.MODEL: (SAMPLE_DIM, model_col), schema.PROMPT: (SAMPLE_DIM, np.tile(ids, len(names))[keep])}
    for name, (_, vals) in _model_coords(ds, names).items():
        coords[name] = (SAMPLE_DIM, np.repeat(vals, ids.size)[keep])
    return xr.DataArray(values[keep], dims=(SAMPLE_DIM, GRID_DIM), coords={**coords, schema.DEPTH: (GRID_DIM, grid)})


def rms_distances(X: np.ndarray) -> np.ndarray:
    """Condensed pairwise RMS distances (Euclidean / sqrt(G)) of ``[N, G]`` rows, in nats."""
    return pdist(X, metric="euclidean") / math.sqrt(X.shape[1])


def model_distances(means: xr.DataArray) -> pd.DataFrame:
    """Square RMS distance matrix between model mean profiles on the depth grid.

    Args:
        means: ``(model, grid)`` from :func:`mean_profiles`.

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
        samples: ``(sample, grid)`` from :func:`sample_profiles`.
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
        samples: ``(sample, grid)`` from :func:`sample_profiles`.
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


def family_size_pairs(profiles: xr.DataArray) -> list[tuple[str, str]]:
    """``(smaller, larger)`` model pairs of the same family with different layer counts.

    Size is ``n_params`` when present, else the layer count.
    """
    layers = np.asarray(profiles[schema.N_LAYERS].values)
    frame = pd.DataFrame(
        {
            "model": [str(m) for m in profiles[schema.MODEL].values],
            "family": plain(profiles[schema.FAMILY].values),
            "n_layers": layers,
            "size": np.asarray(profiles[N_PARAMS].values) if N_PARAMS in profiles.coords else layers,
        }
    ).sort_values(["size", "n_layers"], kind="stable")
    pairs = []
    for _, group in frame.groupby("family", sort=True):
        rows = list(group.itertuples(index=False))
        pairs += [(a.model, b.model) for a, b in itertools.combinations(rows, 2) if a.n_layers != b.n_layers]
    return pairs


def subsampled_rmse(
    small: np.ndarray, small_depth: np.ndarray, large: np.ndarray, large_depth: np.ndarray
) -> np.ndarray:
    """``rmse_subsampled``: the RMS difference of the smaller model's profile and the larger one read (linearly
    interpolated) at the smaller one's depths; exact subsampling where those are layer depths of the larger.

    Args:
        small: ``[..., L_small]`` the smaller model's profile(s) at ``small_depth`` ``[L_small]``.
        large: ``[..., L_large]`` the larger model's, at ``large_depth`` ``[L_large]``.

    Returns:
        ``[...]`` in the profiles' unit (nats, or fractions of log V on the normalized scale).
    """
    return rms_of(subsampled_error(small, small_depth, large, large_depth))


def subsampled_error(
    small: np.ndarray, small_depth: np.ndarray, large: np.ndarray, large_depth: np.ndarray
) -> np.ndarray:
    """The larger model's profile(s) read at the smaller one's depths, minus the smaller one's: ``[..., L_small]``
    (the differences :func:`subsampled_rmse` summarises)."""
    return resample_depth(large, large_depth, small_depth) - small


def rms_of(differences: np.ndarray) -> np.ndarray:
    """The root mean square over the last axis."""
    return np.sqrt(np.mean(differences**2, axis=-1))


def size_pairs(
    profiles: xr.DataArray,
    pairs: Sequence[tuple[str, str]] | None = None,
    *,
    grid_points: int = DEFAULT_GRID_POINTS,
) -> pd.DataFrame:
    """Smaller vs larger model of a family: "size looks like resolution".

    ``corr_depth`` is the Pearson correlation of the two profiles on a common depth
    grid; ``rmse_subsampled`` / ``mae_subsampled`` compare the smaller model's profile
    with the larger one read (linearly interpolated) at the smaller model's depths,
    which is exact subsampling when those depths are layer depths of the larger model.

    Args:
        profiles: ``(model, layer)`` from :func:`layer_profiles`.
        pairs: ``(smaller, larger)`` names (default: :func:`family_size_pairs`).
        grid_points: Grid size for ``corr_depth``.

    Returns:
        One row per pair: ``family, small, large, small_layers, large_layers, corr_depth,
        rmse_subsampled, mae_subsampled``.
    """
    pairs = family_size_pairs(profiles) if pairs is None else list(pairs)
    rows = []
    for small, large in pairs:
        (d_s, v_s), (d_l, v_l) = _real(profiles, small), _real(profiles, large)
        grid = depth_grid([d_s.size, d_l.size], grid_points)
        a, b = resample_depth(v_s, d_s, grid), resample_depth(v_l, d_l, grid)
        err = subsampled_error(v_s, d_s, v_l, d_l)
        rows.append(
            {
                "family": str(profiles[schema.FAMILY].sel({schema.MODEL: small}).values),
                "small": small,
                "large": large,
                "small_layers": d_s.size,
                "large_layers": d_l.size,
                "corr_depth": _pearson(a, b),
                "rmse_subsampled": float(rms_of(err)),
                "mae_subsampled": float(np.mean(np.abs(err))),
            }
        )
    columns = [
        "family",
        "small",
        "large",
        "small_layers",
        "large_layers",
        "corr_depth",
        "rmse_subsampled",
        "mae_subsampled",
    ]
    return pd.DataFrame(rows, columns=columns)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def shape_descriptors(profiles: xr.DataArray) -> pd.DataFrame:
    """Per-model profile shape: start and final level, peak, largest rise and fall.

    Rise/fall at layer ``l`` is ``H_l - H_{l-1}``; its depth is layer ``l``'s.

    Args:
        profiles: ``(model, layer)`` from :func:`layer_profiles`.

    Returns:
        One row per model: ``model, family, n_layers, start, final, peak, peak_depth,
        max_rise, max_rise_depth, max_fall, max_fall_depth`` (levels in nats).
    """
    rows = []
    for model in profiles[schema.MODEL].values:
        depth, values = _real(profiles, str(model))
        steps = np.diff(values)
        rows.append(
            {
                "model": str(model),
                "family": str(profiles[schema.FAMILY].sel({schema.MODEL: model}).values),
                "n_layers": depth.size,
                "start": values[0],
                "final": values[-1],
                "peak": float(np.max(values)),
                "peak_depth": depth[int(np.argmax(values))],
                "max_rise": float(steps.max()),
                "max_rise_depth": depth[1 + int(np.argmax(steps))],
                "max_fall": float(steps.min()),
                "max_fall_depth": depth[1 + int(np.argmin(steps))],
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Fingerprints:
    """Everything the family analysis finds on one blank-prompt store (see :func:`fingerprints`)."""

    distances: pd.DataFrame
    clustering: pd.DataFrame
    size_pairs: pd.DataFrame
    shapes: pd.DataFrame
    linkage: np.ndarray
    models: list[str]
    families: list[str]
    pca: pd.DataFrame
    tsne: pd.DataFrame


def fingerprints(ds: xr.Dataset, *, grid_points: int = DEFAULT_GRID_POINTS, seed: int = DEFAULT_SEED) -> Fingerprints:
    """Distances, clustering scores, size pairs, shapes and embeddings of blank-prompt profiles.

    Raises:
        ValueError: with fewer than two models (nothing to compare).
    """
    layers = layer_profiles(ds)
    if layers.sizes[schema.MODEL] < 2:
        raise ValueError(f"family fingerprints compare models; the store has {layers.sizes[schema.MODEL]}")
    means = mean_profiles(layers, grid_points)
    samples = sample_profiles(ds, grid_points=grid_points)
    return Fingerprints(
        distances=model_distances(means),
        clustering=clustering_scores(samples),
        size_pairs=size_pairs(layers, grid_points=grid_points),
        shapes=shape_descriptors(layers),
        linkage=linkage_matrix(means),
        models=[str(m) for m in means[schema.MODEL].values],
        families=[str(f) for f in means[schema.FAMILY].values],
        pca=embed_samples(samples, method="pca", seed=seed),
        tsne=embed_samples(samples, method="tsne", seed=seed),
    )
