"""The twin table: every learned-structure claim's statistic on the trained models and on their twins.

One row per claim's statistic (:data:`~entropy_lens.analysis.twins.contract.COLUMNS`), read on the datasets
both the trained models and their twins were profiled on: separability (task, scrambled control, format,
family or model identity), the Spearman of Delta H with the nucleus change, adjacent-layer containment and
Jaccard, the profile shapes, and the gaps of same-family pairs (blank set).  MMLU correctness has no twin
reading, and its row says why.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS
from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.twins.contract import frame, twin_name
from entropy_lens.analysis.twins.expansion import expansion_rows
from entropy_lens.analysis.twins.families import family_pair_rows, shape_rows
from entropy_lens.analysis.twins.separability import separability_rows
from entropy_lens.core.intervals import DEFAULT_N_BOOT


def twin_table(
    trained: Mapping[str, xr.Dataset],
    twins: Mapping[str, xr.Dataset],
    *,
    twin_seed: int,
    mmlu: bool = False,
    features: FeatureSettings | None = None,
    settings: KnnSettings | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    grid_points: int = DEFAULT_GRID_POINTS,
) -> pd.DataFrame:
    """Every twin reading of the datasets both sides hold.

    Args:
        trained: Combined stores of the trained models, by dataset.
        twins: Combined stores of the twins, by dataset.
        twin_seed: The seed the twins' weights were drawn from (named in every row's ``null_name``).
        mmlu: Whether the run profiled MMLU (MMLU correctness gets its "no twin reading" row).
        features: Feature settings of the separability rows.
        settings: kNN settings of the separability rows.
        n_boot: Bootstrap replicates of every other row.
        seed: Seed of the bootstraps.
        grid_points: Points of the depth grid of the family gaps.

    Returns:
        The twin table, rows in reading order (separability, expansion, shapes, family pairs).
    """
    name = twin_name(twin_seed)
    rows = separability_rows(trained, twins, name, mmlu=mmlu, features=features, settings=settings)
    rows += expansion_rows(trained, twins, name, n_boot=n_boot, seed=seed)
    rows += shape_rows(trained, twins, name, n_boot=n_boot, seed=seed)
    if "blank" in trained and "blank" in twins:
        rows += family_pair_rows(
            trained["blank"], twins["blank"], name, grid_points=grid_points, n_boot=n_boot, seed=seed
        )
    return frame(rows)
