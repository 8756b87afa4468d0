"""Family fingerprints: blank-prompt profiles compared across models at normalized depth.

Models have different layer counts, so profiles are compared on a common normalized-
depth grid (:func:`entropy_lens.analysis.depth.depth_grid`) after linear
interpolation, never after zero-padding (padding makes deeper models look different only
because they are longer).  Every profile here is a mean over valid (unmasked) token
slots; masked slots are ignored, not filled.

The study's claim under test: profiles cluster by family, not by size.  Numbers:
silhouette and adjusted Rand index (ARI) of the hierarchical clustering against family
labels and against parameter-count buckets.  "Size looks like resolution": within a
family, the smaller model's profile matches the larger one's read at the smaller
model's depths.

:func:`fingerprints` gathers it all from :mod:`~entropy_lens.analysis.families.profiles`,
:mod:`~entropy_lens.analysis.families.clustering`, :mod:`~entropy_lens.analysis.families.shapes`
and :mod:`~entropy_lens.analysis.families.pairs`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS
from entropy_lens.analysis.families.clustering import (
    DEFAULT_SEED,
    clustering_scores,
    embed_samples,
    linkage_matrix,
    model_distances,
)
from entropy_lens.analysis.families.pairs import size_pairs
from entropy_lens.analysis.families.profiles import layer_profiles, mean_profiles, sample_profiles
from entropy_lens.analysis.families.shapes import shape_descriptors
from entropy_lens.store import schema


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
