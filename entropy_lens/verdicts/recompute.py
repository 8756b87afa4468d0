"""The paper-table inputs an analysis recomputes from one dataset's combined profile store.

The verdicts under a fitted lens (:mod:`entropy_lens.verdicts.robustness`) re-run, on profiles read under that
lens, every input of the paper table whose entry in :data:`entropy_lens.verdicts.table.INPUTS` names one of these
(its ``from_store``); an input that cannot be recomputed from a profile store says why there instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from entropy_lens.analysis.expansion.overlap import nucleus_overlap
from entropy_lens.analysis.expansion.spearman import expansion_spearman
from entropy_lens.analysis.families.pairs import family_pairs
from entropy_lens.analysis.families.shapes import profile_shapes
from entropy_lens.analysis.separability.heldout import BLANK, family_heldout
from entropy_lens.analysis.separability.targets import knn_table

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from entropy_lens.analysis.features import FeatureSettings
    from entropy_lens.analysis.separability.settings import KnnSettings


@dataclass(frozen=True)
class StoreSettings:
    """The run's settings an analysis of one store needs.

    Attributes:
        knn, features: The kNN settings (separability, the held-out family).
        n_boot, seed: Bootstrap replicates and seed of the intervals.
        grid_points: The normalized-depth grid of the same-family pairs (``analysis.depth_grid``).
    """

    knn: KnnSettings
    features: FeatureSettings
    n_boot: int
    seed: int
    grid_points: int


# (combined store of one dataset, the dataset's name, settings) -> the input's table, or None where the store
# cannot give it (too few models, another dataset).
StoreAnalysis = Callable[["xr.Dataset", str, StoreSettings], "pd.DataFrame | None"]


def knn(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """kNN separability of the dataset's targets, both fold protocols (Shannon entropy)."""
    return knn_table({dataset: store}, features=s.features, settings=s.knn)


def expansion(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """ΔH against the nucleus-size change, with the dataset column of a stacked table."""
    return expansion_spearman(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


def overlap(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """Adjacent-layer overlap of the top-p sets, with the dataset column of a stacked table."""
    return nucleus_overlap(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


def shapes(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """The profiles' shape statistics, with the dataset column of a stacked table."""
    return profile_shapes(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


def heldout(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame | None:
    """The held-out family on the blank set, as the run's own table decides it (``None`` elsewhere)."""
    if not _families(store, dataset):
        return None
    return family_heldout({dataset: store}, features=s.features, settings=s.knn)


def pairs(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame | None:
    """The same-family pairs on the blank set: family, not size, and size as resolution (``None`` elsewhere)."""
    if not _families(store, dataset):
        return None
    return family_pairs(store, grid_points=s.grid_points, n_boot=s.n_boot, seed=s.seed)


def _families(store: xr.Dataset, dataset: str) -> bool:
    """Whether the family claims are read from this store: the blank set, two models or more."""
    return dataset == BLANK and store.sizes["model"] >= 2
